#!/usr/bin/env bash
# Download benchmark: protfs's engine against curl and aria2c, side by side in one run, from nginx
# on loopback (its own temporary root), to disk.
#
#   benchmarks/download.sh [RUNS]      RUNS per tool and case, default 7 (medians are reported)
#
# Environment: CASES ("big small"), BIG_MIB (1024), SMALL_COUNT (2000), SMALL_BYTES (16384),
# PROTFS_TOOL (cli: `protfs download`; fetch: the engine alone through protfs-fetch) and PROTFS_FLAGS,
# extra flags for it. protfs runs as curl and aria2c do, without fsync; PROTFS_FLAGS=--sync
# measures it flushing each file before the rename (then the disk's write speed bounds the big
# case: on this machine a durable 1 GiB write takes 1.2-1.3 s, more than curl's whole run).
#
# Cases: one 1 GiB file (protfs vs `curl -s -o FILE` vs `aria2c -x1`) and 2,000 files of 16 KiB
# (protfs vs `curl --parallel --parallel-max 8 -K LIST` vs `aria2c -j8 -i LIST`). protfs and curl
# alternate round by round; aria2c runs afterwards. Each run starts after a `sync`, so one tool's
# write-back does not land on the next one's clock. Peak RSS comes from /usr/bin/time -v when present.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-7}
BIG_MIB=${BIG_MIB:-1024}
SMALL_COUNT=${SMALL_COUNT:-2000}
SMALL_BYTES=${SMALL_BYTES:-16384}

BIN=$(dirname "$(bash scripts/build.sh protfs protfs-fetch)")
. benchmarks/lib.sh

# Each run of this script works in a new directory under a parent marked as a top directory for
# ext4's Orlov allocator (chattr +T), so that it starts in a block group of its own, away from
# the inodes an earlier run freed when it cleaned up (see "measuring" below).
BENCH_ROOT="${TMPDIR:-/var/tmp}/protfs-bench"
mkdir -p "$BENCH_ROOT"
chattr +T "$BENCH_ROOT" 2>/dev/null || true
WORK=$(mktemp -d "$BENCH_ROOT/work.XXXXXX")
RUN="$WORK/run"
# The command under test: `protfs download` on a fresh device (PROTFS_SETUP, untimed), or with
# PROTFS_TOOL=fetch the engine alone through protfs-fetch. URLs or `-i LIST` follow it; files land
# in PROTFS_OUT.
if [ "${PROTFS_TOOL:-cli}" = cli ]; then
  PROTFS_SETUP=(init_device "$BIN/protfs" "$RUN/device")
  PROTFS=("$BIN/protfs" --device "$RUN/device" download --bundle "$BENCH_BUNDLE" --connections 8 --progress none ${PROTFS_FLAGS:-})
  PROTFS_OUT="$RUN/device/Containers/$BENCH_BUNDLE/Documents"
elif [ "${PROTFS_TOOL:-cli}" = service ]; then
  # Through the session service (benchmarks/sessions.sh): a fresh device and service per run,
  # started untimed; the timed command hands the tasks over and waits until the service is done.
  PROTFS_SETUP=(bash benchmarks/service-run.sh setup "$BIN/protfs" "$RUN/device")
  PROTFS=(bash benchmarks/service-run.sh download "$BIN/protfs" "$RUN/device" --connections 8 ${PROTFS_FLAGS:-})
  PROTFS_OUT="$RUN/device/Containers/com.example.bench/Documents"
else
  PROTFS_SETUP=(true)
  PROTFS=("$BIN/protfs-fetch" --store "$RUN/store.sqlite" --temp "$RUN/tmp" --connections 8 ${PROTFS_FLAGS:-} --to "$RUN/out")
  PROTFS_OUT="$RUN/out"
fi
NGINX_PID=""
cleanup() {
  stop_process "$NGINX_PID"
  forget_tree "$WORK"
}
trap cleanup EXIT

# --- nginx on 127.0.0.1, a free port ---------------------------------------------------------
PORT=$(free_port)
mkdir -p "$WORK/root/small"
start_nginx "$WORK/nginx" "$PORT" "$WORK/root" "  client_body_temp_path $WORK/nginx/tmp/body;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;" ""
wait_for_port "$PORT" "$NGINX_PID" "$WORK/nginx/error.log"
BASE="http://127.0.0.1:$PORT"

# --- data ----------------------------------------------------------------------------------------
echo "Preparing ${BIG_MIB} MiB and ${SMALL_COUNT} x ${SMALL_BYTES} B of random data..." >&2
[[ " ${CASES:-big small} " == *" big "* ]] && head -c $((BIG_MIB << 20)) /dev/urandom >"$WORK/root/big.bin"
head -c $((SMALL_COUNT * SMALL_BYTES)) /dev/urandom | split -b "$SMALL_BYTES" -a 5 -d - "$WORK/root/small/f"
ls "$WORK/root/small" | sed "s|^|$BASE/small/|" >"$WORK/urls.txt"
# Warm the page cache: the measurements assume a warm cache.
cat "$WORK/root"/big.bin "$WORK/root/small"/* >/dev/null 2>&1 || true

# --- measuring -----------------------------------------------------------------------------------
# Three traps of this machine (ext4 without a journal, in a VM) make a run slower or faster by up to
# 2x whichever tool it belongs to, and so are kept equal for every run:
# - creating a file skips every inode freed in the last minutes (ext4's `recently_deleted`), so a
#   run's 2,000 files are never deleted during the benchmark (moved aside; deleted at the end);
# - the VM hands memory the guest freed back to the host after about two seconds (free page
#   reporting), and a page that is not backed costs a host fault when touched again: a run whose
#   page cache lands on such pages copies at half speed. So the previous run's pages are released
#   (its big file deleted, its small files dropped from the cache) right before the timer starts,
#   after the `sync`, and the next run writes into those still-backed pages;
# - the `sync` before each run keeps one tool's write-back off the next one's clock.
# $RUN is a symlink to the current run's directory, so that the commands above keep their paths.
RUN_COUNT=0
new_run() {
  RUN_COUNT=$((RUN_COUNT + 1))
  mkdir "$WORK/run.$RUN_COUNT"
  PREVIOUS=""
  [ -L "$RUN" ] && PREVIOUS="$WORK/$(readlink "$RUN")"
  ln -sfn "run.$RUN_COUNT" "$RUN"
}
release_previous() {
  [ -n "$PREVIOUS" ] && [ -d "$PREVIOUS" ] || return 0
  find "$PREVIOUS" -name big.bin -delete
  python3 - "$PREVIOUS" <<'PY'
import os, sys
for directory, _, files in os.walk(sys.argv[1]):
    for name in files:
        try:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
}

# run NAME CASE COMMAND...: runs COMMAND in a fresh $RUN, appends "seconds rss_kib" to $WORK/CASE.NAME
run() {
  local name=$1 case=$2
  shift 2

  new_run
  mkdir -p "$RUN/out" "$RUN/tmp"
  [ "$name" = protfs ] && "${PROTFS_SETUP[@]}" >/dev/null
  sync
  release_previous
  local start end rss=0
  if [ -x /usr/bin/time ]; then
    start=$(date +%s.%N)
    /usr/bin/time -v -o "$RUN/time.txt" "$@" >/dev/null 2>"$RUN/stderr" || { cat "$RUN/stderr" >&2; exit 1; }
    end=$(date +%s.%N)
    rss=$(awk -F: '/Maximum resident/ {gsub(/ /, "", $2); print $2}' "$RUN/time.txt")
  else
    start=$(date +%s.%N)
    "$@" >/dev/null 2>"$RUN/stderr" &
    local pid=$! peak
    while kill -0 "$pid" 2>/dev/null; do
      peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
      [ "${peak:-0}" -gt "$rss" ] && rss=$peak
      sleep 0.01
    done
    wait "$pid" || { cat "$RUN/stderr" >&2; exit 1; }
    end=$(date +%s.%N)
  fi
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.4f", b - a}') $rss" >>"$WORK/$case.$name"
}

check_big() { cmp -s "$WORK/root/big.bin" "$2/big.bin" || { echo "$1: the big file differs" >&2; exit 1; }; }
check_small() {
  local n
  n=$(find "$2" -type f | wc -l)
  [ "$n" = "$SMALL_COUNT" ] || { echo "$1: $n of $SMALL_COUNT small files" >&2; exit 1; }
}

big_protfs() { run protfs big "${PROTFS[@]}" "$BASE/big.bin"; check_big protfs "$PROTFS_OUT"; }
big_curl() { run curl big curl -s -o "$RUN/out/big.bin" "$BASE/big.bin"; check_big curl "$RUN/out"; }
big_aria2() {
  run aria2c big aria2c -q -x1 --allow-overwrite=true -d "$RUN/out" -o big.bin "$BASE/big.bin"
  check_big aria2c "$RUN/out"
}

small_protfs() { run protfs small "${PROTFS[@]}" -i "$WORK/urls.txt"; check_small protfs "$PROTFS_OUT"; }
small_curl() {
  sed "s|^$BASE/small/\(.*\)$|url = \"&\"\noutput = \"$WORK/run/out/\1\"|" "$WORK/urls.txt" >"$WORK/curl.list"
  run curl small curl -s --parallel --parallel-max 8 -K "$WORK/curl.list"
  check_small curl "$RUN/out"
}
small_aria2() {
  run aria2c small aria2c -q -j8 --allow-overwrite=true -d "$RUN/out" -i "$WORK/urls.txt"
  check_small aria2c "$RUN/out"
}

# protfs and curl alternate, each going first in every other round, so that each follows the
# other as often: what a run leaves behind (freed memory, write-back) lands on both alike. aria2c,
# several times slower, runs in rounds of its own after them, each after a protfs run.
# One untimed round first: the first runs on a cold machine pay for memory the VM has to back,
# whichever tool makes them.
quiet_machine
echo "Warm-up round (not counted)..." >&2
for case in ${CASES:-big small}; do
  for tool in protfs curl aria2; do "${case}_$tool"; done
  for name in protfs curl aria2c; do rm -f "$WORK/$case.$name"; done
done
for round in $(seq 1 "$RUNS"); do
  echo "Round $round of $RUNS (protfs and curl)..." >&2
  order="protfs curl"
  ((round % 2 == 0)) && order="curl protfs"
  for case in ${CASES:-big small}; do
    for tool in $order; do "${case}_$tool"; done
  done
done
for round in $(seq 1 "$RUNS"); do
  echo "Round $round of $RUNS (aria2c)..." >&2
  for case in ${CASES:-big small}; do "${case}_aria2"; done
done

report() {
  local case=$1 title=$2 p c a
  p=$(cut -d' ' -f1 "$WORK/$case.protfs" | median)
  c=$(cut -d' ' -f1 "$WORK/$case.curl" | median)
  a=$(cut -d' ' -f1 "$WORK/$case.aria2c" | median)
  echo "$title (median of $RUNS)"
  for tool in protfs curl aria2c; do
    printf "  %-7s %7.3f s   peak RSS %6d KiB   runs: %s\n" "$tool" \
      "$(cut -d' ' -f1 "$WORK/$case.$tool" | median)" \
      "$(cut -d' ' -f2 "$WORK/$case.$tool" | sort -n | tail -1)" \
      "$(cut -d' ' -f1 "$WORK/$case.$tool" | xargs printf '%.3f ')"
  done
  printf "  protfs/curl = %.2f   protfs/aria2c = %.2f   (ratios of the medians; target protfs/curl <= 0.6)\n" "$(awk -v x="$p" -v y="$c" 'BEGIN {print x / y}')" "$(awk -v x="$p" -v y="$a" 'BEGIN {print x / y}')"
  # The disk's speed drifts during a run (write-back, the host's I/O limits), so each round's tools,
  # run back to back, are also compared with each other: the median of those paired ratios.
  printf "  protfs/curl = %.2f   (median of the per-round ratios: %s)\n" \
    "$(paste -d' ' "$WORK/$case.protfs" "$WORK/$case.curl" | awk '{print $1 / $3}' | median)" \
    "$(paste -d' ' "$WORK/$case.protfs" "$WORK/$case.curl" | awk '{printf "%.2f ", $1 / $3}')"
}
for case in ${CASES:-big small}; do
  case $case in
    big) report big "$BIG_MIB MiB from nginx on loopback to disk" ;;
    small) report small "$SMALL_COUNT files of $SMALL_BYTES B, 8 connections" ;;
  esac
done
