#!/usr/bin/env bash
# What the benchmarks share, sourced by every benchmark script: a free loopback port, nginx
# started in a directory of its own, the wait for a server to listen, and a fresh device with the
# benchmark's app. Each function says what it sets.

# The app every benchmark device holds.
BENCH_BUNDLE=com.example.bench

# free_port: prints a loopback port nothing listens on.
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
}

# start_nginx DIR PORT ROOT HTTP SERVER: writes DIR/nginx.conf (one worker, no access log, its
# temp paths under DIR/tmp, HTTP's directives in the http block and SERVER's in the server block,
# which listens on 127.0.0.1:PORT and serves ROOT), starts nginx in the background and sets
# NGINX_PID. Its errors go to DIR/error.log.
start_nginx() {
  local dir=$1 port=$2 root=$3 http=$4 server=$5
  mkdir -p "$dir/tmp"
  cat >"$dir/nginx.conf" <<CONF
$([ "$(id -u)" = 0 ] && echo "user root;")
worker_processes 1;
error_log $dir/error.log warn;
pid $dir/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
$http
  server {
    listen 127.0.0.1:$port;
    root $root;
$server
  }
}
CONF
  /usr/sbin/nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' &
  NGINX_PID=$!
}

# wait_for_port PORT PID [LOG]: returns once 127.0.0.1:PORT accepts a connection; exits 2 (with
# LOG on stderr) when process PID ends first or nothing listens within about five seconds.
wait_for_port() {
  local port=$1 pid=$2 log=${3:-}
  for _ in $(seq 1 500); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { [ -n "$log" ] && cat "$log" >&2; exit 2; }
    sleep 0.01
  done
  echo "Nothing listens on 127.0.0.1:$port." >&2
  exit 2
}

# stop_process PID: ends a server this script started (by its PID) and reaps it; nothing if empty.
stop_process() {
  [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true
}

# init_device PROTFS DEVICE: a fresh device at DEVICE with the container of $BENCH_BUNDLE.
init_device() {
  mkdir -p "$2"
  "$1" --device "$2" init "$BENCH_BUNDLE" >/dev/null
}

# median: the median of the numbers on standard input, one per line.
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# ratio A B: A / B with two decimals ("n/a" when B is 0).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# forget_tree DIR...: deletes a benchmark's work (DIR), flushes the inode tables (`sync`) and
# has quiet.py note the time, so that the next benchmark's quiet_machine waits until ext4 (without
# a journal) reuses the freed inodes again: until then every file it creates is slow to make.
forget_tree() {
  chmod -R u+rwX "$@" 2>/dev/null || true
  rm -rf "$@"
  sync
  python3 "$(dirname "${BASH_SOURCE[0]}")/quiet.py" --deleted
}

# quiet_machine: call before a benchmark's first measured round. Prints the load average it
# measures under, waits for a busy machine to settle or exits 75 (benchmarks/quiet.py says how,
# and BENCH_BUSY=1 measures anyway); compare.py does not check again after it.
quiet_machine() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/quiet.py" || exit $?
  export BENCH_QUIET_CHECKED=1
}

# mount_benchmark_options SCRIPT ARGS...: the mount benchmarks' options (--runs N, --protfs PATH)
# into $runs and $protfs, after a check that they run as root (mounting needs it); $protfs is
# built with scripts/build.sh when not given. The caller sets $runs' default first.
mount_benchmark_options() {
  local script=$1
  shift
  protfs=""
  while (($#)); do
    case "$1" in
      --runs) runs=$2; shift 2 ;;
      --protfs) protfs=$2; shift 2 ;;
      *) echo "usage: $script [--runs N] [--protfs PATH]" >&2; exit 64 ;;
    esac
  done
  [ "$(id -u)" -eq 0 ] || { echo "$(basename "$script"): run as root (protfs mount needs it)" >&2; exit 2; }
  [ -n "$protfs" ] || protfs=$(bash scripts/build.sh)
}
