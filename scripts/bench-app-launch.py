#!/usr/bin/env python3
"""Benchmark: starting an app under `protfs app launch` until its first event is delivered, against
starting the same binary bare.

The app is Examples/BackgroundRunner, which prints "ready, ..." from didFinishLaunchingWithOptions:
under protfs that line is the first event delivered to the app's delegate. Bare, the same binary
runs until ProtFSKit finds it is not an app and says so on standard error: the binary's own start
(loader, Swift runtime, Foundation) up to its first line, which is the peer's "first event".

Rounds alternate between the two; each prints its times and the medians and their ratio at the end.
A third case runs in each round too: the launch of the same app prewarmed (`protfs app prewarm`,
run untimed before it, as iOS prewarms an app before the user launches it), whose time is from
the launch's spawn to the app's first line, as for the others. Run as root from the repository
after `swift build` (or give --build DIR):

    python3 scripts/bench-app-launch.py [--rounds N] [--build DIR] [--no-prewarm]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def first_line(command, env, stream, graceful=False):
    """Seconds from spawning `command` until it writes its first line on `stream`; then ends it.

    `graceful`: ended as a user ends `protfs app launch` (SIGTERM: the app is terminated and its
    mount taken down), and waited for, so that the next launch starts from a clean device. Killing
    the whole group instead would kill the mount's fusermount3 too and leave its mount for the
    next launch to clean up, which that launch's time would then include (about 5 ms)."""
    start = time.monotonic()
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL,
        start_new_session=True)
    pipe = process.stdout if stream == "stdout" else process.stderr
    line = pipe.readline()
    elapsed = time.monotonic() - start
    try:
        if graceful:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sys.exit(f"bench-app-launch: {command[0]} did not end within 10 s of SIGTERM")
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
    process.wait()
    if not line:
        sys.exit(f"bench-app-launch: {command[0]} wrote nothing on {stream}")
    return elapsed, line.decode(errors="replace").strip()


def main():
    parser = argparse.ArgumentParser(prog="python3 scripts/bench-app-launch.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds (default 15)")
    parser.add_argument("--build", default=".build/debug", help="the build directory (default .build/debug)")
    parser.add_argument("--no-prewarm", action="store_true", help="leave out the prewarmed launches")
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-app-launch: run it as root (protfs app launch confines the app as the app user)")
    protfs = os.path.abspath(os.path.join(options.build, "protfs"))
    runner = os.path.abspath(os.path.join(options.build, "BackgroundRunner"))
    for path in (protfs, runner):
        if not os.access(path, os.X_OK):
            sys.exit(f"bench-app-launch: {path} is missing: run `swift build` first")

    work = tempfile.mkdtemp(prefix="protfs-bench-")
    try:
        os.chmod(work, 0o755)
        device = os.path.join(work, "device")
        app = os.path.join(work, "BackgroundRunner")
        shutil.copy(runner, app)
        os.chmod(app, 0o755)
        subprocess.run([protfs, "--device", device, "init", "com.example.bench"], check=True,
                       stdout=subprocess.DEVNULL)
        env = dict(os.environ)
        env.pop("PROTFS_DEVICE", None)
        launch = [protfs, "--device", device, "app", "launch", "com.example.bench", "--", app]
        prewarm = [protfs, "--device", device, "app", "prewarm", "com.example.bench", "--", app]
        bare, launched, prewarmed = [], [], []
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
        from quiet import require_quiet
        require_quiet()
        # One of each first, not counted: the page cache and the bundle are warm for both.
        first_line([app], env, "stderr")
        first_line(launch, env, "stdout", graceful=True)
        if not options.no_prewarm:
            subprocess.run(prewarm, env=env, check=True, stdout=subprocess.DEVNULL)
            first_line(launch, env, "stdout", graceful=True)
        for round_number in range(1, options.rounds + 1):
            seconds, _ = first_line([app], env, "stderr")
            bare.append(seconds)
            seconds, line = first_line(launch, env, "stdout", graceful=True)
            if not line.startswith("ready"):
                sys.exit(f"bench-app-launch: the app's first line was {line!r}")
            launched.append(seconds)
            text = f"round {round_number}: bare {bare[-1] * 1000:.1f} ms, app launch {launched[-1] * 1000:.1f} ms"
            if not options.no_prewarm:
                # Prewarmed untimed, as iOS does before the user's launch; then the same launch.
                subprocess.run(prewarm, env=env, check=True, stdout=subprocess.DEVNULL)
                seconds, line = first_line(launch, env, "stdout", graceful=True)
                if not line.startswith("ready"):
                    sys.exit(f"bench-app-launch: the prewarmed app's first line was {line!r}")
                prewarmed.append(seconds)
                text += f", prewarmed {prewarmed[-1] * 1000:.1f} ms"
            print(text)
        bare_median = statistics.median(bare)
        launch_median = statistics.median(launched)
        text = (f"median: bare {bare_median * 1000:.1f} ms, app launch {launch_median * 1000:.1f} ms, "
                f"ratio {launch_median / bare_median:.2f}")
        if prewarmed:
            prewarmed_median = statistics.median(prewarmed)
            text += (f"; prewarmed {prewarmed_median * 1000:.1f} ms, ratio {prewarmed_median / bare_median:.2f}")
        print(text + " (target 1.5)")
    finally:
        subprocess.run(["pkill", "-9", "-f", work], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
