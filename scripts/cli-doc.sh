#!/usr/bin/env bash
# Writes docs/cli.md, the command reference, from the command tree (`protfs help --markdown`), so
# that it says what --help and the manual pages say. Run it after changing a command's declaration:
# CLIReferenceTests fails while docs/cli.md differs from what the binary prints.
# Usage: bash scripts/cli-doc.sh [PROTFS-BINARY]   (default: .build/debug/protfs, built if missing)
set -euo pipefail
for argument in "$@"; do
  case "$argument" in
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "Error: unknown option '$argument'" >&2; echo "Usage: bash scripts/cli-doc.sh [PROTFS-BINARY]" >&2; exit 64 ;;
  esac
done
cd "$(dirname "$0")/.."
protfs=${1:-.build/debug/protfs}
if [ ! -x "$protfs" ] && [ $# -eq 0 ]; then swift build --product protfs >&2; fi
[ -x "$protfs" ] || { echo "cli-doc.sh: no protfs at $protfs (run swift build, or give its path)" >&2; exit 64; }
"$protfs" help --markdown > docs/cli.md.tmp
mv docs/cli.md.tmp docs/cli.md
echo "cli-doc.sh: wrote docs/cli.md ($(wc -l < docs/cli.md) lines)"
