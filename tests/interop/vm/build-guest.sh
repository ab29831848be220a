#!/usr/bin/env bash
# Build (and cache) the Linux Soft-RoCE guest of the interoperability tests: a Debian 12
# kernel (linux-image-6.1.0-*-amd64) with rdma_rxe, and an initramfs with rdma-core's tools,
# perftest and our init (tests/interop/vm/init), all from Debian packages.
#
#   tests/interop/vm/build-guest.sh [--state DIR] [--force]
#
# Writes DIR/image/vmlinux (the uncompressed kernel, booted through its PVH entry: qemu
# -kernel accepts the ELF, and a TCG guest skips seconds of decompressing a bzImage) and
# DIR/image/initramfs.cpio (uncompressed newc), DIR/image/kver and DIR/image/stamp.
# DIR defaults to $RXE_VM_STATE, else /tmp/hematite-rxe-vm. The packages are fetched with
# `apt-get download` into DIR/debs once (about 80 MB); the image is rebuilt only when its
# inputs change (the package files, this script, init, guest_tree.py), or with --force.
# KERNEL_PKG=linux-image-6.1.0-N-amd64 pins the kernel (default: what linux-image-amd64
# depends on). Needs: dpkg, apt-get, python3; installs qemu-system-x86, cpio, xz-utils and
# binutils with apt when they are missing (as root). Nothing runs as root in the image build
# itself beyond that; no package's maintainer scripts run (dpkg -x only unpacks).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${RXE_VM_STATE:-/tmp/hematite-rxe-vm}"
FORCE=0
source "$HERE/../../../scripts/lib/opts.sh"
hm_opts "[--state DIR] [--force]" \
    --state=STATE --force=FORCE=1 -- "$@"
say() { echo "build-guest: $*"; }
die() { echo "build-guest: $*" >&2; exit 1; }

# ---------------------------------------------------------------- host tools
need=()
command -v qemu-system-x86_64 > /dev/null || need+=(qemu-system-x86)
command -v cpio > /dev/null || need+=(cpio)
command -v xz > /dev/null || need+=(xz-utils)
command -v readelf > /dev/null || need+=(binutils)
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing: ${need[*]} (apt-get install them, or run as root)"
    say "apt-get install ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" > /dev/null
fi
for t in dpkg apt-get apt-cache python3 flock; do command -v $t > /dev/null || die "$t not found"; done

mkdir -p "$STATE/debs"
exec 9> "$STATE/lock"
flock 9                       # one builder at a time per state directory

# ---------------------------------------------------------------- packages
# The guest's userspace packages; guest_tree.py takes from them only the programs it lists
# and the libraries those need (and says which library is missing if this list falls short).
PKGS=(busybox-static iproute2 ibverbs-utils ibverbs-providers perftest
      libc6 libibverbs1 librdmacm1 libibumad3 libnl-3-200 libnl-route-3-200 libpci3 libudev1
      libmnl0 libbsd0 libmd0 libelf1 zlib1g libbpf1 libcap2)
resolve_kernel() {
    [ -n "${KERNEL_PKG:-}" ] && { echo "$KERNEL_PKG"; return; }
    apt-cache depends linux-image-amd64 2> /dev/null | sed -nE 's/^ *Depends: (linux-image-[0-9][^ ]*-amd64)$/\1/p' | head -1
}
KPKG="$(resolve_kernel)"
if [ -z "$KPKG" ]; then apt-get update -qq || true; KPKG="$(resolve_kernel)"; fi
if [ -z "$KPKG" ]; then
    # offline and no package lists: the newest kernel already in the cache
    KPKG="$(cd "$STATE/debs" && ls linux-image-6.1.0-*-amd64_*.deb 2> /dev/null | sed 's/_.*//' | sort -V | tail -1)"
fi
[ -n "$KPKG" ] || die "cannot resolve the kernel package (linux-image-amd64's dependency)"
KVER="${KPKG#linux-image-}"

deb_of() { compgen -G "$STATE/debs/${1}_*.deb" | sort -V | tail -1; }
missing=()
for p in "$KPKG" "${PKGS[@]}"; do [ -n "$(deb_of "$p")" ] || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get download ${#missing[@]} packages into $STATE/debs"
    dl() { (cd "$STATE/debs" && apt-get download "${missing[@]}" > "$STATE/download.log" 2>&1); }
    dl || { apt-get update -qq; dl; } || { cat "$STATE/download.log" >&2; die "apt-get download failed"; }
fi
DEBS=()
for p in "$KPKG" "${PKGS[@]}"; do
    d="$(deb_of "$p")"; [ -n "$d" ] || die "no package file for $p in $STATE/debs"; DEBS+=("$d")
done

# ---------------------------------------------------------------- up to date?
IMG="$STATE/image"
STAMP="$({ for d in "${DEBS[@]}"; do basename "$d"; done
           sha256sum "$HERE/build-guest.sh" "$HERE/init" "$HERE/guest_tree.py" | cut -d' ' -f1
         } | sha256sum | cut -c1-16)"
if [ $FORCE = 0 ] && [ -f "$IMG/vmlinux" ] && [ -f "$IMG/initramfs.cpio" ] &&
   [ "$(cat "$IMG/stamp" 2> /dev/null)" = "$STAMP" ]; then
    say "up to date: $IMG ($KVER, initramfs $(du -h "$IMG/initramfs.cpio" | cut -f1))"
    exit 0
fi

# ---------------------------------------------------------------- build
T0=$SECONDS
NEW="$STATE/image.new"; STAGE="$STATE/stage"
rm -rf "$NEW" "$STAGE"; mkdir -p "$NEW" "$STAGE"
say "unpacking ${#DEBS[@]} packages (kernel $KVER)"
for d in "${DEBS[@]}"; do dpkg -x "$d" "$STAGE"; done

# vmlinuz is a bzImage: setup code, then the xz-compressed ELF kernel. Find the xz stream
# (magic FD 37 7A 58 5A 00) and decompress it; xz stops at the stream's end and complains
# about the trailing bytes, hence the ELF check rather than xz's status.
VMLINUZ="$STAGE/boot/vmlinuz-$KVER"
[ -f "$VMLINUZ" ] || die "$VMLINUZ not in $KPKG"
python3 - "$VMLINUZ" "$NEW/vmlinux" <<'PY' || die "could not extract the kernel's ELF image from $VMLINUZ"
import lzma, sys
data = open(sys.argv[1], "rb").read()
start = 0
while True:
    i = data.find(b"\xfd7zXZ\x00", start)
    if i < 0:
        sys.exit("no xz stream")
    try:
        out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[i:])
    except lzma.LZMAError:
        start = i + 1
        continue
    if out[:4] == b"\x7fELF":
        open(sys.argv[2], "wb").write(out)
        break
    start = i + 1
PY
readelf -h "$NEW/vmlinux" > /dev/null 2>&1 || die "the extracted kernel is not an ELF file"
readelf -n "$NEW/vmlinux" 2> /dev/null | grep -q 'Xen' || say "warning: no PVH (Xen ELF note) in vmlinux; qemu may refuse it"

ROOTFS="$STAGE/.guest"
python3 "$HERE/guest_tree.py" "$STAGE" "$ROOTFS" "$KVER" | sed 's/^/build-guest: /'
install -m 0755 "$HERE/init" "$ROOTFS/init"
mkdir -p "$ROOTFS/etc" "$ROOTFS/sbin" "$ROOTFS/usr/sbin"
echo 'root:x:0:0:root:/root:/bin/sh' > "$ROOTFS/etc/passwd"
echo 'root:x:0:' > "$ROOTFS/etc/group"
printf '127.0.0.1 localhost\n' > "$ROOTFS/etc/hosts"
echo 'hosts: files' > "$ROOTFS/etc/nsswitch.conf"
command -v ldconfig > /dev/null && ldconfig -r "$ROOTFS" 2> /dev/null || true
# the same packages give the same archive: fixed times, no inode or device numbers
find "$ROOTFS" -exec touch -h -d @0 {} +
(cd "$ROOTFS" && find . | LC_ALL=C sort | cpio -o -H newc --quiet --reproducible) > "$NEW/initramfs.cpio"
echo "$KVER" > "$NEW/kver"
echo "$STAMP" > "$NEW/stamp"
rm -rf "$IMG.old"; [ -d "$IMG" ] && mv "$IMG" "$IMG.old"
mv "$NEW" "$IMG"; rm -rf "$IMG.old" "$STAGE"
say "built $IMG in $((SECONDS - T0)) s: vmlinux $(du -h "$IMG/vmlinux" | cut -f1), initramfs $(du -h "$IMG/initramfs.cpio" | cut -f1) ($KVER)"
