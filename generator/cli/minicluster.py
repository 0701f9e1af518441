"""Run a Slurm cluster on this machine: slurmctld, a slurmd per node and munged; `--shape SITE` gives it a
site's partitions, limits, QOS, accounts and modules (a rehearsal of that site's scheduler).

The cluster itself is `generator.dev.minicluster`; this is its command line (docs/minicluster.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from generator.dev.minicluster import DEFAULT_DIR, DEFAULT_SHAPE, ENV_VAR, down, shape_named, status, up
from generator.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("up", "down", "status"),
                        help="up: start (idempotent); down: cancel jobs, stop the daemons; status: what runs")
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"state directory (default: ${ENV_VAR}, else {DEFAULT_DIR}/ under the current directory)")
    parser.add_argument("--shape", default=None, metavar="SITE",
                        help=f"up: the site whose scheduler the cluster rehearses (default: {DEFAULT_SHAPE}): its "
                        "partitions, limits, GPUs, constraint, QOS, accounts and modules")


def run(args: argparse.Namespace) -> int:
    if args.dir is not None and args.dir.exists() and not args.dir.is_dir():
        raise UsageError(f"--dir {args.dir}: not a directory")
    if args.shape is not None and args.action != "up":
        raise UsageError("--shape goes with up (a running cluster's shape: gen-recipe minicluster status)")
    if args.action == "up":
        print(up(args.dir, shape_named(args.shape)).text())
        return 0
    if args.action == "down":
        stopped = down(args.dir)
        print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
        return 0
    st = status(args.dir)
    print(st.text())
    return 0 if st.up else 1
