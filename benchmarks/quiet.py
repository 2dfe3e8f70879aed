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
"""
import os
import sys
import time

EX_TEMPFAIL = 75


def load_average(path="/proc/loadavg"):
    """The load average over the last minute."""
    with open(path) as file:
        return float(file.read().split()[0])


def require_quiet(out=sys.stdout, read=load_average, sleep=time.sleep):
    """Returns the report line once the machine is quiet (or BENCH_BUSY=1); exits 75 otherwise."""
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
    require_quiet()
