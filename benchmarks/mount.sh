#!/usr/bin/env bash
# Benchmarks `protfs mount` against the backing directory, side by side, alternating, warm cache
# (compare.py: medians and ratios):
#   - sequential read of a 1 GiB class-none file, warm (target: a time ratio <= 1.1);
#   - sequential write of 1 GiB into a class-none directory (target: ratio <= 1.5);
#   - find + stat of 100,000 files (200 directories x 500; target: ratio <= 1.5; a listing
#     repeated within the mount's 10 s cache time is served by the kernel);
# then the daemon's RSS with those 100,000 files looked up and 64 files held open (target < 64 MiB).
# After the read it prints how much of each copy's page cache is in large folios: FUSE's is in
# 4 KiB folios on kernels up to at least 6.18, and the kernel then does per 4 KiB what ext4 does
# per 2 MiB: the difference of a warm read, in which the daemon takes no part.
#
# Usage: benchmarks/mount.sh [--runs N] [--protfs PATH]     (as root: mounting needs it)
# The tree is built once under .benchmarks/ (gitignored) and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh
repo=$PWD
runs=5
mount_benchmark_options "$0" "$@"
work=$repo/.benchmarks/mount
device=$work/device
mnt=$work/mnt
docs=$device/Containers/com.bench.app/Documents
mkdir -p "$work" "$mnt"

if [ ! -f "$work/.complete" ]; then
  rm -rf "$device"
  "$protfs" --device "$device" init com.bench.app --default-class none >/dev/null 2>&1
  dd if=/dev/urandom of="$docs/big.bin" bs=1M count=1024 status=none
  python3 - "$docs/tree" <<'PY'
import os, sys
root = sys.argv[1]
os.makedirs(root, exist_ok=True)
for d in range(200):
    path = os.path.join(root, f"d{d:03}")
    os.makedirs(path, exist_ok=True)
    for f in range(500):
        open(os.path.join(path, f"f{f:03}"), "w").close()
PY
  touch "$work/.complete"
fi

cleanup() { "$protfs" --device "$device" unmount "$mnt" >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$protfs" --device "$device" mount "$mnt" >/dev/null
through=$mnt/com.bench.app/Documents

quiet_machine
echo "== sequential read, 1 GiB, class none (warm)"
python3 benchmarks/compare.py --runs "$runs" \
  --name mount -- cat "$through/big.bin" \
  --name backing -- cat "$docs/big.bin"

# What the read's ratio rests on: the folio sizes of the two page caches (benchmarks/folios.py).
python3 benchmarks/folios.py "$through/big.bin" "$docs/big.bin"

echo "== sequential write, 1 GiB (dd bs=1M), class none"
python3 benchmarks/compare.py --runs "$runs" \
  --name mount -- dd if=/dev/zero of="$through/written.bin" bs=1M count=1024 status=none \
  --name backing -- dd if=/dev/zero of="$docs/written.bin" bs=1M count=1024 status=none
rm -f "$docs/written.bin"

echo "== find + stat, 100,000 files"
python3 benchmarks/compare.py --runs "$runs" \
  --name mount -- find "$through/tree" -printf '%s %m\n' \
  --name backing -- find "$docs/tree" -printf '%s %m\n'

echo "== daemon RSS: 100,000 files looked up, 64 files open"
find "$through/tree" -printf '%s\n' >/dev/null
pid=$(sed -n 's/.*"pid" *: *\([0-9]*\).*/\1/p' "$device"/.protfs/mounts/*.json | head -1)
python3 - "$through/tree" "$pid" <<'PY'
import os, sys
root, pid = sys.argv[1], sys.argv[2]
files = [open(os.path.join(root, f"d{i:03}", "f000"), "rb") for i in range(64)]
status = open(f"/proc/{pid}/status").read()
rss = [l for l in status.splitlines() if l.startswith(("VmRSS", "VmHWM"))]
print("daemon", pid, "; ".join(" ".join(l.split()) for l in rss))
for f in files: f.close()
PY
