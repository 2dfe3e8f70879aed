#!/usr/bin/env bash
# Builds protfs the way it ships and prints the binary's path:
#
#   bash scripts/build.sh [PRODUCT...]      default product: protfs
#
# A release build with the Swift runtime and Foundation linked in (--static-swift-stdlib): the
# binary runs on a machine without the Swift toolchain (copy it to a CI runner), and it starts
# without binding the shared libraries' symbols at every launch, which a CLI run thousands of
# times pays each time. The benchmarks and the demo use this build.
set -euo pipefail
for argument in "$@"; do
  case "$argument" in
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "Error: unknown option '$argument'" >&2; echo "Usage: bash scripts/build.sh [PRODUCT...]" >&2; exit 64 ;;
  esac
done
cd "$(dirname "$0")/.."
flags=(-c release --static-swift-stdlib)
for product in "${@:-protfs}"; do
  swift build "${flags[@]}" --product "$product" >&2
done
echo "$(swift build "${flags[@]}" --show-bin-path)/${1:-protfs}"
