#!/usr/bin/env python3
"""Assemble the root tree of the Soft-RoCE guest from unpacked Debian packages.

    guest_tree.py STAGE ROOT KVER

STAGE holds every guest package unpacked with `dpkg -x` (the kernel package included); ROOT is
created and receives only what the guest runs:

  * the programs listed in PROGRAMS below and the rxe verbs provider, with the closure of the
    shared libraries they name (ELF DT_NEEDED, read with `readelf -d`) and the dynamic loader;
    a library that cannot be found in STAGE is an error, so a missing package shows up here
    and not as a guest that cannot run a tool;
  * the kernel modules listed in MODULES with the closure of their dependencies (the
    `depends=` entry of each module's .modinfo section), a modules.dep for them, and
    /etc/hm-modules: their paths in load order (dependencies first), which the guest's init
    loads with insmod (the guest has no udev and no kmod).

Prints a one-line summary. Python 3 standard library only (plus readelf).
"""
import os
import shutil
import subprocess
import sys

# Guest programs (paths inside the packages). Directories: every ELF file in them.
PROGRAMS = [
    "bin/busybox",                      # the shell, init's tools, timeout, netstat, killall, ...
    "usr/bin/rdma",                     # iproute2: rdma link add / show, statistics
    "bin/ip",                           # iproute2's ip (busybox has one too; this one is complete)
    "usr/bin/ibv_devinfo", "usr/bin/ibv_devices",
    "usr/bin/ibv_rc_pingpong", "usr/bin/ibv_uc_pingpong", "usr/bin/ibv_ud_pingpong",
    "usr/bin/ibv_srq_pingpong",
    "usr/bin/ib_send_bw", "usr/bin/ib_send_lat", "usr/bin/ib_write_bw", "usr/bin/ib_write_lat",
    "usr/bin/ib_read_bw", "usr/bin/ib_read_lat", "usr/bin/ib_atomic_bw", "usr/bin/ib_atomic_lat",
]
PROVIDERS = ["usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"]
CONFIG = ["etc/libibverbs.d/rxe.driver"]
# Kernel modules by name; crc32 backs rxe's ICRC (crypto "crc32"), the PCLMUL one is faster;
# 9p over virtio lets tests/pyverbs/rxe-column.sh share the host's root file system.
MODULES = ["virtio_pci", "virtio_net", "crc32_generic", "crc32_pclmul", "rdma_rxe", "ib_uverbs",
           "rdma_ucm", "ib_umad", "9p", "9pnet_virtio"]
LIBDIRS = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "lib", "usr/lib"]
LOADER = "lib64/ld-linux-x86-64.so.2"


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def needed(path):
    out = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        if "(NEEDED)" in line and "[" in line:
            libs.append(line.split("[", 1)[1].split("]", 1)[0])
    return libs


def copy_file(stage, root, rel):
    """Copy STAGE/rel to ROOT/rel, following symbolic links (the guest gets plain files)."""
    src = os.path.join(stage, rel)
    dst = os.path.join(root, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        return
    shutil.copy2(os.path.realpath(src), dst)


def main():
    stage, root, kver = sys.argv[1:4]
    os.makedirs(root, exist_ok=True)

    # -------------------------------------------------------------- programs and libraries
    todo = []
    for p in PROGRAMS + PROVIDERS:
        if not os.path.exists(os.path.join(stage, p)):
            sys.exit("guest_tree: %s is not in the unpacked packages" % p)
        todo.append(p)
    for c in CONFIG:
        copy_file(stage, root, c)
    seen = set()
    sonames = {}
    missing = []
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        copy_file(stage, root, rel)
        path = os.path.join(stage, rel)
        if not is_elf(os.path.realpath(path)):
            continue
        for lib in needed(os.path.realpath(path)):
            if lib in sonames:
                continue
            for d in LIBDIRS:
                cand = os.path.join(d, lib)
                if os.path.exists(os.path.join(stage, cand)):
                    sonames[lib] = cand
                    todo.append(cand)
                    break
            else:
                missing.append("%s (needed by %s)" % (lib, rel))
    if missing:
        sys.exit("guest_tree: shared libraries not found in the guest packages: " + ", ".join(missing))
    # the dynamic loader under its ABI path
    ld = "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    if not os.path.exists(os.path.join(stage, ld)):
        sys.exit("guest_tree: no dynamic loader (%s) in the guest packages" % ld)
    copy_file(stage, root, ld)
    os.makedirs(os.path.join(root, "lib64"), exist_ok=True)
    if not os.path.lexists(os.path.join(root, LOADER)):
        os.symlink("/" + ld, os.path.join(root, LOADER))

    # -------------------------------------------------------------- kernel modules
    mroot = os.path.join("lib/modules", kver)
    kdir = os.path.join(stage, mroot)
    by_name = {}
    for dirpath, _, files in os.walk(kdir):
        for f in files:
            if f.endswith(".ko"):
                by_name[f[:-3].replace("-", "_")] = os.path.relpath(os.path.join(dirpath, f), kdir)

    def deps_of(rel):
        with open(os.path.join(kdir, rel), "rb") as f:
            data = f.read()
        i = data.find(b"\0depends=")
        if i < 0:
            return []
        s = data[i + 9:data.index(b"\0", i + 9)].decode()
        return [d.replace("-", "_") for d in s.split(",") if d]

    order = []
    deps = {}
    state = {}

    def visit(name, chain):
        if state.get(name) == "done":
            return
        if state.get(name) == "busy":
            sys.exit("guest_tree: module dependency cycle: " + " -> ".join(chain + [name]))
        if name not in by_name:
            sys.exit("guest_tree: kernel module %s not in %s" % (name, kdir))
        state[name] = "busy"
        deps[name] = deps_of(by_name[name])
        for d in deps[name]:
            visit(d, chain + [name])
        state[name] = "done"
        order.append(name)

    for m in MODULES:
        visit(m, [])
    for name in order:
        copy_file(stage, root, os.path.join(mroot, by_name[name]))

    def closure(name, acc):
        for d in deps[name]:
            if d not in acc:
                acc.append(d)
                closure(d, acc)
        return acc

    with open(os.path.join(root, mroot, "modules.dep"), "w") as f:
        for name in order:
            f.write("%s: %s\n" % (by_name[name], " ".join(by_name[d] for d in closure(name, []))))
    for extra in ("modules.builtin", "modules.order"):
        if os.path.exists(os.path.join(kdir, extra)):
            shutil.copy2(os.path.join(kdir, extra), os.path.join(root, mroot, extra))
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc/hm-modules"), "w") as f:
        for name in order:
            f.write("/%s/%s\n" % (mroot, by_name[name]))
    print("guest tree: %d programs and libraries, %d kernel modules (%s)"
          % (len(seen) + 1, len(order), " ".join(order)))


if __name__ == "__main__":
    main()
