#!/usr/bin/env bash
# Downloads through the session service against curl: benchmarks/download.sh with PROTFS_TOOL=service
# (`protfs download --detach`, then `protfs tasks wait` for its tasks), on a fresh
# device and service per run, medians of alternating rounds, ratios; then the service's peak RSS.
#
#   benchmarks/sessions.sh [RUNS]      RUNS per tool and case, default 7
#
# Environment as download.sh's (CASES, BIG_MIB, SMALL_COUNT, SMALL_BYTES, PROTFS_FLAGS). The RSS
# download.sh prints for protfs is the waiting shell's; the service's is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
SERVICE_STATE=$(mktemp -d)
export SERVICE_STATE
finish() {
  bash benchmarks/service-run.sh stop || true
  if [ -s "$SERVICE_STATE/rss" ]; then
    sort -n "$SERVICE_STATE/rss" | awk '{a[NR]=$1} END {printf "session service peak RSS: median %d KiB, max %d KiB (%d runs)\n", a[int((NR+1)/2)], a[NR], NR}'
  fi
  rm -rf "$SERVICE_STATE"
}
trap finish EXIT
PROTFS_TOOL=service bash benchmarks/download.sh "$@"
