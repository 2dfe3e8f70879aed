#!/usr/bin/env bash
# The session service's half of benchmarks/sessions.sh (called by download.sh with PROTFS_TOOL=service).
#
#   service-run.sh setup PROTFS DEVICE       stops the previous run's service (keeping its peak RSS
#                                            in $SERVICE_STATE/rss), makes DEVICE and starts its service
#   service-run.sh download PROTFS DEVICE ARGS...
#                                            `protfs download --detach ARGS`, then `protfs tasks wait`
#                                            for the tasks it printed (fails if one failed)
#   service-run.sh stop                      stops the last service, keeping its peak RSS
set -euo pipefail
: "${SERVICE_STATE:?set by benchmarks/sessions.sh}"

stop_previous() {
  [ -f "$SERVICE_STATE/pid" ] || return 0
  local pid
  pid=$(cat "$SERVICE_STATE/pid")
  rm -f "$SERVICE_STATE/pid"
  awk '/VmHWM/ {print $2}' "/proc/$pid/status" >>"$SERVICE_STATE/rss" 2>/dev/null || true
  kill "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
}

case $1 in
  setup)
    stop_previous
    "$2" --device "$3" init com.example.bench >/dev/null
    "$2" --device "$3" sessions start --idle-exit 10m | sed -n 's/.*pid \([0-9]*\).*/\1/p' >"$SERVICE_STATE/pid"
    ;;
  download)
    protfs=$2 device=$3
    shift 3
    # The ids it prints are the run's tasks; `tasks wait` returns once the service has stored every
    # one's outcome (a completed download is in place), exiting non-zero if one failed.
    ids=$("$protfs" --device "$device" download --bundle com.example.bench --detach "$@")
    # shellcheck disable=SC2086
    "$protfs" --device "$device" tasks wait $ids
    ;;
  stop) stop_previous ;;
esac
