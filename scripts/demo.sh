#!/usr/bin/env bash
# The main command: the source documents' whole story, told on a throw-away device.
#
#   sudo bash scripts/demo.sh [--detailed]
#
# Installs what is missing (scripts/setup.sh --demo), builds protfs and the example apps of Examples/ for
# release (scripts/build.sh), then plays the story with those apps, each ported from iOS by its
# imports alone, against a throttled web server on loopback (127.0.0.1, stopped at the end). The
# device lives in a temporary directory and is mounted (`protfs mount`), so that every refusal
# reads "Operation not permitted", as on a phone; the directory, the mount, the server and every
# process the story started are gone when it ends, also after an error or Ctrl-C.
#
#   0. an app whose files default to NSFileProtectionComplete, on the mounted device;
#   1. background time runs out: the app that never ends its task hears its expiration handler,
#      then is killed with a crash report (0x8badf00d); the one that ends its task is suspended;
#   2. the phone locks during a background download: "Operation not permitted", because the
#      session's Library/Caches/com.apple.nsurlsessiond/Downloads/<bundle-id> directory inherited
#      the complete class;
#   3. the fix: that directory made with class none (`protfs init-cache`);
#   4. the download outlives its suspended app: it finishes in the session service while the phone
#      is locked; the app is woken (handleEventsForBackgroundURLSession), moves the file into
#      Documents and is suspended again;
#   5. the download outlives its killed app: the service relaunches it in the background;
#   6. an upload from a file, whose JSON reply the app reads;
#   7. a background fetch (`protfs app fetch`) wakes the suspended app, which downloads;
#   8. pause and resume: the download continues from its resume data;
#   9. other programs meet the lock too, under `protfs exec`, through the mount.
#
# Each step prints its heading, the command, and the lines that prove it; the story takes about
# half a minute after the build and ends with "demo: done in N s". With --detailed it also prints
# all that the apps print (progress once): scripts/scenario.sh is this story told that way, on the
# debug build, for readers of the README's scenario and for its test. With $PROTFS_BUILD=DIR it
# uses the protfs and example apps built in DIR, with no setup and no build (the tests run it so).
#
# Root is needed: the apps run as the app user 501 in cgroups of their own, through FUSE mounts.
# Without /dev/fuse the story runs unmounted, under permission modes alone, and says so: its
# refusals then read "Permission denied".
set -euo pipefail
cd "$(dirname "$0")/.."
detailed=false
for argument in "$@"; do
  case $argument in
    --detailed) detailed=true ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
    *)
      echo "Error: unknown argument '$argument'" >&2
      echo "Usage: sudo bash scripts/demo.sh [--detailed]" >&2
      echo "  See 'scripts/demo.sh --help'." >&2
      exit 64
      ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "demo: run it as root (sudo bash scripts/demo.sh): it runs the apps as the app user 501, in" \
    "cgroups of their own, through FUSE mounts" >&2
  exit 64
fi
apps=(ForgetfulApp BackgroundRunner BackgroundDownloader UploadSession FetchDownloader PauseResume)
if [ -n "${PROTFS_BUILD:-}" ]; then
  build=$PROTFS_BUILD
else
  bash scripts/setup.sh --demo
  build=$(dirname "$(bash scripts/build.sh protfs "${apps[@]}")")
fi
for program in protfs "${apps[@]}"; do
  [ -x "$build/$program" ] || { echo "demo: $build/$program is not built (swift build)" >&2; exit 1; }
done
started=$SECONDS

work=$(mktemp -d "${TMPDIR:-/tmp}/protfs-demo-XXXXXX")
chmod 755 "$work"  # the app user reaches the device and the apps through it
export PROTFS_DEVICE="$work/device"
protfs() { "$work/apps/protfs" "$@"; }
server_pid=""
# Ends what the story started: the apps, the session services, the mount, the server; then, by
# pid, any process still running from the work directory (a launch that Ctrl-C cut short) and
# any mount left in it; then removes the directory.
cleanup() {
  local status=$? device app proc mountpoint
  trap - EXIT INT TERM
  set +e
  for device in "$work/device" "$work/shipped"; do
    [ -d "$device/Containers" ] || continue
    for app in "$device"/Containers/*; do
      PROTFS_DEVICE=$device protfs app terminate "${app##*/}" >/dev/null 2>&1
    done
    PROTFS_DEVICE=$device protfs sessions stop >/dev/null 2>&1
  done
  if mountpoint -q "$work/mnt"; then protfs unmount "$work/mnt" >/dev/null 2>&1; fi
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; fi
  for proc in /proc/[0-9]*; do
    [ "${proc#/proc/}" != $$ ] || continue
    local -a words=()
    mapfile -d '' words 2>/dev/null <"$proc/cmdline" || continue
    [[ " ${words[*]} " == *" $work/"* ]] && kill -9 "${proc#/proc/}" 2>/dev/null
  done
  wait 2>/dev/null
  while read -r _ _ _ _ mountpoint _; do
    [[ $mountpoint == "$work"/* ]] && umount -l "$mountpoint"
  done < <(tac /proc/self/mountinfo)
  if grep -q " $work/" /proc/self/mountinfo; then
    echo "demo: a mount is still in $work; left it in place" >&2
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
heading() { printf '\n%s## %s%s\n' "$bold" "$*" "$plain"; }
step() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; }
fail() { echo "demo: $*" >&2; exit 1; }
# Waits (at most $3 seconds, 30 by default) until file $2 has a line containing $1, and prints it.
wait_for() {
  local deadline=$((SECONDS + ${3:-30}))
  until grep -m1 -F -- "$1" "$2" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { cat "$2" >&2; fail "no line with '$1' in $2 after ${3:-30} s"; }
    sleep 0.05
  done
}
# The app's field $1 (state, pid) from its record.
app_field() {
  protfs app status com.example.app --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0].get(sys.argv[1]))' "$1" 2>/dev/null || true
}
# Waits (at most 60 s) until the app's state is $1.
wait_state() {
  local deadline=$((SECONDS + 60))
  until [ "$(app_field state)" = "$1" ]; do
    [ $SECONDS -lt $deadline ] || fail "the app never became $1 ($(app_field state))"
    sleep 0.05
  done
}
# What app log $1 shows: the first line containing each of $2..., in the log's order; with
# --detailed, every line (progress only once).
show_log() {
  local log=$1
  shift
  if $detailed; then
    awk '/"(didWriteData|didSendBodyData)"/ { if (progress++) next } { print }' "$log"
  else
    awk -v wanted="$(printf '%s\n' "$@")" '
      BEGIN { n = split(wanted, text, "\n") }
      { for (i = 1; i <= n; i++) if (!(i in seen) && index($0, text[i])) { seen[i] = 1; print; next } }' "$log"
  fi
}

# The apps and protfs where the app user can run them; BackgroundDownloader also behind a script
# that keeps its output in a log, since a relaunched app's own output goes to /dev/null.
mkdir -p "$work/apps"
for program in protfs "${apps[@]}"; do cp "$build/$program" "$work/apps/"; done
cat >"$work/apps/BackgroundDownloader.sh" <<SH
#!/bin/sh
exec "$work/apps/BackgroundDownloader" "\$@" >>"$work/relaunch.log" 2>&1
SH
: >"$work/relaunch.log"
chmod 666 "$work/relaunch.log"
chmod -R a+rX "$work/apps"
chmod 755 "$work/apps/BackgroundDownloader.sh"

# A web server on loopback: GET /big.bin is 3 MiB at about 1 MiB/s (a download that takes a few
# seconds; a Range continues it; while the file named by its argument exists, it holds a transfer
# after its first 64 KiB), GET /feed.json a small JSON document, and PUT /upload answers
# {"received": N, "sha256": "..."}.
cat >"$work/server.py" <<'PY'
import hashlib, http.server, json, os, re, sys, time
HOLD = sys.argv[1]
CHUNK = bytes(range(256)) * 256
BIG = CHUNK * 48
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def reply(self, status, body, kind, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers: self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/feed.json":
            return self.reply(200, b'{"headlines": ["Protected data", "Background time"]}', "application/json")
        if self.path != "/big.bin":
            return self.reply(404, b"", "text/plain")
        start, status = 0, 200
        wanted = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if wanted and self.headers.get("If-Range", '"big-1"') == '"big-1"' and int(wanted[1]) < len(BIG):
            start, status = int(wanted[1]), 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(BIG) - start))
        self.send_header("ETag", '"big-1"')
        self.send_header("Accept-Ranges", "bytes")
        if status == 206: self.send_header("Content-Range", f"bytes {start}-{len(BIG) - 1}/{len(BIG)}")
        self.end_headers()
        for offset in range(start, len(BIG), len(CHUNK)):
            self.wfile.write(BIG[offset : offset + len(CHUNK)])
            time.sleep(0.06)
            while os.path.exists(HOLD): time.sleep(0.05)
    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        reply = {"received": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        self.reply(201, json.dumps(reply).encode(), "application/json")
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
PY
coproc SERVER { exec python3 "$work/server.py" "$work/hold" 2>/dev/null; }
server_pid=$SERVER_PID
read -r port <&"${SERVER[0]}"
url="http://127.0.0.1:$port"
container="$PROTFS_DEVICE/Containers/com.example.app"

heading "0. An app whose files default to NSFileProtectionComplete, on a device mounted as a phone's"
step protfs init com.example.app --default-class complete
protfs init com.example.app --default-class complete
mkdir "$work/mnt"
step protfs mount "$work/mnt"
mounted=false
if [ ! -e /dev/fuse ]; then
  echo "(no /dev/fuse here, so no mount: the story runs under permission modes alone, and its refusals"
  echo "read \"Permission denied\" where a phone says \"Operation not permitted\")"
elif protfs mount "$work/mnt"; then
  mounted=true
else
  echo "(the mount failed: the story runs under permission modes alone, refusals reading \"Permission denied\")"
fi

heading "1. Background time runs out: the expiration handler, then the kill (0x8badf00d)"
step protfs app launch com.example.app --background-time 2s --schedule background@300ms -- ForgetfulApp
status=0
protfs app launch com.example.app --background-time 2s --schedule background@300ms -- "$work/apps/ForgetfulApp" \
  >"$work/forgetful.log" 2>&1 || status=$?
show_log "$work/forgetful.log" "expiring"
echo "exit status $status (killed by the system); crash report:"
grep -hoE '"(terminationReason|reason)" *: *"[^"]*"' "$PROTFS_DEVICE"/.protfs/crash-reports/*.json | sort -r
echo "(the app that ends its task in time is suspended instead, its timer logging the time left)"
step protfs app launch com.example.app -- BackgroundRunner '&'
step protfs app background com.example.app
protfs app launch com.example.app --suspend-after 500ms -- "$work/apps/BackgroundRunner" >"$work/runner.log" 2>&1 &
launch=$!
wait_for "ready" "$work/runner.log" >/dev/null
protfs app background com.example.app
wait_for "done" "$work/runner.log" >/dev/null
wait_state suspended
show_log "$work/runner.log" "background task" "time remaining" "done"
step protfs app status com.example.app
protfs app status com.example.app | sed -n 1p
protfs app terminate com.example.app
wait "$launch" || true

heading "2. The phone locks during a background download: Operation not permitted"
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
# (It goes on resuming from its resume data, and failing, until it is quit: shown up to its first failure.)
$detailed && show_log <(sed '/"didCompleteWithError"/q' "$work/download1.log")
step protfs tasks
protfs tasks >"$work/tasks.txt" 2>&1 || true
grep -m1 "Operation not permitted" "$work/tasks.txt" || { cat "$work/tasks.txt"; fail "the download did not fail"; }
protfs unlock >/dev/null
protfs app terminate com.example.app --user
wait "$launch" || true
export PROTFS_DEVICE="$work/device"

heading "3. The fix: nsurlsessiond's Downloads directory gets NSFileProtectionNone"
step protfs init-cache com.example.app
protfs init-cache com.example.app
step protfs get-class "$container/Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.app"
protfs get-class "$container/Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.app"

heading "4. The download outlives its suspended app, while the phone is locked"
step protfs app launch com.example.app --suspend-after 1s -- BackgroundDownloader "$url/big.bin" '&'
protfs app launch com.example.app --suspend-after 1s -- "$work/apps/BackgroundDownloader" "$url/big.bin" \
  >"$work/download2.log" 2>&1 &
launch=$!
wait_for '"didWriteData"' "$work/download2.log" >/dev/null
step protfs app background com.example.app ';' protfs lock --grace 0
protfs app background com.example.app
protfs lock --grace 0 >/dev/null 2>&1
wait_state suspended
protfs app status com.example.app | sed -n 1p
echo "(the app is frozen; the transfer goes on in the session service)"
wait_for '"urlSessionDidFinishEvents"' "$work/download2.log" 60 >/dev/null
show_log "$work/download2.log" '"handleEventsForBackgroundURLSession"' '"didFinishDownloadingTo"' \
  '"urlSessionDidFinishEvents"'
wait_state suspended
step protfs app status com.example.app
protfs app status com.example.app | sed -n 1p
step protfs get-class "$container/Documents/big.bin"
if $mounted; then
  protfs get-class "$container/Documents/big.bin"
else
  protfs get-class "$container/Documents/big.bin" 2>&1 ||
    echo "(unmounted, the locked Documents directory refused the move by its modes; a phone lets it through)"
fi
protfs unlock >/dev/null
protfs app terminate com.example.app
wait "$launch" || true

heading "5. The download outlives its killed app: the service relaunches it in the background"
rm -f "$container/Documents/big.bin"
step protfs app launch com.example.app -- BackgroundDownloader "$url/big.bin" '&'
step kill -9 '<the app>'
# The server holds the transfer until the app is killed: however loaded the machine, it is
# killed with its download under way.
touch "$work/hold"
protfs app launch com.example.app -- "$work/apps/BackgroundDownloader.sh" "$url/big.bin" >/dev/null 2>&1 &
launch=$!
wait_for '"didWriteData"' "$work/relaunch.log" >/dev/null
# The app's record may still be settling (its launch reported, its status being written): read it
# until it names a pid, and stop the demo if the kill reaches nothing.
killed_pid=$(app_field pid)
deadline=$((SECONDS + 30))
until [[ $killed_pid =~ ^[0-9]+$ ]]; do
  [ $SECONDS -lt $deadline ] || fail "the app's status names no pid: $(protfs app status com.example.app 2>&1)"
  sleep 0.05
  killed_pid=$(app_field pid)
done
kill -9 "$killed_pid" || fail "cannot kill the app's pid $killed_pid"
wait "$launch" || true
rm -f "$work/hold"
echo "(pid $killed_pid killed; the transfer goes on in the session service)"
killed=$(wc -l <"$work/relaunch.log")
wait_for '"urlSessionDidFinishEvents"' "$work/relaunch.log" 60 >/dev/null
wait_state suspended
tail -n +"$((killed + 1))" "$work/relaunch.log" >"$work/relaunched.log"
show_log "$work/relaunched.log" '"handleEventsForBackgroundURLSession"' '"didFinishDownloadingTo"'
step protfs app status com.example.app
protfs app status com.example.app | sed -n 1p
step ls -l "$container/Documents"
ls -l "$container/Documents" | tail -n +2
protfs app terminate com.example.app
wait_state notRunning

heading "6. An upload from a file, and the server's JSON reply"
printf 'the weekly report\n' >"$container/Documents/report.txt"
chown 501:501 "$container/Documents/report.txt"
step protfs app launch com.example.app -- UploadSession "$url/upload" Documents/report.txt
(cd "$container" && protfs app launch com.example.app -- "$work/apps/UploadSession" "$url/upload" \
  "$container/Documents/report.txt") >"$work/upload.log"
show_log "$work/upload.log" '"didReceive"' '"didCompleteWithError"'

heading "7. A background fetch: the system wakes the suspended app, which downloads"
step protfs app launch com.example.app --suspend-after 300ms -- FetchDownloader "$url/feed.json" '&'
protfs app launch com.example.app --suspend-after 300ms -- "$work/apps/FetchDownloader" "$url/feed.json" \
  >"$work/fetch.log" 2>&1 &
launch=$!
wait_state active
step protfs app background com.example.app ';' protfs app fetch com.example.app
protfs app background com.example.app
wait_state suspended
protfs app fetch com.example.app
wait_for '"didCompleteWithError"' "$work/fetch.log" >/dev/null
show_log "$work/fetch.log" '"started"' '"didFinishDownloadingTo"'
step protfs app status com.example.app
deadline=$((SECONDS + 30))
until protfs app status com.example.app | grep -q "last fetch: "; do
  [ $SECONDS -lt $deadline ] || fail "the fetch did not complete"
  sleep 0.05
done
protfs app status com.example.app | sed -n 1p
step cat "$container/Documents/fetched"
cat "$container/Documents/fetched"
echo
protfs app terminate com.example.app
wait "$launch" || true

heading "8. Pause and resume: the download continues from its resume data"
step protfs app launch com.example.app -- PauseResume "$url/big.bin"
protfs app launch com.example.app -- "$work/apps/PauseResume" "$url/big.bin" >"$work/pause.log" 2>&1
show_log "$work/pause.log" '"paused"' '"didResumeAtOffset"' '"didFinishDownloadingTo"' \
  '"code":0,"event":"didCompleteWithError"'
resumed=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{") and json.loads(line).get("event") == "didFinishDownloadingTo":
        print(json.loads(line)["path"])' "$work/pause.log")
step ls -l "$resumed"
ls -l "$resumed"

through=""
$mounted && through=", through the mount"
heading "9. Other programs meet the lock too, under protfs exec (the app user 501:501)$through"
echo "secret" >"$container/Documents/notes.txt"
echo "public" >"$container/Library/Caches/readme.txt"
chown 501:501 "$container/Documents/notes.txt" "$container/Library/Caches/readme.txt"
protfs set-class none "$container/Library/Caches/readme.txt"
step protfs lock --grace 0
protfs lock --grace 0
step protfs exec -- cat "$container/Documents/notes.txt"
protfs exec -- cat "$container/Documents/notes.txt" 2>&1 || echo "(exit status $?)"
step protfs exec -- sh -c "'chmod u+r notes.txt; cat notes.txt'"
(cd "$container/Documents" && protfs exec -- sh -c 'chmod u+r notes.txt; cat notes.txt' 2>&1) ||
  echo "(exit status $?: it cannot undo the lock)"
step protfs exec -- cat "$container/Library/Caches/readme.txt"
protfs exec -- cat "$container/Library/Caches/readme.txt" 2>&1
step protfs unlock ';' protfs exec -- cat "$container/Documents/notes.txt"
protfs unlock
protfs exec -- cat "$container/Documents/notes.txt" 2>&1

echo
echo "demo: done in $((SECONDS - started)) s"
