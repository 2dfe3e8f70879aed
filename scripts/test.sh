#!/usr/bin/env bash
# Installs what is missing (`scripts/setup.sh --test`), then runs the whole test suite. `.ci/run`
# calls this same script.
#
#   bash scripts/test.sh [SWIFT-TEST-ARGS...]     (e.g. --filter InstallTests)
#
# Run as root: the tests mount scratch filesystems (ramfs, tmpfs) and run programs as other users.
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
esac
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
swift build --build-tests
# The tests wait for programs off Swift's thread pool, so a test that waits lets the next one start:
# without a bound every test of the suite would be under way at once, each with its servers and
# daemons. Eight at a time keeps both cores busy (the suite's fastest width on this 2-core machine).
swift test --experimental-maximum-parallelization-width 8 "$@"
