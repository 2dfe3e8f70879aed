#!/usr/bin/env bash
# Installs what is missing, builds protfs, and shows what it does on a throw-away device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build -c release --product protfs >/dev/null
protfs() { "$PWD/.build/release/protfs" "$@"; }

device=$(mktemp -d /tmp/protfs-demo-XXXXXX)
trap 'rm -rf "$device"' EXIT
export PROTFS_DEVICE="$device"
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; }

step protfs init com.example.app
protfs init com.example.app
step protfs init-cache com.example.app
cache=$(protfs init-cache com.example.app)
echo "$cache"
step getfattr -n user.protfs.class "$cache"
getfattr --absolute-names -n user.protfs.class "$cache"
container="$device/Containers/com.example.app"
echo "secret" > "$container/Documents/notes.txt"
step protfs set-class complete "$container/Documents/notes.txt"
protfs set-class complete "$container/Documents/notes.txt"
step protfs get-class "$container/Documents/notes.txt" "$container/Documents"
protfs get-class "$container/Documents/notes.txt" "$container/Documents"
step protfs ls -R "$container/Library"
protfs ls -R "$container/Library"

# The lock: a program run under `protfs exec` (no CAP_DAC_OVERRIDE, even as root) cannot read a
# complete file while the device is locked, and can again after unlock.
echo "none" > "$container/Documents/readme.txt"
protfs set-class none "$container/Documents/readme.txt" >/dev/null
step protfs lock
protfs lock
step protfs exec -- cat "$container/Documents/notes.txt"
protfs exec -- cat "$container/Documents/notes.txt" || echo "(exit status $?)"
step protfs exec -- cat "$container/Documents/readme.txt"
protfs exec -- cat "$container/Documents/readme.txt"
step protfs status
protfs status
step protfs unlock
protfs unlock
step protfs exec -- cat "$container/Documents/notes.txt"
protfs exec -- cat "$container/Documents/notes.txt"
