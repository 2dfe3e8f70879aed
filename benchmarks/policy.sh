#!/usr/bin/env bash
# Loading a policy of 20,000 rules (issue 10: it was quadratic, 37 s) vs the built-in default
# policy, each auditing the same small device, side by side. Target: the 20,000-rule audit under
# 1 s; the ratio shows what the rules cost on top of an audit's fixed start-up.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh
bash scripts/setup.sh --test
bash scripts/build.sh >/dev/null
protfs=$PWD/.build/release/protfs
rules=${RULES:-20000} runs=${RUNS:-7}
work=$(mktemp -d /tmp/protfs-bench-policy-XXXXXX)
trap 'rm -rf "$work"' EXIT
device=$work/device
"$protfs" --device "$device" init com.example.bench >/dev/null 2>&1
python3 - "$rules" >"$work/many.policy" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f'rule R{i} error "Documents/dir{i}/**" "Library/x{i}" = complete "rule {i}"')
PY
quiet_machine
python3 benchmarks/compare.py --runs "$runs" \
  --name "audit, $rules rules" -- "$protfs" --device "$device" audit --policy "$work/many.policy" \
  --name "audit, default policy" -- "$protfs" --device "$device" audit
