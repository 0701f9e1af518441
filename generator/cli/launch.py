"""Print a batch script that runs a workload in the site's container runtime, or bare (--bare).

    gen-recipe launch --site SITE --recipe NAME [--workload W] [--nodes N] [--gpus-per-node G]
                      [--tasks-per-node T] [--mode bind|hybrid] [--runtime R] [--bare]
                      [--image REF] [--out FILE] [-- WORKLOAD ARGS...]

The script itself comes from `generator.run.launch.script_of(plan_job(site, job))` (pure); this prints it or writes
it atomically.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from workloads.registry import NAMES as WORKLOADS

from generator.errors import shown
from generator.files import replaceable, write_atomic
from generator.model import site as site_mod
from generator.recipe import catalog, payload
from generator.run.launch import Job, check_job, plan_job, script_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", default="local", help="site name or path to a site TOML (default: local)")
    parser.add_argument("--recipe", default="pytorch", help="recipe whose image runs the workload: a built-in name "
                        "(default: pytorch), or your app file / Python recipe (runs its [workload] command)")
    parser.add_argument("--workload", default=None, choices=WORKLOADS, help="built-in workload (default: cnn)")
    parser.add_argument("--nodes", type=count(1), default=1, help="nodes (default: 1)")
    parser.add_argument("--gpus-per-node", type=count(0), default=None, help="GPUs per node (default: all the site's)")
    parser.add_argument("--tasks-per-node", type=count(1), default=None,
                        help="ranks per node (default: one per GPU, else one)")
    parser.add_argument("--mode", choices=("bind", "hybrid"), default=None,
                        help="MPI mode (default: the site's container.mpi_mode)")
    parser.add_argument("--runtime", default=None, help="container runtime (default: the site's)")
    parser.add_argument("--bare", action="store_true", help="the bare-metal twin: same modules, env and launcher")
    parser.add_argument("--image", default=None, help="image to run (default: what gen-recipe build makes)")
    parser.add_argument("--time", default="00:30:00", help="wall-clock limit in any form Slurm's --time takes: MM, MM:SS, HH:MM:SS, "
                        "D-HH, D-HH:MM, D-HH:MM:SS (written HH:MM:SS; default: 00:30:00)")
    parser.add_argument("--account", default="", help="account/project to charge (#SBATCH --account; required where "
                        "the site's [scheduler] says so)")
    parser.add_argument("--partition", default="", help="partition/queue (default: the site's for this kind of job)")
    parser.add_argument("--qos", default="", help="quality of service (default: the site's for jobs)")
    parser.add_argument("--debug", action="store_true", help="a short test run: the site's debug partition and QOS")
    parser.add_argument("--workloads-dir", default="", help="bare: directory holding workloads/ "
                        "(default: the installed gen-recipe's; GEN_RECIPE_WORKLOADS overrides at run time)")
    parser.add_argument("--registry", default=os.environ.get("GEN_RECIPE_REGISTRY") or "",
                        help="HOST[/PATH] the image was pushed to (gen-recipe build --push): the script says how to "
                        "pull it (default: $GEN_RECIPE_REGISTRY)")
    parser.add_argument("--out", type=Path, default=None, help="write the script here (atomically) instead of stdout")
    parser.add_argument("workload_args", nargs="*", metavar="-- ARGS", help="arguments for the workload")


def count(least: int):
    """An argparse type: a whole number from `least` to 100000."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"[0-9]{1,7}", text.strip()):       # ASCII digits; a longer one is out of range anyway
            what = "is out of range" if re.fullmatch(r"[-+]?[0-9]+", text.strip()) else "is not a whole number"
            said = shown(text)
            raise argparse.ArgumentTypeError(f"{said if len(said) <= 40 else said[:37] + '...'} {what} (give {least} to 100000)")
        value = int(text)
        if not least <= value <= 100_000:
            raise argparse.ArgumentTypeError(f"{value} is out of range (give {least} to 100000)")
        return value
    parse.__name__ = "count"
    return parse


def job_from_args(args: argparse.Namespace) -> Job:
    return Job(recipe=args.recipe, workload=args.workload, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
               tasks_per_node=args.tasks_per_node, mode=args.mode, runtime=args.runtime, bare=args.bare,
               image=args.image, workload_args=tuple(args.workload_args), time=args.time, account=args.account,
               partition=args.partition, qos=args.qos, debug=args.debug, workloads_dir=args.workloads_dir, registry=args.registry,
               allow_root=os.geteuid() == 0)   # root-only runtime flags (runtimes.Options.allow_root)


def run(args: argparse.Namespace) -> int:
    site = site_mod.load(args.site)
    job = job_from_args(args)
    check_job(site, job)                                            # every argument checked before it is used
    job = replace(job, recipe=catalog.load(job.recipe))          # resolved once (an app file is read once)
    # bare: a folder holding only the workloads package, ./build/payload (payload.pythonpath), made (or checked)
    # before the script is written; a printed script names the package's own folder (printing writes nothing)
    link_payload = job.bare and not job.workloads_dir and job.recipe.builtin and args.out
    if link_payload:
        plan_job(site, job)                                         # what the site refuses, refused before the folder
        replaceable(Path(args.out), follow_symlinks=False, flag=None)   # and an --out the write path would refuse
        job = replace(job, workloads_dir=str(payload.pythonpath(Path("build"))))
    plan = plan_job(site, job)
    text = script_of(plan)
    for note in plan.policy.notes:                                  # what the site file could not check: said
        print(f"gen-recipe: note: {note}", file=sys.stderr)
    if args.out:
        write_atomic(args.out, text, mode=0o755, flag=None)     # launch has no --follow-symlinks
        print(shown(str(args.out)))
    else:
        print(text, end="")
    return 0
