#!/usr/bin/env bash
# Upload benchmark: `protfs upload` of a file of the device against what an upload costs without
# protfs, the same file to the same loopback server, alternating round by round
# (benchmarks/compare.py), medians and ratios. An upload task snapshots its file when it is made
# (iOS's nsurlsessiond does too, so that the app may change or delete the file), so two cases:
#
# - a file system that clones (XFS with reflinks, on a loop device made here): the snapshot is a
#   clone and costs no copy; against `curl -T` of the file. Target <= 1.2x.
# - one that cannot (ext4, the file system of $TMPDIR): the snapshot is a copy, which iOS would
#   pay too without APFS's clones; against `cp` of the file then `curl -T` of the copy. Target
#   <= 1.1x. `curl -T` of the file alone runs beside them, for the price of the copy.
#
#   benchmarks/upload.sh [RUNS]      RUNS per tool and case, default 5 (after one warm-up each)
#
# Environment: UPLOAD_MIB (1024), CASES ("clone copy"), BACKED (1: each run starts with backed free
# memory, see below),
# SERVER (nginx: a WebDAV PUT location, nginx -V lists
# http_dav_module; python: the tests' UploadServer script, which hashes what it receives).
# protfs's run includes what an upload task costs on iOS besides the transfer: the snapshot of the
# file into the container's nsurlsessiond Uploads directory (a clone, or copy_file_range) and its
# removal. The clone case needs root and loop devices; where they cannot be had it says so and is
# skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-5}
UPLOAD_MIB=${UPLOAD_MIB:-1024}
SERVER=${SERVER:-nginx}

BIN=$(dirname "$(bash scripts/build.sh protfs)")
. benchmarks/lib.sh
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/protfs-upload-bench.XXXXXX")
CASES=${CASES:-clone copy}
NGINX_PID=""
SERVER_PID=""
HOLD_PID=""
XFS=""
cleanup() {
  stop_process "$NGINX_PID"
  stop_process "$SERVER_PID"
  stop_process "$HOLD_PID"
  [ -z "$XFS" ] || umount -l "$XFS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ "$SERVER" = nginx ]; then
  PORT=$(free_port)
  mkdir -p "$WORK/root/in"
  # The request body's temp file is on the root's file system, so the DAV PUT renames it into place.
  start_nginx "$WORK/nginx" "$PORT" "$WORK/root" "  client_body_temp_path $WORK/root/tmp;
  client_max_body_size 0;
  client_body_buffer_size 1m;" "    location /in/ { dav_methods PUT; create_full_put_path on; }"
  wait_for_port "$PORT" "$NGINX_PID" "$WORK/nginx/error.log"
else
  awk '/public static let script = #"""/{f=1;next} /^    """#/{f=0} f{sub(/^    /,"");print}' \
    Tests/ProtFSTestSupport/UploadServer.swift >"$WORK/server.py"
  python3 "$WORK/server.py" "$WORK/port" "$WORK/requests.log" 0 &
  SERVER_PID=$!
  for _ in $(seq 200); do
    [ -s "$WORK/port" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || exit 2
    sleep 0.05
  done
  PORT=$(cat "$WORK/port")
  wait_for_port "$PORT" "$SERVER_PID"
fi
URL="http://127.0.0.1:$PORT/in/upload.bin"

# --- the measured runs (untimed set-up first) -------------------------------------------------
# Before every run (untimed), as download.sh does for its runs: this VM hands memory the guest
# freed back to the host after about two seconds (free page reporting), and a page no longer
# backed costs a host fault when it is touched again, which doubles the cost of filling the page
# cache. So each run starts with as much backed free memory as it can fill: the server's copy of
# the last upload is deleted, and twice the file's size is written to a scratch file and deleted
# just before the timer starts. Both sides of a case fill the same: the server's copy and, in the
# copy case, the snapshot or the `cp`; in the clone case protfs also reads its clone into the page
# cache (a clone's pages are cached apart from its file's). Without this step protfs alone paid
# the faults for its snapshot: 1.49-1.68x on 2026-12-01. BACKED=0 measures without it.
BEFORE=":"
if [ "${BACKED:-1}" = 1 ]; then
  BEFORE="rm -f '$WORK/root/in/upload.bin'; sync; head -c $((2 * UPLOAD_MIB << 20)) /dev/zero >'$WORK/filler'; rm -f '$WORK/filler'"
fi

# device_with_file DIR: a fresh device in DIR whose app holds Documents/upload.bin (random bytes,
# 0644, synced), and sets FILE to its path.
device_with_file() {
  init_device "$BIN/protfs" "$1"
  FILE="$1/Containers/$BENCH_BUNDLE/Documents/upload.bin"
  head -c "$((UPLOAD_MIB << 20))" /dev/urandom >"$FILE"
  chmod 0644 "$FILE"
  sync
}

# upload_command DEVICE: the measured protfs command, as an array in UPLOAD.
upload_command() {
  UPLOAD=("$BIN/protfs" --device "$1" upload --bundle "$BENCH_BUNDLE" --from Documents/upload.bin --progress none "$URL")
}

# check_clone DEVICE: shows that protfs's snapshot of the file shares its extents (filefrag -v,
# FIEMAP), by uploading it to a server that accepts and never reads, looking at the snapshot while
# the upload waits, and killing the upload; the device is thrown away afterwards.
check_clone() {
  local device=$1 hold_port snapshot="" uploads
  hold_port=$(free_port)
  python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); c = s.accept(); time.sleep(600)' "$hold_port" &
  HOLD_PID=$!
  wait_for_port "$hold_port" "$HOLD_PID"
  "$BIN/protfs" --device "$device" upload --bundle "$BENCH_BUNDLE" --from Documents/upload.bin --progress none \
    "http://127.0.0.1:$hold_port/in/held.bin" >/dev/null 2>&1 &
  local upload_pid=$!
  uploads="$device/Containers/$BENCH_BUNDLE/Library/Caches/com.apple.nsurlsessiond/Uploads/$BENCH_BUNDLE"
  for _ in $(seq 500); do
    snapshot=$(find "$uploads" -name 'CFNetworkUpload_*' 2>/dev/null | head -1)
    [ -n "$snapshot" ] && break
    sleep 0.01
  done
  local verdict=1
  if [ -n "$snapshot" ]; then
    # The snapshot is made empty, then cloned (or copied): wait for all of it.
    for _ in $(seq 500); do
      [ "$(stat -c %s "$snapshot")" = "$(stat -c %s "$device/Containers/$BENCH_BUNDLE/Documents/upload.bin")" ] && break
      sleep 0.01
    done
    local extents shared
    extents=$(filefrag -v "$snapshot" | grep -cE '^ *[0-9]+:') || true
    shared=$(filefrag -v "$snapshot" | grep -E '^ *[0-9]+:' | grep -c shared) || true
    echo "Snapshot $(basename "$snapshot"): $shared of $extents extents shared with the file (filefrag -v)"
    [ "$extents" -gt 0 ] && [ "$shared" = "$extents" ] && verdict=0
  else
    echo "No snapshot appeared in $uploads."
  fi
  kill -9 "$upload_pid" 2>/dev/null || true
  wait "$upload_pid" 2>/dev/null || true
  stop_process "$HOLD_PID"
  HOLD_PID=""
  return "$verdict"
}

quiet_machine
echo "Upload of $UPLOAD_MIB MiB to $SERVER on 127.0.0.1, $RUNS runs each (medians):"
for case in $CASES; do
  case "$case" in
  clone)
    echo
    echo "== A file system that clones (XFS, reflink=1, on a loop device): protfs vs curl -T; target <= 1.2x"
    XFS_REASON=""
    if ! command -v mkfs.xfs >/dev/null; then
      XFS_REASON="mkfs.xfs is not installed (scripts/setup.sh --test installs xfsprogs)"
    elif [ "$(id -u)" != 0 ]; then
      XFS_REASON="making a loop device needs root"
    else
      # Room for the file, the snapshot (shared) and the copies the file system makes meanwhile.
      truncate -s "$((4 * UPLOAD_MIB + 512))M" "$WORK/xfs.img"
      mkdir -p "$WORK/xfs"
      if ! out=$(mkfs.xfs -q -m reflink=1 "$WORK/xfs.img" 2>&1 && mount -o loop "$WORK/xfs.img" "$WORK/xfs" 2>&1); then
        XFS_REASON="no XFS on a loop device could be made here: $out"
      else
        XFS="$WORK/xfs"
      fi
    fi
    if [ -n "$XFS_REASON" ]; then
      echo "skipped: $XFS_REASON."
      continue
    fi
    device_with_file "$XFS/check"
    check_clone "$XFS/check" || { echo "The snapshot is not a clone: the case is not measured." >&2; exit 1; }
    rm -rf "$XFS/check"
    device_with_file "$XFS/device"
    upload_command "$XFS/device"
    python3 benchmarks/compare.py --runs "$RUNS" --before "$BEFORE" \
      --name "protfs upload (clone)" -- "${UPLOAD[@]}" \
      --name "curl -T" -- curl -sS -f -o /dev/null -T "$FILE" "$URL"
    ;;
  copy)
    echo
    echo "== A file system that cannot clone ($(findmnt -n -o FSTYPE -T "$WORK")): protfs vs cp, then curl -T of the copy; target <= 1.1x"
    device_with_file "$WORK/device"
    upload_command "$WORK/device"
    COPY="$WORK/device/Containers/$BENCH_BUNDLE/Library/Caches/upload-copy.bin"
    python3 benchmarks/compare.py --runs "$RUNS" --before "$BEFORE" \
      --name "protfs upload (copy)" -- "${UPLOAD[@]}" \
      --name "cp, then curl -T" -- sh -c 'cp -- "$1" "$2" && curl -sS -f -o /dev/null -T "$2" "$3"; s=$?; rm -f -- "$2"; exit $s' \
      sh "$FILE" "$COPY" "$URL" \
      --name "curl -T (no copy)" -- curl -sS -f -o /dev/null -T "$FILE" "$URL"
    ;;
  *)
    echo "Unknown case '$case' in CASES: give clone, copy or both." >&2
    exit 2
    ;;
  esac
done
