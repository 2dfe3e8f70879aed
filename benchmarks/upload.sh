#!/usr/bin/env bash
# Upload benchmark: `protfs upload` against `curl -T`, the same file to the same loopback server,
# alternating round by round (benchmarks/compare.py), medians and the ratio.
#
#   benchmarks/upload.sh [RUNS]      RUNS per tool, default 5 (after one warm-up each)
#
# Environment: UPLOAD_MIB (1024), SERVER (nginx: a WebDAV PUT location, nginx -V lists
# http_dav_module; python: the tests' UploadServer script, which hashes what it receives).
# protfs's run includes what an upload task costs on iOS besides the transfer: the snapshot of the
# file into the container's nsurlsessiond Uploads directory (copy_file_range) and its removal.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-5}
UPLOAD_MIB=${UPLOAD_MIB:-1024}
SERVER=${SERVER:-nginx}

BIN=$(dirname "$(bash scripts/build.sh protfs)")
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/protfs-upload-bench.XXXXXX")
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
}

if [ "$SERVER" = nginx ]; then
  PORT=$(free_port)
  mkdir -p "$WORK/root/in" "$WORK/nginx/tmp"
  cat >"$WORK/nginx/nginx.conf" <<CONF
$([ "$(id -u)" = 0 ] && echo "user root;")
worker_processes 1;
error_log $WORK/nginx/error.log warn;
pid $WORK/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/root/tmp;
  proxy_temp_path $WORK/nginx/tmp/proxy;
  fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
  uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
  scgi_temp_path $WORK/nginx/tmp/scgi;
  client_max_body_size 0;
  client_body_buffer_size 1m;
  server {
    listen 127.0.0.1:$PORT;
    root $WORK/root;
    location /in/ { dav_methods PUT; create_full_put_path on; }
  }
}
CONF
  /usr/sbin/nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' &
  SERVER_PID=$!
else
  awk '/public static let script = #"""/{f=1;next} /^    """#/{f=0} f{sub(/^    /,"");print}' \
    Tests/ProtFSTestSupport/UploadServer.swift >"$WORK/server.py"
  python3 "$WORK/server.py" "$WORK/port" "$WORK/requests.log" 0 &
  SERVER_PID=$!
fi
for _ in $(seq 200); do
  if [ "$SERVER" = python ] && [ -s "$WORK/port" ]; then PORT=$(cat "$WORK/port"); fi
  [ -n "${PORT:-}" ] && (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.05
done
URL="http://127.0.0.1:$PORT/in/upload.bin"

# --- the file, inside a container of a fresh device (untimed) ---------------------------------
DEVICE="$WORK/device"
mkdir -p "$DEVICE"
"$BIN/protfs" --device "$DEVICE" init com.example.bench >/dev/null
FILE="$DEVICE/Containers/com.example.bench/Documents/upload.bin"
head -c "$((UPLOAD_MIB << 20))" /dev/urandom >"$FILE"
sync

echo "Upload of $UPLOAD_MIB MiB to $SERVER on 127.0.0.1, $RUNS runs each (medians):"
python3 benchmarks/compare.py --runs "$RUNS" \
  --name "protfs upload" -- "$BIN/protfs" --device "$DEVICE" upload --bundle com.example.bench \
  --from Documents/upload.bin --progress none "$URL" \
  --name "curl -T" -- curl -sS -f -o /dev/null -T "$FILE" "$URL"
