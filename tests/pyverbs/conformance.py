#!/usr/bin/env python3
"""Per-test table of an rdma-core tests/run_tests.py -v log (unittest's verbose output), as
Markdown: test, result (pass / skip / FAIL / ERROR), and the skip reason.

    conformance.py LOG TITLE > conformance.md
    conformance.py LOG TITLE RXE_LOG RXE_TITLE > conformance.md

With a second log (the same tests on Linux Soft-RoCE, tests/pyverbs/rxe-column.sh), the two
results and reasons stand side by side, with the tests that pass on one and not the other
counted (a test missing from one log is `-` there).

A test's result line is `name (module.Class.name) ... result`; its docstring's first line may sit
between the name and the `... result` part. Exits 1 when the log holds no result at all."""
import re
import sys


def parse(text):
    rows = []
    head = re.compile(r"^(\w+) \((tests\.[\w.]+)\)")
    # the result ends the header's line or a later one; a test's own output may come between
    # (then the result stands alone on its line)
    result = re.compile(r"(?:\.\.\. |^)(ok|skipped (['\"])(.*)\2|ERROR|FAIL)$")
    cur = None
    for line in text.splitlines():
        h = head.match(line)
        if h:
            cur = h.group(2)
        r = result.search(line)
        if cur and r:
            res = r.group(1)
            if res == "ok":
                rows.append((cur, "pass", ""))
            elif res in ("ERROR", "FAIL"):
                rows.append((cur, res, ""))
            else:
                rows.append((cur, "skip", r.group(3)))
            cur = None
    return rows


def counts(rows):
    n = {k: sum(1 for r in rows if r[1] == k) for k in ("pass", "skip", "FAIL", "ERROR")}
    return (f"{len(rows)} tests, {n['pass']} passed, {n['skip']} skipped, "
            f"{n['FAIL']} failed, {n['ERROR']} errors")


def main():
    if len(sys.argv) not in (3, 5):
        print(__doc__, file=sys.stderr)
        return 2
    logs = []
    for path in sys.argv[1::2]:
        rows = parse(open(path, encoding="utf-8", errors="replace").read())
        if not rows:
            print(f"{path}: no test results", file=sys.stderr)
            return 1
        logs.append(rows)
    name = lambda t: t.removeprefix("tests.")
    if len(logs) == 1:
        rows = logs[0]
        print("# rdma-core's tests on a simulated Hematite NIC\n")
        print(f"{sys.argv[2]}: {counts(rows)}. Written by `tests/pyverbs/pyverbs.sh` "
              f"(docs/verbs-provider.md); a skip gives rdma-core's own reason.\n")
        print("| test | result | reason |")
        print("|---|---|---|")
        for what, res, why in sorted(rows):
            print(f"| `{name(what)}` | {res} | {why.replace('|', '/')} |")
        return 0
    h = {r[0]: r for r in logs[0]}
    x = {r[0]: r for r in logs[1]}
    both = sorted(set(h) | set(x))
    only_h = [t for t in both if h.get(t, ("", ""))[1] == "pass" and x.get(t, ("", ""))[1] != "pass"]
    only_x = [t for t in both if x.get(t, ("", ""))[1] == "pass" and h.get(t, ("", ""))[1] != "pass"]
    print("# rdma-core's tests on a simulated Hematite NIC and on Linux Soft-RoCE\n")
    print(f"- Hematite: {sys.argv[2]}: {counts(logs[0])}.")
    print(f"- Soft-RoCE: {sys.argv[4]}: {counts(logs[1])}.")
    print(f"- Pass on Hematite and not on Soft-RoCE: {len(only_h)}; pass on Soft-RoCE and not on "
          f"Hematite: {len(only_x)}.\n")
    print("Written by `tests/pyverbs/pyverbs.sh` and `tests/pyverbs/rxe-column.sh` "
          "(docs/verbs-provider.md); a skip gives rdma-core's own reason.\n")
    print("| test | Hematite | reason | Soft-RoCE | reason |")
    print("|---|---|---|---|---|")
    for t in both:
        a = h.get(t, (t, "-", ""))
        b = x.get(t, (t, "-", ""))
        print(f"| `{name(t)}` | {a[1]} | {a[2].replace('|', '/')} | {b[1]} | {b[2].replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
