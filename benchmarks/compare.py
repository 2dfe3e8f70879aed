#!/usr/bin/env python3
"""Runs commands side by side, alternating, and prints medians, ratios (of the medians, and the
median of the per-round ratios) and peak RSS.

usage: compare.py --runs N [--before SHELL-COMMAND] --name NAME -- CMD ... [--name NAME -- CMD ...]
The first command is the one measured; every ratio is its median over the peer's median.
--before runs (untimed, through sh) before every run, warm-ups included.
On a busy machine it waits or refuses to measure (benchmarks/quiet.py), unless the calling script
checked already (BENCH_QUIET_CHECKED=1, set by lib.sh's quiet_machine).
COMPARE_TIMES=1 also prints every run's time, in order.
"""
import os
import resource
import statistics
import subprocess
import sys
import time


def parse(argv):
    runs, before, commands, i = 5, None, [], 0
    while i < len(argv):
        if argv[i] == "--runs":
            runs = int(argv[i + 1]); i += 2
        elif argv[i] == "--before":
            before = argv[i + 1]; i += 2
        elif argv[i] == "--name":
            name = argv[i + 1]; assert argv[i + 2] == "--"; i += 3
            cmd = []
            while i < len(argv) and argv[i] != "--name":
                cmd.append(argv[i]); i += 1
            commands.append((name, cmd))
        else:
            sys.exit(f"compare.py: unexpected {argv[i]!r}")
    return runs, before, commands


def run_once(cmd, before=None):
    if before is not None:
        subprocess.run(["sh", "-c", before], check=True)
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed with {os.waitstatus_to_exitcode(status)}")
    return elapsed, usage.ru_maxrss  # KiB on Linux


def main():
    runs, before, commands = parse(sys.argv[1:])
    if os.environ.get("BENCH_QUIET_CHECKED") != "1":  # the script did not check already
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from quiet import require_quiet
        require_quiet()
    times = {name: [] for name, _ in commands}
    rss = {name: 0 for name, _ in commands}
    for name, cmd in commands:  # one warm-up each, not counted
        run_once(cmd, before)
    for _ in range(runs):
        for name, cmd in commands:
            elapsed, maxrss = run_once(cmd, before)
            times[name].append(elapsed)
            rss[name] = max(rss[name], maxrss)
    first = commands[0][0]
    base = statistics.median(times[first])
    print(f"{'command':<28}{'median s':>10}{'min s':>10}{'peak RSS MiB':>14}{'ratio':>10}")
    for name, _ in commands:
        med = statistics.median(times[name])
        ratio = base / med if name != first else 1.0
        print(f"{name:<28}{med:>10.3f}{min(times[name]):>10.3f}{rss[name] / 1024:>14.1f}{ratio:>10.2f}")
    if os.environ.get("COMPARE_TIMES") == "1":  # every run, in order, for a closer look
        for name, _ in commands:
            print(f"TIMES {name}: " + " ".join(f"{t:.3f}" for t in times[name]))
    for name, _ in commands[1:]:
        print(f"RATIO {first} / {name} = {base / statistics.median(times[name]):.2f}")
        # Rounds alternate, so a round's two runs met the same host: the median of their ratios
        # is less moved by a host that was busy for a while.
        rounds = [a / b for a, b in zip(times[first], times[name])]
        print(f"ROUND RATIO {first} / {name} = {statistics.median(rounds):.2f} (median of {len(rounds)} rounds)")


main()
