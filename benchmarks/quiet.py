#!/usr/bin/env python3
"""Waits for the machine to be quiet before a benchmark measures, or refuses to measure.

A benchmark's ratios mean what they say only on an idle machine: under load, the two-thread walks
lose their second core and every tool's time swings. This reads the load average over the last
minute (/proc/loadavg) and goes on once it is at most 0.5. Above that it waits, up to BENCH_SETTLE
seconds (default 180: the benchmark's own build and data raise the load, which takes a minute or
two to fall), then exits with status 75 (EX_TEMPFAIL) saying why. BENCH_BUSY=1 measures anyway
and says so in the output, so that figures from a busy machine are never mistaken for an idle
one's. BENCH_MAX_LOAD changes the limit.

    python3 benchmarks/quiet.py          # from a script, before its first measured round

Its one line of output (on stdout) belongs in the benchmark's report: the load it measured under.
The scripts call it through benchmarks/lib.sh (`quiet_machine`), and compare.py and
scripts/bench-app-launch.py import `require_quiet`.

It first waits out a disk slowed by the benchmarks' own clean-ups. On ext4 without a journal (as
this machine's) a new inode skips every inode freed in the last 60 s, or in the last 360 s while
the block of the inode table that holds it is dirty, so creating files right after tens of
thousands were deleted is several times slower, for whichever tool comes next (RESULTS.md:
curl's 2,000 small files took 0.85 s instead of 0.15 s). lib.sh's `forget_tree` deletes a
benchmark's tree, writes the inode tables back with `sync` and has this note the time
(`quiet.py --deleted`) in BENCH_DELETIONS (default ${TMPDIR:-/tmp}/protfs-bench-deletions); this
waits until 65 s have passed since then.
Checked once: `download.sh` then `sessions.sh`, the second waited 63 s and measured curl's 2,000
files at 0.15-0.17 s. Blocks the next benchmark dirties again fall under the 360 s rule; a longer
wait would cost six minutes between scripts, and did not prove needed.
BENCH_BUSY=1 does not wait, and says so.
"""
import os
import sys
import time

# ext4's RECENTCY_MIN (fs/ext4/ialloc.c) after a sync, and a few seconds more.
DELETION_SETTLE = 65.0


def deletions_marker():
    """The file where benchmarks note when they last deleted a tree."""
    return os.environ.get("BENCH_DELETIONS") or os.path.join(os.environ.get("TMPDIR") or "/tmp",
                                                             "protfs-bench-deletions")


def note_deletion(now=time.time):
    """Notes that a benchmark deleted a tree now (lib.sh's forget_tree, once it synced)."""
    with open(deletions_marker(), "w") as file:
        file.write(f"{int(now())}\n")


def settle_deletions(now=time.time, sleep=time.sleep):
    """Waits until DELETION_SETTLE seconds have passed since the last noted deletion; returns the
    seconds waited (0 without a note, or with BENCH_BUSY=1)."""
    try:
        with open(deletions_marker()) as file:
            deleted = float(file.read().strip() or 0)
    except (OSError, ValueError):
        return 0.0
    left = deleted + DELETION_SETTLE - now()
    if left <= 0:
        return 0.0
    if os.environ.get("BENCH_BUSY") == "1":
        print(f"A benchmark deleted many files {DELETION_SETTLE - left:.0f} s ago: file creation may still be "
              "slowed; measured anyway because BENCH_BUSY=1.", file=sys.stderr, flush=True)
        return 0.0
    print(f"Waiting {left:.0f} s: a benchmark deleted many files {DELETION_SETTLE - left:.0f} s ago, and ext4 "
          "without a journal slows file creation for 60 s after that...", file=sys.stderr, flush=True)
    sleep(left)
    return left

EX_TEMPFAIL = 75


def load_average(path="/proc/loadavg"):
    """The load average over the last minute."""
    with open(path) as file:
        return float(file.read().split()[0])


def require_quiet(out=sys.stdout, read=load_average, sleep=time.sleep, now=time.time):
    """Returns the report line once the machine is quiet (or BENCH_BUSY=1); exits 75 otherwise."""
    settle_deletions(now=now, sleep=sleep)
    limit = float(os.environ.get("BENCH_MAX_LOAD", "0.5"))
    settle = float(os.environ.get("BENCH_SETTLE", "180"))
    load = read()
    if load <= limit:
        return report(out, f"load average {load:.2f} (quiet: at most {limit:g})")
    if os.environ.get("BENCH_BUSY") == "1":
        return report(
            out,
            f"load average {load:.2f}: a BUSY machine (above {limit:g}), measured anyway because BENCH_BUSY=1; "
            "these figures are not an idle machine's")
    print(f"Waiting up to {settle:g} s for the load average ({load:.2f}) to fall to {limit:g}...",
          file=sys.stderr, flush=True)
    waited = 0.0
    while waited < settle:
        step = min(5.0, settle - waited)
        sleep(step)
        waited += step
        load = read()
        if load <= limit:
            return report(out, f"load average {load:.2f} (quiet: at most {limit:g}, after {waited:g} s)")
    print(
        f"Error: the machine is busy: its load average over the last minute is {load:.2f}, above {limit:g}, "
        f"after waiting {waited:g} s. Stop what else runs and try again, or set BENCH_BUSY=1 to measure "
        "anyway (the output then says the machine was busy).",
        file=sys.stderr)
    sys.exit(EX_TEMPFAIL)


def report(out, line):
    print(line, file=out, flush=True)
    return line


if __name__ == "__main__":
    if sys.argv[1:] == ["--deleted"]:
        note_deletion()
    else:
        require_quiet()
