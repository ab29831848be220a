#!/usr/bin/env python3
"""Per-test table of an rdma-core tests/run_tests.py -v log (unittest's verbose output), as
Markdown: test, result (pass / skip / FAIL / ERROR), and the skip reason.

    conformance.py LOG TITLE > conformance.md

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


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = parse(open(sys.argv[1], encoding="utf-8", errors="replace").read())
    if not rows:
        print(f"{sys.argv[1]}: no test results", file=sys.stderr)
        return 1
    n = {k: sum(1 for r in rows if r[1] == k) for k in ("pass", "skip", "FAIL", "ERROR")}
    print(f"# rdma-core's tests on a simulated Hematite NIC\n")
    print(f"{sys.argv[2]}: {len(rows)} tests, {n['pass']} passed, {n['skip']} skipped, "
          f"{n['FAIL']} failed, {n['ERROR']} errors. Written by `tests/pyverbs/pyverbs.sh` "
          f"(docs/verbs-provider.md); a skip gives rdma-core's own reason.\n")
    print("| test | result | reason |")
    print("|---|---|---|")
    for what, res, why in sorted(rows):
        print(f"| `{what.removeprefix('tests.')}` | {res} | {why.replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
