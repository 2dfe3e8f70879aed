#!/usr/bin/env bash
# Benchmarks a sealed device through `protfs mount` against an unsealed one, side by side,
# alternating (compare.py: medians and ratios), both with the same default class (CLASS, default
# until-first-auth: every class but none is read and written through the daemon at each I/O on
# both devices, so the difference is the encryption):
#   - sequential write of 1 GiB (dd bs=1M; target: a time ratio <= 1.25);
#   - sequential read of that 1 GiB (cat; target: ratio <= 1.25);
#   - find + stat of 100,000 empty files, 200 directories x 500 (target: ratio <= 1.05);
# then the sealed device's lock and unlock while its mount knows those files (the mount applies
# the state before `lock` returns); then each daemon's memory (VmRSS, VmHWM) after 10,000 of those
# files were looked up and after all 100,000, with 64 files held open and read: flat in the number
# of files, as the unsealed daemon's (a file's key is held only while it is open).
#
# Usage: benchmarks/sealed-mount.sh [--runs N] [--protfs PATH]     (as root: mounting needs it)
# The trees are made through the mounts (so the sealed files have their keys) under
# .benchmarks/sealed-mount/ (gitignored), and removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh
repo=$PWD
runs=7
mount_benchmark_options "$0" "$@"
class=${CLASS:-until-first-auth}
work=$repo/.benchmarks/sealed-mount
rm -rf "$work"
mkdir -p "$work"

cleanup() {
  for kind in sealed plain; do
    "$protfs" --device "$work/$kind" unmount "$work/$kind-mnt" >/dev/null 2>&1 || true
  done
  # The sealed device's keys leave root's keyring (all but class D's) before its files go.
  "$protfs" --device "$work/sealed" reboot >/dev/null 2>&1 || true
  forget_tree "$work"
}
trap cleanup EXIT

for kind in sealed plain; do
  mkdir -p "$work/$kind" "$work/$kind-mnt"
  flags=(); [ "$kind" = sealed ] && flags=(--sealed)
  "$protfs" --device "$work/$kind" init "${flags[@]}" --default-class "$class" com.bench.app >/dev/null
  "$protfs" --device "$work/$kind" mount "$work/$kind-mnt" >/dev/null
  echo "Making 100,000 files through the $kind mount ..." >&2
  python3 - "$work/$kind-mnt/com.bench.app/Documents/tree" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(200):
    path = os.path.join(root, f"d{d:03}")
    os.makedirs(path)
    for f in range(500):
        os.close(os.open(os.path.join(path, f"f{f:03}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
PY
done
sealed=$work/sealed-mnt/com.bench.app/Documents
plain=$work/plain-mnt/com.bench.app/Documents
sync

quiet_machine
echo "== sequential write, 1 GiB (dd bs=1M), class $class"
python3 benchmarks/compare.py --runs "$runs" \
  --name sealed -- dd if=/dev/zero of="$sealed/big.bin" bs=1M count=1024 status=none \
  --name unsealed -- dd if=/dev/zero of="$plain/big.bin" bs=1M count=1024 status=none

echo "== sequential read, 1 GiB (cat), class $class"
python3 benchmarks/compare.py --runs "$runs" \
  --name sealed -- cat "$sealed/big.bin" \
  --name unsealed -- cat "$plain/big.bin"

echo "== find + stat, 100,000 files"
python3 benchmarks/compare.py --runs "$runs" \
  --name sealed -- find "$sealed/tree" -printf '%s %m\n' \
  --name unsealed -- find "$plain/tree" -printf '%s %m\n'

echo "== sealed lock --grace 0 and unlock, the mount knowing those 100,000 files (target < 10 ms each)"
find "$sealed/tree" -printf '%s\n' >/dev/null
python3 benchmarks/compare.py --runs "$runs" \
  --name lock -- "$protfs" --device "$work/sealed" lock --grace 0 \
  --name unlock -- "$protfs" --device "$work/sealed" unlock

echo "== daemon memory: 10,000 then 100,000 files looked up, 64 files open and read (fresh mounts)"
for kind in sealed plain; do
  "$protfs" --device "$work/$kind" unmount "$work/$kind-mnt" >/dev/null
  "$protfs" --device "$work/$kind" mount "$work/$kind-mnt" >/dev/null
  pid=$(sed -n 's/.*"pid" *: *\([0-9]*\).*/\1/p' "$work/$kind"/.protfs/mounts/*.json | head -1)
  python3 - "$work/$kind-mnt/com.bench.app/Documents" "$pid" "$kind" <<'PY'
import os, sys
docs, pid, kind = sys.argv[1], sys.argv[2], sys.argv[3]
def memory():
    status = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":" in l)
    return " ".join(f"{k} {int(status[k].split()[0]) / 1024:6.1f} MiB" for k in ("VmRSS", "VmHWM"))
def look_up(dirs):
    for d in range(dirs):
        path = os.path.join(docs, "tree", f"d{d:03}")
        for name in os.listdir(path): os.stat(os.path.join(path, name))
files = []
for i in range(64):
    f = open(os.path.join(docs, "tree", f"d{i:03}", "f000"), "r+b")
    f.write(b"x" * 5000); f.flush(); f.seek(0); f.read()
    files.append(f)
print(f"{kind:8} 64 open:               {memory()}")
look_up(20)
print(f"{kind:8} 10,000 files + 64 open:  {memory()}")
look_up(200)
print(f"{kind:8} 100,000 files + 64 open: {memory()}")
with open(os.path.join(docs, "big.bin"), "rb") as f:
    while f.read(1 << 20): pass
print(f"{kind:8} after reading 1 GiB:     {memory()}")
for f in files: f.close()
PY
done
echo "(load at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
