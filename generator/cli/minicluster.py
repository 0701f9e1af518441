"""Run a two-node Slurm cluster on this machine: slurmctld, two slurmd (n1, n2) and munged.

The cluster itself is `generator.dev.minicluster`; this is its command line (docs/minicluster.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from generator.dev.minicluster import DEFAULT_DIR, ENV_VAR, down, status, up
from generator.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("up", "down", "status"),
                        help="up: start (idempotent); down: cancel jobs, stop the daemons; status: what runs")
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"state directory (default: ${ENV_VAR}, else {DEFAULT_DIR}/ under the current directory)")


def run(args: argparse.Namespace) -> int:
    if args.dir is not None and args.dir.exists() and not args.dir.is_dir():
        raise UsageError(f"--dir {args.dir}: not a directory")
    if args.action == "up":
        print(up(args.dir).text())
        return 0
    if args.action == "down":
        stopped = down(args.dir)
        print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
        return 0
    st = status(args.dir)
    print(st.text())
    return 0 if st.up else 1
