#!/usr/bin/env bash
# Runs the whole test suite N times from one fresh clone of HEAD, optionally with K CPU-spinning
# processes beside it, and prints each test that failed with how often and its first failure.
#
#   scripts/soak.sh N [--load K] [--width W] [--keep DIR] [-- SWIFT-TEST-ARGS...]
#
#   N           how many full runs (each one `swift test`, as scripts/test.sh runs it)
#   --load K    K busy loops run beside the suite for the whole soak (0, the default: none)
#   --width W   Swift Testing's parallelisation width (default 8, as scripts/test.sh)
#   --keep DIR  keep the clone, and every run's console output and JUnit files, in DIR
#               (default: a temporary directory, removed at the end unless a run failed)
#   -- ARGS     passed to every `swift test` (e.g. --filter SessionService)
#
# The clone is built once; every run then tests that build, so the runs differ only in timing.
# Exit status: 0 when every run passed, 1 when any failed, 64 on a usage error.
set -euo pipefail

usage() {
  echo "Usage: scripts/soak.sh N [--load K] [--width W] [--keep DIR] [-- SWIFT-TEST-ARGS...]" >&2
  echo "See the comment at the top of scripts/soak.sh." >&2
  exit 64
}
positive() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 > 0)); }

[ $# -ge 1 ] || usage
case $1 in -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
runs=$1
shift
positive "$runs" || { echo "Error: the number of runs must be a positive integer, not '$runs'." >&2; usage; }
load=0 width=8 keep="" extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --load) [ $# -ge 2 ] || usage; load=$2; shift 2
      [[ $load =~ ^[0-9]+$ ]] || { echo "Error: --load takes a count of spinners, not '$load'." >&2; usage; } ;;
    --load=*) load=${1#--load=}; shift
      [[ $load =~ ^[0-9]+$ ]] || { echo "Error: --load takes a count of spinners, not '$load'." >&2; usage; } ;;
    --width) [ $# -ge 2 ] || usage; width=$2; shift 2
      positive "$width" || { echo "Error: --width takes a positive integer, not '$width'." >&2; usage; } ;;
    --keep) [ $# -ge 2 ] || usage; keep=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "Error: unknown argument '$1'." >&2; usage ;;
  esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
  [ -z "$(ls -A "$work")" ] || { echo "Error: '$work' is not empty; --keep needs an empty or new directory." >&2; exit 64; }
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/protfs-soak.XXXXXX")
fi

spinners=()
cleanup() {
  local pid
  for pid in "${spinners[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${spinners[@]}"; do wait "$pid" 2>/dev/null || true; done
  spinners=()
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

bash "$repo/scripts/setup.sh" --test
git clone --quiet --no-local "$repo" "$work/protfs"
commit=$(git -C "$work/protfs" rev-parse --short HEAD)
echo "soak: commit $commit, $runs run(s), width $width, $load spinner(s), in $work" >&2
(cd "$work/protfs" && swift build --build-tests) >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  echo "Error: the clone of $commit does not build; see $work/build.log." >&2
  trap - EXIT
  cleanup
  exit 1
}

for ((i = 0; i < load; i++)); do
  bash -c 'while :; do :; done' &
  spinners+=($!)
done

failed_runs=0
for ((run = 1; run <= runs; run++)); do
  log="$work/run-$run.log"
  started=$(date +%s)
  status=0
  # A hung run is a failure too: the suites' own time limits are minutes, so two hours means a hang.
  (cd "$work/protfs" && timeout --kill-after=30 7200 swift test --skip-build \
    --experimental-maximum-parallelization-width "$width" --xunit-output "$work/run-$run.xml" \
    "${extra[@]}") >"$log" 2>&1 || status=$?
  took=$(($(date +%s) - started))
  summary=$(grep -E '^. Test run with [0-9]+ tests? ' "$log" | tail -n 1 || true)
  [ -n "$summary" ] || summary="no summary (exit status $status; see $log)"
  if [ "$status" -eq 0 ]; then
    echo "run $run/$runs: passed in ${took} s: $summary"
  else
    failed_runs=$((failed_runs + 1))
    echo "run $run/$runs: FAILED (status $status) in ${took} s: $summary"
  fi
done
cleanup

python3 - "$work" "$runs" <<'PY'
import os, re, sys
import xml.etree.ElementTree as ET

work, runs = sys.argv[1], int(sys.argv[2])
failures = {}  # test name -> [count, first run, first message]

def note(name, run, message):
    entry = failures.setdefault(name, [0, run, message])
    entry[0] += 1

for run in range(1, runs + 1):
    seen = set()
    for path in (os.path.join(work, f"run-{run}.xml"), os.path.join(work, f"run-{run}-swift-testing.xml")):
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError):
            continue
        for case in root.iter("testcase"):
            problems = case.findall("failure") + case.findall("error")
            if not problems:
                continue
            name = f"{case.get('classname', '')}.{case.get('name', '')}".strip(".")
            message = (problems[0].get("message") or problems[0].text or "").strip()
            if name not in seen:
                seen.add(name)
                note(name, run, message)
    # A run whose test process crashed or hung writes no JUnit file: fall back to its console output.
    log = os.path.join(work, f"run-{run}.log")
    try:
        text = open(log, errors="replace").read()
    except OSError:
        continue
    for match in re.finditer(r"^. Test (\S+?)(?:\(\))? recorded an issue at ([^\n]*)$", text, re.M):
        name = match.group(1)
        if not any(n.endswith("." + name) or n.endswith("." + name + "()") or n == name for n in seen):
            seen.add(name)
            note(name, run, match.group(2))
    if not re.search(r"^. Test run with \d+ tests? ", text, re.M):
        tail = " / ".join(line.strip() for line in text.strip().splitlines()[-3:])
        note("(the test process itself)", run, "no Swift Testing summary; last lines: " + tail)

if not failures:
    print(f"soak: all {runs} run(s) passed")
else:
    print(f"soak: {len(failures)} test(s) failed across {runs} run(s):")
    for name, (count, run, message) in sorted(failures.items(), key=lambda kv: (-kv[1][0], kv[0])):
        first = message.splitlines()[0] if message else "(no message)"
        print(f"  {count}x {name}")
        print(f"      first in run {run}: {first[:400]}")
PY

if [ "$failed_runs" -gt 0 ] || [ -n "$keep" ]; then
  echo "soak: the logs are in $work" >&2
  trap - EXIT
  cleanup
else
  rm -rf "$work"
fi
[ "$failed_runs" -eq 0 ]
