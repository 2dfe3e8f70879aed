#!/usr/bin/env bash
# Times `protfs lock` and `protfs unlock` against `chmod -R go-rwx` and `chmod -R go+r` on the same
# 100,000-file device (200 directories x 500 files, classes mixed as benchmarks/make_tree.py makes them), alternating in one
# run, and prints medians, ratios and peak memory. A benchmark, not a test: disk timings swing, so
# only the side-by-side ratios mean something.
#
#   benchmarks/lock.sh            # 5 rounds
#   ROUNDS=9 DIRS=20 benchmarks/lock.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh

ROUNDS=${ROUNDS:-5}
DIRS=${DIRS:-200}
FILES=${FILES:-500}

bash scripts/setup.sh --test
BIN=$(bash scripts/build.sh)
WORK="$(mktemp -d "${TMPDIR:-/tmp}/protfs-bench-XXXXXX")"
trap 'forget_tree "$WORK"' EXIT
DEV="$WORK/device"
P=("$BIN" --device "$DEV")

echo "Building a device of $DIRS directories x $FILES files in $WORK ..." >&2
"${P[@]}" init com.example.bench >/dev/null 2>&1
DOCS="$DEV/Containers/com.example.bench/Documents"
# Classes in rotation per file and per directory, a third of the files inheriting (make_tree.py).
python3 benchmarks/make_tree.py "$DOCS/tree" "$DIRS" "$FILES" >&2
sync

# Wall time in seconds of "$@"; its peak RSS in KiB into $PEAK and its CPU seconds (user + system)
# into $CPU. The CPU time matters when other work shares the cores: then two threads cannot halve
# the wall time, and the CPU ratio says what an idle machine would show.
PEAK=0
CPU=0
timed() {
  local start end
  start=$(date +%s%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "%M %U %S" -o "$WORK/rss" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
    read -r PEAK user sys < <(tail -1 "$WORK/rss")
    CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  else
    "$@" >/dev/null 2>"$WORK/err" &
    local pid=$! now
    PEAK=0
    while kill -0 "$pid" 2>/dev/null; do
      now=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
      [ "${now:-0}" -gt "$PEAK" ] && PEAK=$now
    done
    wait "$pid"
    CPU=0
  fi
  end=$(date +%s%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.4f\n", (e - s) / 1e9 }'
}

quiet_machine
# Warm the cache once.
"${P[@]}" lock --grace 0 >/dev/null; "${P[@]}" unlock >/dev/null
chmod -R go-rwx "$DOCS"; chmod -R go+r "$DOCS"

: >"$WORK/lock"; : >"$WORK/unlock"; : >"$WORK/chmod-strip"; : >"$WORK/chmod-add"
: >"$WORK/cpu-lock"; : >"$WORK/cpu-unlock"; : >"$WORK/cpu-strip"; : >"$WORK/cpu-add"
peak_lock=0 peak_unlock=0
for ((r = 1; r <= ROUNDS; r++)); do
  timed "${P[@]}" lock --grace 0 >>"$WORK/lock"; echo "$CPU" >>"$WORK/cpu-lock"; ((PEAK > peak_lock)) && peak_lock=$PEAK
  timed chmod -R go-rwx "$DOCS" >>"$WORK/chmod-strip"; echo "$CPU" >>"$WORK/cpu-strip"
  timed "${P[@]}" unlock >>"$WORK/unlock"; echo "$CPU" >>"$WORK/cpu-unlock"; ((PEAK > peak_unlock)) && peak_unlock=$PEAK
  timed chmod -R go+r "$DOCS" >>"$WORK/chmod-add"; echo "$CPU" >>"$WORK/cpu-add"
  echo "round $r: lock $(tail -1 "$WORK/lock")s, chmod go-rwx $(tail -1 "$WORK/chmod-strip")s, unlock $(tail -1 "$WORK/unlock")s, chmod go+r $(tail -1 "$WORK/chmod-add")s" >&2
done

lock=$(median <"$WORK/lock")
unlock=$(median <"$WORK/unlock")
strip=$(median <"$WORK/chmod-strip")
add=$(median <"$WORK/chmod-add")
total=$((DIRS * FILES))
cl=$(median <"$WORK/cpu-lock"); cs=$(median <"$WORK/cpu-strip"); cu=$(median <"$WORK/cpu-unlock"); ca=$(median <"$WORK/cpu-add")
echo
echo "protfs lock/unlock vs chmod -R, $total files, median of $ROUNDS alternating rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '  %-14s %7ss (cpu %5ss)   %-16s %7ss (cpu %5ss)   ratio %s, cpu ratio %s   (target <= 0.6)\n' \
  "protfs lock" "$lock" "$cl" "chmod -R go-rwx" "$strip" "$cs" "$(ratio "$lock" "$strip")" "$(ratio "$cl" "$cs")"
printf '  %-14s %7ss (cpu %5ss)   %-16s %7ss (cpu %5ss)   ratio %s, cpu ratio %s   (target <= 0.6)\n' \
  "protfs unlock" "$unlock" "$cu" "chmod -R go+r" "$add" "$ca" "$(ratio "$unlock" "$add")" "$(ratio "$cu" "$ca")"
printf '  peak RSS: lock %.1f MiB, unlock %.1f MiB   (target <= 64 MiB)\n' \
  "$(awk -v k="$peak_lock" 'BEGIN { print k / 1024 }')" "$(awk -v k="$peak_unlock" 'BEGIN { print k / 1024 }')"
