#!/usr/bin/env bash
# The source documents' whole scenario, end to end, on a throw-away device, with the Swift apps of
# Examples/ (ported from iOS by their imports alone) and a throttled web server on loopback:
#
#   1. background time runs out: the app that never ends its task is killed (0x8badf00d);
#      the one that does logs its time left from a timer and is suspended;
#   2. the phone locks during a background download: "Operation not permitted", because the
#      session's Downloads directory inherited the complete class;
#   3. the fix: the Downloads directory is made class none (`protfs init-cache`);
#   4. the download outlives its suspended app: it finishes in the session service while the
#      phone is locked, the app is woken, moves the file into Documents and is suspended again;
#   5. the download outlives its killed app: the service relaunches it in the background;
#   6. an upload from a file, whose JSON reply the app reads.
#
# Run as root from the repository: bash scripts/scenario.sh (builds the debug products if needed).
# Each step prints the commands it runs and what the apps print; it ends with "scenario: done".
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "scenario: run as root (the apps run as the app user 501)" >&2; exit 64; }
build=${PROTFS_BUILD:-.build/debug}
if [ ! -x "$build/protfs" ] || [ ! -x "$build/BackgroundDownloader" ]; then swift build >/dev/null; fi

work=$(mktemp -d /tmp/protfs-scenario-XXXXXX)
chmod 755 "$work"  # the app user reaches the device and the apps through it
server_pid=""
export PROTFS_DEVICE="$work/device"
protfs() { "$work/apps/protfs" "$@"; }
cleanup() {
  for device in "$work/device" "$work/shipped"; do
    for app in $(ls "$device/Containers" 2>/dev/null); do
      PROTFS_DEVICE=$device protfs app terminate "$app" >/dev/null 2>&1 || true
    done
    PROTFS_DEVICE=$device protfs sessions stop >/dev/null 2>&1 || true
  done
  if [ -n "$server_pid" ]; then kill -9 "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
step() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; }
say() { printf '\n%s## %s%s\n' "$bold" "$*" "$plain"; }
# Waits (at most $3 seconds, 30 by default) until file $2 has a line matching $1, and prints it.
wait_for() {
  local deadline=$((SECONDS + ${3:-30}))
  until grep -m1 -- "$1" "$2" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      echo "scenario: no line matching '$1' in $2 after ${3:-30} s:" >&2
      cat "$2" >&2 || true
      exit 1
    fi
    sleep 0.05
  done
}
# The app's state and pid, from its record.
app_field() {
  protfs app status com.example.app --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0].get(sys.argv[1]))' "$1" 2>/dev/null || true
}
# Waits (at most 60 s) until the app's state is $1.
wait_state() {
  local deadline=$((SECONDS + 60))
  until [ "$(app_field state)" = "$1" ]; do
    [ $SECONDS -lt $deadline ] || { echo "scenario: the app never became $1" >&2; exit 1; }
    sleep 0.05
  done
}

# The apps and protfs where the app user can run them.
mkdir -p "$work/apps"
for app in protfs BackgroundRunner ForgetfulApp BackgroundDownloader UploadSession; do
  cp "$build/$app" "$work/apps/"
done
chmod -R a+rX "$work/apps"

# A web server on loopback: /big.bin is 3 MB sent at about 1 MB/s (a download that takes a few
# seconds), PUT /upload answers {"received": N, "sha256": "..."}.
cat > "$work/server.py" <<'PY'
import hashlib, http.server, json, sys, time
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def do_GET(self):
        size = 3 << 20
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.send_header("ETag", '"big-1"')
        self.end_headers()
        chunk = bytes(range(256)) * 256
        sent = 0
        while sent < size:
            self.wfile.write(chunk[: min(len(chunk), size - sent)])
            sent += len(chunk)
            time.sleep(0.06)
    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        reply = json.dumps({"received": len(body), "sha256": hashlib.sha256(body).hexdigest()}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
PY
coproc SERVER { exec python3 "$work/server.py" 2>/dev/null; }
server_pid=$SERVER_PID
read -r port <&"${SERVER[0]}"
url="http://127.0.0.1:$port"
container="$PROTFS_DEVICE/Containers/com.example.app"

say "An app whose files default to NSFileProtectionComplete (its entitlement says so)"
step protfs init com.example.app --default-class complete
protfs init com.example.app --default-class complete

say "1. Background time runs out"
step protfs app launch com.example.app --background-time 2s --schedule background@300ms -- ForgetfulApp
status=0
protfs app launch com.example.app --background-time 2s --schedule background@300ms -- "$work/apps/ForgetfulApp" \
  >"$work/forgetful.log" 2>&1 || status=$?
echo "exit status $status (killed by the system); crash report:"
grep -ho '"terminationReason" *: *"[^"]*"' "$PROTFS_DEVICE"/.protfs/crash-reports/*.json | sed -n 1,1p
step protfs app launch com.example.app -- BackgroundRunner '&' ';' protfs app background com.example.app
protfs app launch com.example.app --suspend-after 500ms -- "$work/apps/BackgroundRunner" >"$work/runner.log" 2>&1 &
launch=$!
wait_for "ready" "$work/runner.log" >/dev/null
protfs app background com.example.app
wait_for "^done" "$work/runner.log" >/dev/null
grep -E "^(background task|time remaining|tick|done)" "$work/runner.log" | sed -n 1,8p
wait_state suspended
step protfs app status com.example.app
protfs app status com.example.app | sed -n 1,3p
protfs app terminate com.example.app
wait "$launch" || true

say "2. The phone locks during a background download: Operation not permitted"
echo "(the app as it shipped, on a phone of its own: \$PROTFS_DEVICE=$work/shipped)"
export PROTFS_DEVICE="$work/shipped"
protfs init com.example.app --default-class complete >/dev/null 2>&1
step protfs app launch com.example.app -- BackgroundDownloader "$url/big.bin" '&'
protfs app launch com.example.app --suspend-after 1s -- "$work/apps/BackgroundDownloader" "$url/big.bin" \
  >"$work/download1.log" 2>&1 &
launch=$!
wait_for '"didWriteData"' "$work/download1.log" >/dev/null
step protfs lock --grace 0 "  # a phone withdraws the keys 10 s after the lock; here at once"
protfs lock --grace 0 2>/dev/null
wait_for '"didCompleteWithError"' "$work/download1.log" >/dev/null
step protfs tasks
protfs tasks >"$work/tasks.txt" 2>&1 || true
grep -m1 "Operation not permitted" "$work/tasks.txt"
protfs unlock >/dev/null
protfs app terminate com.example.app --user
wait "$launch" || true
export PROTFS_DEVICE="$work/device"

say "3. The fix: nsurlsessiond's Downloads directory gets NSFileProtectionNone"
step protfs init-cache com.example.app
protfs init-cache com.example.app
protfs get-class "$container/Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.app"

say "4. The download outlives its suspended app, while the phone is locked"
step protfs app launch com.example.app --suspend-after 1s -- BackgroundDownloader "$url/big.bin" '&'
protfs app launch com.example.app --suspend-after 1s -- "$work/apps/BackgroundDownloader" "$url/big.bin" \
  >"$work/download2.log" 2>&1 &
launch=$!
wait_for '"didWriteData"' "$work/download2.log" >/dev/null
step protfs app background com.example.app ';' protfs lock --grace 0
protfs app background com.example.app
protfs lock --grace 0 >/dev/null 2>&1
wait_state suspended
protfs app status com.example.app | sed -n 1,1p
echo "(the app is frozen; the transfer goes on in the session service)"
wait_for '"urlSessionDidFinishEvents"' "$work/download2.log" 60 >/dev/null
grep -E '"(handleEventsForBackgroundURLSession|didFinishDownloadingTo|didCompleteWithError|urlSessionDidFinishEvents)"' \
  "$work/download2.log"
wait_state suspended
step protfs app status com.example.app
protfs app status com.example.app | sed -n 1,1p
step protfs get-class "$container/Documents/big.bin"
protfs get-class "$container/Documents/big.bin"
protfs unlock >/dev/null
protfs app terminate com.example.app
wait "$launch" || true

say "5. The download outlives its killed app: the service relaunches it in the background"
rm -f "$container/Documents/big.bin"
step protfs app launch com.example.app -- BackgroundDownloader "$url/big.bin" '&' ';' kill -9 '<the app>'
protfs app launch com.example.app -- "$work/apps/BackgroundDownloader" "$url/big.bin" >"$work/download3.log" 2>&1 &
launch=$!
wait_for '"didWriteData"' "$work/download3.log" >/dev/null
app_pid=$(app_field pid)
kill -9 "$app_pid"
wait "$launch" || true
echo "(killed; the transfer goes on in the session service)"
deadline=$((SECONDS + 60))
until [ -s "$container/Documents/big.bin" ] && [ "$(app_field state)" = suspended ]; do
  [ $SECONDS -lt $deadline ] || { echo "scenario: the relaunched app did not move the file" >&2; exit 1; }
  sleep 0.1
done
step protfs app status com.example.app
protfs app status com.example.app | sed -n 1,1p
step ls -l "$container/Documents"
ls -l "$container/Documents" | tail -n +2
protfs app terminate com.example.app >/dev/null 2>&1 || true

say "6. An upload from a file, and the server's JSON reply"
printf 'the weekly report\n' > "$container/Documents/report.txt"
chown 501:501 "$container/Documents/report.txt"
step protfs app launch com.example.app -- UploadSession "$url/upload" Documents/report.txt
(cd "$container" && protfs app launch com.example.app -- "$work/apps/UploadSession" "$url/upload" \
  "$container/Documents/report.txt") | grep -E '"(didReceive|didCompleteWithError)"'

echo
echo "scenario: done"
