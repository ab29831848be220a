#!/bin/sh
# Regenerates the RoCEv2 vectors into a temporary directory and compares them byte for byte
# with the committed tests/data/vectors; exit 0 when identical, 1 on any difference, 2 when the
# generator itself fails (a cross-check disagreed, or scapy is not the pinned version).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "${PYTHON:-python3}" "$here/gen_vectors.py" --check --out "$here/../data/vectors"
