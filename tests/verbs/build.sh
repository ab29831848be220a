#!/bin/sh
# Build the Hematite verbs test programs.
#   tests/verbs/build.sh [OUTDIR]      (default: build/verbs under the repo root)
# Needs gcc and libibverbs-dev (Debian 12: libibverbs 44).  CC and CFLAGS may
# be overridden from the environment; the default flags are the strict set the
# programs are kept clean against.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/verbs}
cc=${CC:-gcc}
cflags=${CFLAGS:--O2 -g -Wall -Wextra -Werror -std=gnu11}

if [ ! -f /usr/include/infiniband/verbs.h ]; then
	echo "build.sh: /usr/include/infiniband/verbs.h missing (apt-get install libibverbs-dev)" >&2
	exit 1
fi
mkdir -p "$out"
for p in hm_nccl_replay hm_verbs_errors hm_verbs_ops hm_peer_loss hm_verbs_fuzz hm_dev_fatal hm_reclaim hm_multi_ctx hm_verbs_ex hm_mr_rereg hm_uc; do
	# shellcheck disable=SC2086
	$cc $cflags -o "$out/$p" "$here/$p.c" -libverbs -lpthread
	echo "built $out/$p"
done
