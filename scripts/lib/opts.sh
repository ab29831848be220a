# shellcheck shell=bash
# Command-line options of the project's scripts, parsed one way. Source this file, then
#
#   hm_opts "USAGE" --name=VAR --flag=VAR=VALUE ... -- "$@"
#
# `--name=VAR`: the option takes a value, stored in VAR. `--flag=VAR=VALUE`: a flag, VAR
# becomes VALUE. Only options (no positional arguments). An unknown option, or an option
# without its value, prints `usage: SCRIPT USAGE` and exits with status 2.
hm_opts() {
    local usage="$1"
    shift
    local -a spec=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        spec+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift
    local s opt rest hit
    while [ $# -gt 0 ]; do
        hit=""
        for s in "${spec[@]}"; do
            opt="${s%%=*}"
            rest="${s#*=}"
            [ "$1" = "$opt" ] || continue
            hit=1
            if [[ "$rest" == *=* ]]; then
                printf -v "${rest%%=*}" '%s' "${rest#*=}"
                shift
            elif [ $# -lt 2 ]; then
                echo "$0: $1 needs a value" >&2
                echo "usage: $0 $usage" >&2
                exit 2
            else
                printf -v "$rest" '%s' "$2"
                shift 2
            fi
            break
        done
        if [ -z "$hit" ]; then
            echo "$0: unknown option $1" >&2
            echo "usage: $0 $usage" >&2
            exit 2
        fi
    done
}
