#!/usr/bin/env bash
# Times `protfs lock --grace 0` and `protfs unlock` of sealed devices (`init --sealed`) holding
# 0, 100,000 and 1,000,000 files, alternating device after device in one run, beside
# `protfs --version` (a process start and nothing else), and prints medians (target: under 10 ms
# each, the same at every size: a sealed device's lock evicts keys and walks no file). Then the
# same with a passcode set on each device, where unlock runs PBKDF2 twice by design (the passcode's
# hash, then the keybag's key, each calibrated to about 80 ms). On a busy machine the wall times
# swing with the load; the CPU times (user + system, of the process) do not.
#
# The files are empty (mode 0644, 1,000 per directory): the lock never opens one, so only their
# number can matter. They live on tmpfs (/dev/shm, which takes user xattrs) so that making and
# removing a million costs seconds; SEALED_WORK changes where. Run as root: the class keys live in
# root's kernel keyring.
#
#   benchmarks/sealed-lock.sh                 # 9 rounds
#   ROUNDS=15 SIZES="0 100000" benchmarks/sealed-lock.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/lib.sh

ROUNDS=${ROUNDS:-9}
SIZES=${SIZES:-0 100000 1000000}
[ "$(id -u)" -eq 0 ] || { echo "sealed-lock.sh: run as root (the class keys live in root's keyring)" >&2; exit 2; }

BIN=${PROTFS:-$(bash scripts/build.sh)}
WORK="$(mktemp -d "${SEALED_WORK:-/dev/shm}/protfs-sealed-lock-XXXXXX")"
chmod 755 "$WORK"  # the app user reaches the devices, as init checks
devices=()
cleanup() {
  # Each device's keys leave the keyring with a reboot (all but class D's) before the tree goes.
  for dev in "${devices[@]}"; do "$BIN" --device "$dev" reboot >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

for n in $SIZES; do
  dev="$WORK/d$n"
  mkdir -p "$dev"
  "$BIN" --device "$dev" init --sealed "$BENCH_BUNDLE" >/dev/null 2>&1
  echo "Making $n files in $dev ..." >&2
  python3 - "$dev/Containers/$BENCH_BUNDLE/Documents/tree" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    if i % 1000 == 0:
        directory = os.path.join(root, f"d{i // 1000:04}")
        os.makedirs(directory)
    os.close(os.open(os.path.join(directory, f"f{i % 1000:03}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
PY
  devices+=("$dev")
done

quiet_machine
# Rounds: every device locked then unlocked in turn, `protfs --version` between; wall time of each
# process (posix_spawn to exit) and its CPU time. With a passcode, PROTFS_PASSCODE gives it.
measure() {
  python3 - "$BIN" "$ROUNDS" "$1" "${devices[@]}" <<'PY'
import os, resource, statistics, sys, time
binary, rounds, label, devices = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]

def run(args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    pid = os.posix_spawn(binary, [binary] + args, os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(args)} failed ({status})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000

times = {}
for r in range(rounds + 1):  # the first round warms up and is not counted
    for dev in devices:
        for op, args in (("lock", ["lock", "--grace", "0"]), ("unlock", ["unlock"])):
            wall, cpu = run(["--device", dev] + args)
            if r: times.setdefault((op, dev), []).append((wall, cpu))
        wall, cpu = run(["--version"])
        if r: times.setdefault(("start", ""), []).append((wall, cpu))

def med(key, i): return statistics.median(t[i] for t in times[key])
print(f"{label}: median of {rounds} alternating rounds, ms (wall / cpu)")
print(f"  {'protfs --version (a start)':34} {med(('start', ''), 0):7.2f} / {med(('start', ''), 1):6.2f}")
for dev in devices:
    files = os.path.basename(dev)[1:]
    for op in ("lock", "unlock"):
        print(f"  {op + ' --grace 0' if op == 'lock' else op:14} {int(files):>9,} files     "
              f"{med((op, dev), 0):7.2f} / {med((op, dev), 1):6.2f}")
PY
}

echo "== sealed lock and unlock, no passcode (load: $(cut -d' ' -f1-3 /proc/loadavg))"
measure "no passcode"
for dev in "${devices[@]}"; do PROTFS_PASSCODE=1234 "$BIN" --device "$dev" passcode set >/dev/null; done
echo "== sealed lock and unlock, passcode set (PBKDF2 ~80 ms x 2 at unlock, by design; load: $(cut -d' ' -f1-3 /proc/loadavg))"
PROTFS_PASSCODE=1234 measure "passcode set"
