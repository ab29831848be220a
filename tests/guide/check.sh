#!/usr/bin/env bash
# docs/user-guide.md, checked: every shell block carries a marker (run / suite: STEP / manual:
# WHY), every `suite:` names a step of ./hematite test, every `manual:` says why, and the `run`
# blocks run as written, in order, in one shell (set -e), with a state directory of their own
# and HEMATITE_PROFILE=test (the test-profile builds the suite made; no release build).
#
#   tests/guide/check.sh [--list]     (--list: show the blocks and their markers, run nothing)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
LIST=0
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--list]" --list=LIST=1 -- "$@"

GUIDE="${HM_GUIDE:-docs/user-guide.md}"   # (HM_GUIDE: another file, to try the checks)
SCRATCH="$(mktemp -d /tmp/hm-guide.XXXXXX)"
export HEMATITE_PROFILE=test HEMATITE_RUN_DIR="$SCRATCH/state"
cleanup() {
    [ -x target/debug/hematite-run ] && target/debug/hematite-run --stop > /dev/null 2>&1
    rm -rf "$SCRATCH"
}
trap cleanup EXIT

# the blocks, the checks of their markers, and the script of the `run` ones
python3 - "$GUIDE" "$SCRATCH" "$LIST" <<'PY' || exit 1
import re, sys
guide, scratch, listing = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
lines = open(guide).read().split("\n")
steps = re.findall(r'^\s*step "([^"]*)"', open("hematite").read(), re.M)
errors, blocks, section = [], [], ""
i = 0
while i < len(lines):
    l = lines[i]
    if l.startswith("## "):
        section = l[3:].strip()
    if l.startswith("```"):
        if l.strip() != "```sh":
            errors.append(f"{guide}:{i+1}: a code block that is not ```sh ({l.strip()}); the guide's blocks are shell commands")
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1:j]
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        m = re.fullmatch(r"<!-- guide: (run|suite: (.+)|manual: (.+)) -->", lines[k].strip()) if k >= 0 else None
        if not m:
            errors.append(f"{guide}:{i+1}: the block has no marker (<!-- guide: run | suite: STEP | manual: WHY --> on the line before)")
        elif m.group(1).startswith("suite:"):
            want = m.group(2).strip()
            short = want.split(" (")[0]
            if not any(want in s or short in s for s in steps):
                errors.append(f"{guide}:{i+1}: `suite: {want}` names no step of ./hematite test")
        elif m.group(1).startswith("manual:") and len(m.group(3).strip()) < 10:
            errors.append(f"{guide}:{i+1}: `manual:` needs a reason")
        blocks.append((i + 1, section, m.group(1) if m else "?", body))
        i = j
    i += 1
if errors:
    print("\n".join("FAIL  " + e for e in errors))
    sys.exit(1)
kinds = [b[2].split(":")[0] for b in blocks]
print(f"guide: {len(blocks)} blocks: {kinds.count('run')} run here, {kinds.count('suite')} run by other suite steps, {kinds.count('manual')} manual")
if listing:
    for ln, sec, kind, body in blocks:
        print(f"  line {ln:4} [{sec}] {kind}: " + " ; ".join(x for x in body if x.strip())[:110])
with open(f"{scratch}/run.sh", "w") as f:
    f.write("set -euo pipefail\n")
    for ln, sec, kind, body in blocks:
        if kind != "run":
            continue
        f.write(f"echo '== {guide}:{ln} [{sec}]'; T0=$SECONDS\n")
        f.write("\n".join(body) + "\n")
        f.write(f"echo \"ok    {guide}:{ln} [{sec}] ($((SECONDS - T0)) s)\"\n")
PY
[ "$LIST" = 1 ] && exit 0

mkdir -p "$HEMATITE_RUN_DIR"
t0=$SECONDS
timeout -k 10 1200 bash "$SCRATCH/run.sh" > "$SCRATCH/out.txt" 2>&1
rc=$?
grep -E '^(ok|==) ' "$SCRATCH/out.txt" | grep '^ok' 
if [ $rc -ne 0 ]; then
    echo "FAIL  the guide's commands stopped (rc=$rc) in the block:"
    grep '^== ' "$SCRATCH/out.txt" | tail -1
    echo "   --- last lines"; tail -n 25 "$SCRATCH/out.txt" | sed 's/^/   /'
    exit 1
fi
echo "guide: every run block passed in $((SECONDS - t0)) s"
