"""A runtime wrapper that makes what it starts slower by a known fraction (the suite's power test).

    python throttle.py --slowdown 0.2 -- COMMAND...

COMMAND runs in its own process group, which is stopped and continued (SIGSTOP/SIGCONT) in a
50 ms duty cycle, so it runs (1 - slowdown) of the time: a known slowdown of every process it starts,
whatever they do. Works for runtimes whose processes stay in the group (ch-run, bare processes); not
for daemon-managed containers (podman's conmon).
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time

PERIOD = 0.05


def main(argv=None):
    p = argparse.ArgumentParser(prog="throttle")
    p.add_argument("--slowdown", type=float, required=True, help="fraction of time stopped, 0 <= x < 1")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not 0 <= args.slowdown < 1:
        p.error("give --slowdown in [0, 1) and a command after --")
    child = subprocess.Popen(command, start_new_session=True)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGCONT)
            os.killpg(child.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    # The stopped time is counted as it happened, and each stop is as long as the count is behind: on a busy
    # machine this wrapper wakes late from its sleeps (the command runs on meanwhile), and a fixed cycle then
    # stopped the command for a fraction of the time asked (8% instead of 50% in one CI run).
    run, stop = PERIOD * (1 - args.slowdown), PERIOD * args.slowdown
    start, stopped = time.monotonic(), 0.0
    while child.poll() is None:
        time.sleep(run)
        if stop and child.poll() is None:
            behind = args.slowdown * (time.monotonic() - start) - stopped
            with contextlib.suppress(ProcessLookupError):
                began = time.monotonic()
                try:
                    os.killpg(child.pid, signal.SIGSTOP)
                    time.sleep(min(max(stop, behind), 10 * PERIOD))
                finally:
                    os.killpg(child.pid, signal.SIGCONT)
                    stopped += time.monotonic() - began
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
