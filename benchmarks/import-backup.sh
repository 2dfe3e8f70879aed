#!/usr/bin/env bash
# protfs import-backup --metadata-only of a 100,000-file backup, against its peer: reading the
# same rows with `sqlite3 Manifest.db 'select * from Files'` to /dev/null, then making the same
# tree with mkdir and truncate. Target (issue 33): <= 2x the peer's time, memory flat in the
# number of files. Every run writes into a directory of its own (nothing is deleted while timing:
# ext4 slows creation for minutes after mass deletions); FILES sets the count (default 100000).
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh
bash scripts/setup.sh --test
bash scripts/build.sh >/dev/null
protfs=$PWD/.build/release/protfs
files=${FILES:-100000} runs=${RUNS:-5}
work=$(mktemp -d /tmp/protfs-bench-import-XXXXXX)
trap 'forget_tree "$work"' EXIT
python3 scripts/make-backup.py "$work/backup" --bulk "$files"
mkdir "$work/runs"
sync
quiet_machine
python3 benchmarks/compare.py --runs "$runs" \
  --name "protfs import-backup --metadata-only" -- sh -c \
  'exec "$1" --device "$(mktemp -d -p "$2")" import-backup "$3" --metadata-only >/dev/null' \
  sh "$protfs" "$work/runs" "$work/backup" \
  --name "sqlite3 + mkdir/truncate" -- sh -c \
  'sqlite3 "$3/Manifest.db" "select * from Files" >/dev/null && cd "$(mktemp -d -p "$2")" &&
   xargs mkdir -p <"$3.dirs" && xargs truncate -s 4096 <"$3.files"' \
  sh "$protfs" "$work/runs" "$work/backup"
