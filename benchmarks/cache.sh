#!/usr/bin/env bash
# protfs cache du vs du -s on a 100,000-file cache (200 directories x 500 files), side by side.
# Target (issue 6): protfs cache du <= 1.0x the time of du -s.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh
bash scripts/setup.sh --test
bash scripts/build.sh >/dev/null
protfs=$PWD/.build/release/protfs
dirs=${DIRS:-200} files=${FILES:-500} runs=${RUNS:-7}
work=$(mktemp -d /tmp/protfs-bench-cache-XXXXXX)
trap 'forget_tree "$work"' EXIT
device=$work/device
"$protfs" --device "$device" init com.example.bench >/dev/null 2>&1
caches=$device/Containers/com.example.bench/Library/Caches
python3 benchmarks/make_tree.py "$caches/tree" "$dirs" "$files"
sync
quiet_machine
python3 benchmarks/compare.py --runs "$runs" \
  --name "protfs cache du" -- "$protfs" --device "$device" cache du com.example.bench \
  --name "du -s" -- du -s "$device/Containers/com.example.bench/Library/Caches" "$device/Containers/com.example.bench/tmp"
