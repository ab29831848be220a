#!/usr/bin/env python3
"""Plots the DCQCN incast experiment (hematite-experiment dcqcn, docs/experiments.md).

Reads DIR/dcqcn_*.csv (lines starting with '#' are the run's parameters and summary) and writes,
next to each CSV, a PNG with the per-flow throughput and pacing rate (top) and the bottleneck
queue (bottom) on a shared time axis; plus DIR/overview.png with the per-flow throughput of every
run in one grid. Headless (matplotlib's Agg backend).

usage: plot_dcqcn.py [DIR] [--out OUTDIR] [--no-overview]
"""

import argparse
import csv
import glob
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_run(path):
    """Returns (meta dict, list of row dicts) of one time-series CSV."""
    meta = {}
    lines = []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#"):
                text = line[1:].strip()
                for key in ("preset", "n", "cc", "pfc", "scale"):
                    m = re.search(r"(?:^|\s)%s=(\S+)" % key, text)
                    if m and key not in meta:
                        meta[key] = m.group(1)
                m = re.search(r"backend=(.*?) scale=", text)
                if m:
                    meta["backend"] = m.group(1)
                m = re.search(r"kmin=(\d+);kmax=(\d+)", text)
                if m:
                    meta["kmin_kb"] = int(m.group(1)) / 1000.0
                    meta["kmax_kb"] = int(m.group(2)) / 1000.0
                m = re.search(r"pfc_xoff=(\d+)", text)
                if m:
                    meta["xoff_kb"] = int(m.group(1)) / 1000.0
                if text.startswith("summary:"):
                    for key in ("fairness", "util", "steady_from_us", "drops", "pfc_frames", "cnps"):
                        m = re.search(r"\b%s=(\S+)" % key, text)
                        if m:
                            meta[key] = m.group(1)
                    m = re.search(r"converge_us=(not converged|\S+)", text)
                    if m:
                        meta["converge_us"] = m.group(1)
            else:
                lines.append(line)
    rows = list(csv.DictReader(lines))
    if not rows:
        raise ValueError("%s: no samples" % path)
    meta["flows"] = len([k for k in rows[0] if re.fullmatch(r"f\d+_gbps", k)])
    return meta, rows


def col(rows, key):
    return [float(r[key]) for r in rows]


def title_of(meta):
    conv = meta.get("converge_us", "?")
    if conv not in ("not converged", "?"):
        conv = "converged after %.1f ms" % (float(conv) / 1000.0)
    return "DCQCN %s, N=%s, cc %s, PFC %s, time compression s=%s: Jain %s, %s" % (
        meta.get("preset", "?"),
        meta.get("n", "?"),
        meta.get("cc", "?"),
        meta.get("pfc", "?"),
        meta.get("scale", "?"),
        meta.get("fairness", "?"),
        conv,
    )


def plot_run(path, outdir):
    meta, rows = read_run(path)
    t = [x / 1000.0 for x in col(rows, "time_us")]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(11, 7), gridspec_kw={"height_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i in range(meta["flows"]):
        c = colors[i % len(colors)]
        ax1.plot(t, col(rows, "f%d_gbps" % i), color=c, lw=1.0, label="flow %d throughput" % i)
        ax1.plot(t, col(rows, "f%d_rate_gbps" % i), color=c, lw=0.8, ls="--", alpha=0.7)
    ax1.plot([], [], color="grey", ls="--", label="pacing rate (dashed)")
    ax1.set_ylabel("Gb/s (per flow)")
    ax1.set_ylim(0, 105)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper right", fontsize=7, ncol=2)
    steady = meta.get("steady_from_us")
    for ax in (ax1, ax2):
        if steady:
            ax.axvline(float(steady) / 1000.0, color="k", lw=0.6, ls=":")
    q = col(rows, "queue_kb")
    qmax = col(rows, "queue_max_kb")
    ax2.fill_between(t, 0, qmax, color="tab:blue", alpha=0.2, step="pre", label="max in window")
    ax2.plot(t, q, color="tab:blue", lw=0.8, label="at window end")
    if "kmin_kb" in meta:
        ax2.axhline(meta["kmin_kb"], color="tab:green", lw=0.7, ls="--", label="Kmin")
        ax2.axhline(meta["kmax_kb"], color="tab:red", lw=0.7, ls="--", label="Kmax")
    if meta.get("pfc") == "on" and "xoff_kb" in meta:
        ax2.axhline(meta["xoff_kb"] * int(meta["n"]), color="tab:purple", lw=0.7, ls="-.", label="N x XOFF")
    ax2.set_ylabel("bottleneck queue (KB, real = sim x s)")
    ax2.set_xlabel("time (ms, real = simulated x s); dotted: start of the steady-state window")
    ax2.grid(alpha=0.3)
    ax2.legend(loc="upper right", fontsize=7)
    fig.suptitle(title_of(meta), fontsize=10)
    fig.tight_layout()
    out = os.path.join(outdir, os.path.splitext(os.path.basename(path))[0] + ".png")
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out, meta, rows


def plot_overview(runs, outdir):
    keys = sorted({(m.get("preset", "?"), m.get("cc", "?"), m.get("pfc", "?")) for _, m, _ in runs})
    ns = sorted({int(m.get("n", 0)) for _, m, _ in runs})
    fig, axes = plt.subplots(len(keys), len(ns), sharex=True, sharey=True, figsize=(4 * len(ns), 2.4 * len(keys)), squeeze=False)
    for _, meta, rows in runs:
        r = keys.index((meta.get("preset", "?"), meta.get("cc", "?"), meta.get("pfc", "?")))
        c = ns.index(int(meta.get("n", 0)))
        ax = axes[r][c]
        t = [x / 1000.0 for x in col(rows, "time_us")]
        for i in range(meta["flows"]):
            ax.plot(t, col(rows, "f%d_gbps" % i), lw=0.6)
        ax.set_title("%s N=%s cc %s pfc %s: J=%s" % (meta.get("preset"), meta.get("n"), meta.get("cc"), meta.get("pfc"), meta.get("fairness")), fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 105)
    for ax in axes[-1]:
        ax.set_xlabel("ms (real)")
    for row in axes:
        row[0].set_ylabel("Gb/s")
    scales = sorted({m.get("scale", "?") for _, m, _ in runs})
    fig.suptitle("DCQCN incast, per-flow throughput (time compression s=%s)" % ",".join(scales), fontsize=11)
    fig.tight_layout()
    out = os.path.join(outdir, "overview.png")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", default="build/experiment/dcqcn")
    ap.add_argument("--out", default=None, help="where the PNGs go (default: DIR)")
    ap.add_argument("--no-overview", action="store_true")
    a = ap.parse_args(argv)
    outdir = a.out or a.dir
    os.makedirs(outdir, exist_ok=True)
    files = sorted(glob.glob(os.path.join(a.dir, "dcqcn_*.csv")))
    if not files:
        print("plot_dcqcn.py: no dcqcn_*.csv in %s" % a.dir, file=sys.stderr)
        return 1
    runs = []
    for f in files:
        out, meta, rows = plot_run(f, outdir)
        runs.append((out, meta, rows))
        print(out)
    if not a.no_overview:
        print(plot_overview(runs, outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
