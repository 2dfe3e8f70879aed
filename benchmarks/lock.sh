#!/usr/bin/env bash
# Times `protfs lock` and `protfs unlock` against `chmod -R go-rwx` and `chmod -R go+r` on the same
# 100,000-file device (200 directories x 500 files, classes mixed by directory), alternating in one
# run, and prints medians, ratios and peak memory. A benchmark, not a test: disk timings swing, so
# only the side-by-side ratios mean something (PERF-NOTES.md).
#
#   benchmarks/lock.sh            # 5 rounds
#   ROUNDS=9 DIRS=20 benchmarks/lock.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
DIRS=${DIRS:-200}
FILES=${FILES:-500}

swift build -c release --product protfs >&2
BIN="$(swift build -c release --show-bin-path)/protfs"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/protfs-bench-XXXXXX")"
trap 'chmod -R u+rwX "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
DEV="$WORK/device"
P=("$BIN" --device "$DEV")

echo "Building a device of $DIRS directories x $FILES files in $WORK ..." >&2
"${P[@]}" init com.example.bench >/dev/null 2>&1
DOCS="$DEV/Containers/com.example.bench/Documents"
classes=(complete unless-open until-first-auth none when-inactive until-first-auth)
names=()
for ((f = 0; f < FILES; f++)); do names+=("f$f"); done
for ((d = 0; d < DIRS; d++)); do
  dir="$DOCS/d$d"
  mkdir "$dir"
  (cd "$dir" && touch "${names[@]}")
  "${P[@]}" set-class --recursive "${classes[d % ${#classes[@]}]}" "$dir" >/dev/null 2>&1
done
echo "Classes per directory cycle through: ${classes[*]} (a third complete or unless-open)." >&2

# Wall time in seconds of "$@", and its peak RSS in KiB into $PEAK.
PEAK=0
timed() {
  local start end rss
  start=$(date +%s%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$WORK/rss" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
    rss=$(tail -1 "$WORK/rss")
  else
    "$@" >/dev/null 2>"$WORK/err" & local pid=$!
    rss=0
    while kill -0 "$pid" 2>/dev/null; do
      local now
      now=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
      [ "${now:-0}" -gt "$rss" ] && rss=$now
    done
    wait "$pid"
  fi
  end=$(date +%s%N)
  PEAK=$rss
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.4f\n", (e - s) / 1e9 }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Warm the cache once.
"${P[@]}" lock >/dev/null; "${P[@]}" unlock >/dev/null
chmod -R go-rwx "$DOCS"; chmod -R go+r "$DOCS"

: >"$WORK/lock" >"$WORK/unlock" >"$WORK/chmod-strip" >"$WORK/chmod-add"
peak_lock=0 peak_unlock=0
for ((r = 1; r <= ROUNDS; r++)); do
  timed "${P[@]}" lock >>"$WORK/lock"; ((PEAK > peak_lock)) && peak_lock=$PEAK
  timed chmod -R go-rwx "$DOCS" >>"$WORK/chmod-strip"
  timed "${P[@]}" unlock >>"$WORK/unlock"; ((PEAK > peak_unlock)) && peak_unlock=$PEAK
  timed chmod -R go+r "$DOCS" >>"$WORK/chmod-add"
  echo "round $r: lock $(tail -1 "$WORK/lock")s, chmod go-rwx $(tail -1 "$WORK/chmod-strip")s, unlock $(tail -1 "$WORK/unlock")s, chmod go+r $(tail -1 "$WORK/chmod-add")s" >&2
done

lock=$(median <"$WORK/lock")
unlock=$(median <"$WORK/unlock")
strip=$(median <"$WORK/chmod-strip")
add=$(median <"$WORK/chmod-add")
total=$((DIRS * FILES))
echo
echo "protfs lock/unlock vs chmod -R, $total files, median of $ROUNDS alternating rounds"
printf '  %-22s %8ss   %-20s %8ss   ratio %s   (target <= 1.0)\n' "protfs lock" "$lock" "chmod -R go-rwx" "$strip" \
  "$(awk -v a="$lock" -v b="$strip" 'BEGIN { printf "%.2f", a / b }')"
printf '  %-22s %8ss   %-20s %8ss   ratio %s   (target <= 1.0)\n' "protfs unlock" "$unlock" "chmod -R go+r" "$add" \
  "$(awk -v a="$unlock" -v b="$add" 'BEGIN { printf "%.2f", a / b }')"
printf '  peak RSS: lock %.1f MiB, unlock %.1f MiB   (target <= 64 MiB)\n' \
  "$(awk -v k="$peak_lock" 'BEGIN { print k / 1024 }')" "$(awk -v k="$peak_unlock" 'BEGIN { print k / 1024 }')"
