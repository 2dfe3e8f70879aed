#!/usr/bin/env bash
# Writes protfs's manual pages (roff, section 1) into DIR (default: .build/man), one per command,
# generated from the command tree by `protfs help --man`: protfs.1, protfs-init.1, protfs-app-launch.1, ...
# Usage: bash scripts/man.sh [DIR] [PROTFS-BINARY]
set -euo pipefail
for argument in "$@"; do
  case "$argument" in
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "Error: unknown option '$argument'" >&2; echo "Usage: bash scripts/man.sh [DIR] [PROTFS-BINARY]" >&2; exit 64 ;;
  esac
done
cd "$(dirname "$0")/.."
out=${1:-.build/man}
protfs=${2:-.build/debug/protfs}
[ -x "$protfs" ] || { echo "man.sh: no protfs at $protfs (run swift build, or give its path)" >&2; exit 64; }
mkdir -p "$out"
# Every visible command, one a line ("protfs app launch").
"$protfs" help --commands | while read -r -a words; do
  name=$(IFS=-; echo "${words[*]}")
  "$protfs" help --man "${words[@]:1}" > "$out/$name.1"
done
ls "$out" | wc -l | sed 's/^/man.sh: pages written: /'
