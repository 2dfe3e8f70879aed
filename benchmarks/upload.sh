#!/usr/bin/env bash
# Upload benchmark: `protfs upload` against `curl -T`, the same file to the same loopback server,
# alternating round by round (benchmarks/compare.py), medians and the ratio.
#
#   benchmarks/upload.sh [RUNS]      RUNS per tool, default 5 (after one warm-up each)
#
# Environment: UPLOAD_MIB (1024), BACKED (1: each run starts with backed free memory, see below),
# SERVER (nginx: a WebDAV PUT location, nginx -V lists
# http_dav_module; python: the tests' UploadServer script, which hashes what it receives).
# protfs's run includes what an upload task costs on iOS besides the transfer: the snapshot of the
# file into the container's nsurlsessiond Uploads directory (copy_file_range) and its removal.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-5}
UPLOAD_MIB=${UPLOAD_MIB:-1024}
SERVER=${SERVER:-nginx}

BIN=$(dirname "$(bash scripts/build.sh protfs)")
. benchmarks/lib.sh
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/protfs-upload-bench.XXXXXX")
NGINX_PID=""
SERVER_PID=""
cleanup() {
  stop_process "$NGINX_PID"
  stop_process "$SERVER_PID"
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

# --- the file, inside a container of a fresh device (untimed) ---------------------------------
DEVICE="$WORK/device"
init_device "$BIN/protfs" "$DEVICE"
FILE="$DEVICE/Containers/$BENCH_BUNDLE/Documents/upload.bin"
head -c "$((UPLOAD_MIB << 20))" /dev/urandom >"$FILE"
sync

# Before every run (untimed), as download.sh does for its runs: this VM hands memory the guest
# freed back to the host after about two seconds (free page reporting), and a page no longer
# backed costs a host fault when it is touched again, which doubles the cost of filling the page
# cache. So each run starts with as much backed free memory as it can fill: the server's copy of
# the last upload is deleted, and twice the file's size is written to a scratch file and deleted
# just before the timer starts. protfs fills twice what curl does (its snapshot, and the server's
# copy), and without this step it alone paid the faults for the snapshot: 1.49-1.68x on
# 2026-12-01. BACKED=0 measures without it.
BEFORE=":"
if [ "${BACKED:-1}" = 1 ]; then
  BEFORE="rm -f '$WORK/root/in/upload.bin'; sync; head -c $((2 * UPLOAD_MIB << 20)) /dev/zero >'$WORK/filler'; rm -f '$WORK/filler'"
fi

echo "Upload of $UPLOAD_MIB MiB to $SERVER on 127.0.0.1, $RUNS runs each (medians):"
python3 benchmarks/compare.py --runs "$RUNS" --before "$BEFORE" \
  --name "protfs upload" -- "$BIN/protfs" --device "$DEVICE" upload --bundle "$BENCH_BUNDLE" \
  --from Documents/upload.bin --progress none "$URL" \
  --name "curl -T" -- curl -sS -f -o /dev/null -T "$FILE" "$URL"
