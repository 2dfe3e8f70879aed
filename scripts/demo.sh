#!/usr/bin/env bash
# Installs what is missing, builds protfs, and tells the seeds' story on a throw-away device:
# a background download dies while the phone is locked, `protfs init-cache` fixes it, and unlock
# moves the finished file into place. Then the lock as other programs meet it, under `protfs exec`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh >/dev/null
protfs() { "$PWD/.build/release/protfs" "$@"; }

work=$(mktemp -d /tmp/protfs-demo-XXXXXX)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export PROTFS_DEVICE="$work/device"
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; }
say() { printf '\n# %s\n' "$*"; }

# A web server on loopback to download from: Debian's nginx, on a free port, in the work directory.
mkdir -p "$work/www" "$work/nginx"
chmod 755 "$work" "$work/www"  # nginx serves as www-data
head -c 2000000 /dev/urandom > "$work/www/report.pdf"
port=$(( 20000 + RANDOM % 20000 ))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
cat > "$work/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  server { listen 127.0.0.1:$port; root $work/www; }
}
CONF
/usr/sbin/nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
server_pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
url="http://127.0.0.1:$port/report.pdf"
container="$PROTFS_DEVICE/Containers/com.example.app"

say "An app whose files default to NSFileProtectionComplete (its entitlement says so)."
step protfs init com.example.app --default-class complete
protfs init com.example.app --default-class complete
say "The phone locks (a phone drops the class A keys 10 s after the lock; --grace 0: at once)."
step protfs lock --grace 0
protfs lock --grace 0
say "A background download now dies: its temp directory inherited the complete class."
step protfs download --bundle com.example.app "$url"
protfs download --bundle com.example.app "$url" || echo "(exit status $?)"
say "The fix: create nsurlsessiond's Downloads directory with NSFileProtectionNone."
step protfs init-cache com.example.app
cache=$(protfs init-cache com.example.app)
echo "$cache"
step getfattr -n user.protfs.class "$cache"
getfattr --absolute-names -n user.protfs.class "$cache"
say "The transfer succeeds while locked; the file waits for the unlock to enter Documents."
step protfs download --bundle com.example.app "$url"
protfs download --bundle com.example.app "$url" || echo "(exit status $?: waiting for unlock)"
step protfs tasks
protfs tasks
step protfs unlock
protfs unlock
step protfs ls "$container/Documents"
protfs ls "$container/Documents"

say "Other programs meet the lock too: protfs exec runs them as the app user 501:501, without capabilities."
echo "secret" > "$container/Documents/notes.txt"
echo "public" > "$container/Library/Caches/readme.txt"
protfs set-class none "$container/Library/Caches/readme.txt"
step protfs lock --grace 0
protfs lock --grace 0
step protfs exec -- cat "$container/Documents/notes.txt"
protfs exec -- cat "$container/Documents/notes.txt" || echo "(exit status $?)"
step protfs exec -- chmod u+r "$container/Documents/notes.txt"
protfs exec -- chmod u+r "$container/Documents/notes.txt" || echo "(exit status $?: it cannot undo the lock)"
step protfs exec -- cat "$container/Library/Caches/readme.txt"
protfs exec -- cat "$container/Library/Caches/readme.txt"
step protfs status
protfs status
step protfs unlock
protfs unlock
step protfs exec -- cat "$container/Documents/notes.txt"
protfs exec -- cat "$container/Documents/notes.txt"
step protfs cache du
protfs cache du
