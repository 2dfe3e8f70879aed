#!/usr/bin/env bash
# Writes docs/cli.md, the command reference, from the command tree (`protfs help --markdown`), so
# that it says what --help and the manual pages say. Run it after changing a command's declaration:
# CLIReferenceTests fails while docs/cli.md differs from what the binary prints.
# Usage: bash scripts/cli-doc.sh [PROTFS-BINARY]   (default: .build/debug/protfs, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
protfs=${1:-.build/debug/protfs}
if [ ! -x "$protfs" ] && [ $# -eq 0 ]; then swift build --product protfs >&2; fi
[ -x "$protfs" ] || { echo "cli-doc.sh: no protfs at $protfs (run swift build, or give its path)" >&2; exit 64; }
"$protfs" help --markdown > docs/cli.md.tmp
mv docs/cli.md.tmp docs/cli.md
echo "cli-doc.sh: wrote docs/cli.md ($(wc -l < docs/cli.md) lines)"
