#!/usr/bin/env bash
# Benchmarks `protfs audit --format json` against `getfattr -R -n user.protfs.class` on the same
# tree, side by side, alternating, warm cache, and reports medians and their ratio (target <= 0.25).
# Then measures peak RSS of the audit at 100,000 and at 1,000,000 files (target: ratio <= 2).
#
# Usage: benchmarks/audit.sh [--runs N] [--skip-million] [--protfs PATH]
# Trees are built once under .benchmarks/ (gitignored) and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh
repo=$PWD
runs=7
million=1
protfs=""
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --skip-million) million=0; shift ;;
    --protfs) protfs=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--skip-million] [--protfs PATH]" >&2; exit 64 ;;
  esac
done
command -v getfattr >/dev/null || { echo "audit.sh: getfattr is missing; run scripts/setup.sh" >&2; exit 2; }
if [ -z "$protfs" ]; then
  bash scripts/build.sh >/dev/null
  protfs=$repo/.build/release/protfs
fi
work=$repo/.benchmarks/audit
mkdir -p "$work"

# build_tree DIR DIRECTORIES FILES_PER_DIRECTORY: a device with one container whose Documents holds
# DIRECTORIES directories of FILES_PER_DIRECTORY empty files; a third of the files have no class of
# their own, the rest cycle through the classes Documents allows and a few that it does not.
build_tree() {
  local device=$1 dirs=$2 per=$3
  if [ -f "$device/.complete" ]; then return; fi
  rm -rf "$device"
  "$protfs" --device "$device" init com.bench.app >/dev/null 2>&1
  python3 - "$device/Containers/com.bench.app/Documents" "$dirs" "$per" <<'PY'
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
classes = [b"NSFileProtectionComplete", b"NSFileProtectionCompleteUntilFirstUserAuthentication",
           b"NSFileProtectionCompleteUnlessOpen", b"NSFileProtectionNone"]
n = 0
for d in range(dirs):
    path = os.path.join(root, "d%04d" % d)
    os.mkdir(path)
    os.setxattr(path, "user.protfs.class", classes[d % 2])
    for f in range(per):
        name = os.path.join(path, "f%05d.dat" % f)
        fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        if n % 3 != 0:
            os.setxattr(name, "user.protfs.class", classes[n % 4])
        n += 1
PY
  touch "$device/.complete"
}

small=$work/device-100k
echo "Building the 100,000-file tree (once)..." >&2
build_tree "$small" 200 500
container=$small/Containers/com.bench.app

quiet_machine
# Warm the cache with one run of each.
"$protfs" audit --format json "$container" >/dev/null || true
getfattr -R -n user.protfs.class --absolute-names "$container" >/dev/null 2>&1 || true

# measure VAR COMMAND...: appends "wall cpu" (seconds) of one run to the array named VAR.
# Wall time from the nanosecond clock (time's %e has 10 ms steps, coarse for runs of 0.2 s).
measure() {
  local -n into=$1
  shift
  local start end
  start=$(date +%s%N)
  /usr/bin/time -o "$work/time" -f "%U %S" "$@" >/dev/null 2>&1 || true
  end=$(date +%s%N)
  into+=("$(awk -v ns=$((end - start)) '!/^Command/ {printf "%.3f %.2f", ns / 1e9, $1 + $2}' "$work/time")")
}
audit_runs=()
getfattr_runs=()
for ((i = 0; i < runs; i++)); do
  measure audit_runs "$protfs" audit --format json "$container"
  measure getfattr_runs getfattr -R -n user.protfs.class --absolute-names "$container"
done
column() { printf '%s\n' "${@:2}" | awk -v c="$1" '{print $c}' | median; }
audit_wall=$(column 1 "${audit_runs[@]}")
getfattr_wall=$(column 1 "${getfattr_runs[@]}")
audit_cpu=$(column 2 "${audit_runs[@]}")
getfattr_cpu=$(column 2 "${getfattr_runs[@]}")
ratio=$(awk -v a="$audit_wall" -v g="$getfattr_wall" 'BEGIN {printf "%.2f", a / g}')
printf 'files: 100000 (200 directories x 500), runs: %d, alternating, warm cache, load average %s\n' "$runs" \
  "$(cut -d' ' -f1 /proc/loadavg)"
printf '  protfs audit --format json         median wall %6.3f s, cpu (user+sys) %6.3f s   (wall runs: %s)\n' \
  "$audit_wall" "$audit_cpu" "$(printf '%s\n' "${audit_runs[@]}" | awk '{printf "%s ", $1}')"
printf '  getfattr -R -n user.protfs.class   median wall %6.3f s, cpu (user+sys) %6.3f s   (wall runs: %s)\n' \
  "$getfattr_wall" "$getfattr_cpu" "$(printf '%s\n' "${getfattr_runs[@]}" | awk '{printf "%s ", $1}')"
printf '  ratio audit/getfattr: wall %s (target <= 0.25), cpu %s\n' "$ratio" \
  "$(awk -v a="$audit_cpu" -v g="$getfattr_cpu" 'BEGIN {printf "%.2f", a / g}')"

rss() { { /usr/bin/time -f %M "$protfs" audit --format json "$1" 2>&1 >/dev/null || true; } | tail -1; }
rss_small=$(rss "$container")
printf 'peak RSS at   100,000 files: %6d KiB\n' "$rss_small"
status=0
awk -v r="$ratio" 'BEGIN {exit !(r <= 0.5)}' || status=1
if ((million)); then
  large=$work/device-1m
  echo "Building the 1,000,000-file tree (once; takes a few minutes)..." >&2
  build_tree "$large" 2000 500
  rss_large=$(rss "$large/Containers/com.bench.app")
  printf 'peak RSS at 1,000,000 files: %6d KiB (ratio %s, target <= 2.00)\n' "$rss_large" \
    "$(awk -v a="$rss_large" -v b="$rss_small" 'BEGIN {printf "%.2f", a / b}')"
  awk -v a="$rss_large" -v b="$rss_small" 'BEGIN {exit !(a <= 2 * b)}' || status=1
fi
exit $status
