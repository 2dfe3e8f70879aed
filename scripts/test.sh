#!/usr/bin/env bash
# Installs what is missing, then runs the whole test suite. `.ci/run` calls this same script.
# Run as root: the tests mount scratch filesystems (ramfs, tmpfs) and run programs as other users.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build --build-tests
swift test "$@"
