# shellcheck shell=bash
# The simulated NICs for a script that runs programs through hematite-run. Source this file
# (from the repository root), then
#
#   hm_sim_build PROFILE
#
# builds hematite-sim, the verbs provider and hematite-run in PROFILE (release | test), and the
# firmware image when build/fw/firmware.hex is missing; sets TDIR (the target folder) and RUN
# (hematite-run), and exports HEMATITE_SIM, HEMATITE_PROVIDER and HEMATITE_FW. Returns 2 for
# another profile, 1 when a build fails.
hm_sim_build() {
    case "$1" in release) TDIR=target/release ;; test) TDIR=target/debug ;; *) echo "bad profile: $1" >&2; return 2 ;; esac
    echo "== building hematite-sim, the provider and hematite-run ($1 profile), the firmware"
    { cargo build -q --profile "$1" -p hematite-sim --bin hematite-sim && cargo build -q --profile "$1" -p hematite-verbs -p hematite-run; } || return 1
    [ -f build/fw/firmware.hex ] || ./hematite fw || return 1
    RUN="$PWD/$TDIR/hematite-run"
    export HEMATITE_SIM="$PWD/$TDIR/hematite-sim" HEMATITE_PROVIDER="$PWD/$TDIR/libhematite_verbs.so" HEMATITE_FW="$PWD/build/fw/firmware.hex"
}
