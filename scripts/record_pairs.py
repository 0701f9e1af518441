"""Record per-pair, per-chunk data of an A/A comparison (bare vs bare) for the sequential-design tests.

    .venv/bin/python scripts/record_pairs.py --pairs 48 --out tests/suite/data/mnist_aa_local.json
    .venv/bin/python scripts/record_pairs.py --mpi --pairs 24 --out tests/suite/data/mpi_latency_aa_local.json

Runs the suite's harness (`generator.suite.harness.compare`, fresh fork servers every 3 pairs, both sides
pinned to the same CPU as the suite does) with the same Python on both sides, the `mnist` workload at
its CPU size. The JSON keeps what `generator.suite.stats.Process` needs (work and seconds per chunk,
per process) plus how it was made; `tests/suite/test_sequential.py` resamples its pairs.

With --mpi it records the heavy-tailed metric instead: 8-byte-class MPI ping-pong latency, 2 ranks
under mpirun, one bare run after another (random order within a pair). Each run measures 8 message
sizes of 8-15 bytes (the same eager shared-memory path), which gives each process 8 latency samples
for a per-process median (`Process.of_samples`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generator.model.site import load as load_site  # noqa: E402
from generator.suite import harness  # noqa: E402
from workloads.registry import WORKLOADS  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="record_pairs")
    p.add_argument("--pairs", type=int, default=42)
    p.add_argument("--workload", default="mnist", choices=sorted(n for n, w in WORKLOADS.items() if w.cpu))
    p.add_argument("--site", default="local")
    p.add_argument("--python", default=sys.executable, help="the Python both sides run (default: this one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mpi", action="store_true", help="record MPI latency (2 ranks, mpirun) instead")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)

    site = load_site(args.site)
    record = record_mpi(site, args) if args.mpi else record_harness(site, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=None, separators=(",", ":")) + "\n")
    print(f"{len(record['pairs'])} pairs in {record['elapsed_s']:.0f} s → {args.out}")
    return 0


def machine() -> str:
    return f"{platform.node()} {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}"


MPI_SIZES = ",".join(str(n) for n in range(8, 16))


def record_mpi(site, args) -> dict:
    argv = ["mpirun", "--oversubscribe", "--bind-to", "none", *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
            "-np", "2", args.python, "-m", "workloads.mpi", "--sizes", MPI_SIZES, "--iters", "200", "--warmup", "20",
            "--no-allreduce"]
    env = harness.bare_env(site, site.container.mpi_mode)
    rng, pairs, start = random.Random(args.seed), [], time.monotonic()

    def run() -> list[float]:
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=True).stdout
        record = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
        return [round(float(v), 4) for v in record["latency_us"].values()]

    for _ in range(args.pairs):
        first = rng.choice("ab")
        one, two = run(), run()
        a, b = (one, two) if first == "a" else (two, one)
        pairs.append({"a": {"work": [1.0] * len(a), "seconds": a}, "b": {"work": [1.0] * len(b), "seconds": b}})
    return {
        "what": f"A/A MPI ping-pong latency in µs, bare vs bare, {args.pairs} pairs of mpirun runs (2 ranks), "
                f"sizes {MPI_SIZES} bytes as 8 samples per process, 200 iterations each",
        "metric": "latency", "per_process": "median", "per_server": 1,
        "machine": machine(), "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
        "elapsed_s": round(time.monotonic() - start, 1), "pairs": pairs,
    }


def record_harness(site, args) -> dict:
    cpus = sorted(os.sched_getaffinity(0))
    pin = {"WORKLOADS_CPUS": str(cpus[-1])} if len(cpus) > 1 else {}
    side = harness.bare_side(site, args.python, site.container.mpi_mode, pin)
    w = WORKLOADS[args.workload].cpu
    start = time.monotonic()
    comp = harness.compare(side, side, args.workload, w, args.pairs, seed=args.seed)
    elapsed = time.monotonic() - start

    def proc(p):
        return {"work": list(p.work), "seconds": [round(s, 6) for s in p.seconds]}

    return {
        "what": f"A/A {args.workload} bare vs bare, {args.pairs} pairs, fresh fork servers every "
                f"{harness.PAIRS_PER_SERVER} pairs, both sides pinned to CPU {pin.get('WORKLOADS_CPUS', 'any')}",
        "workload": {"name": args.workload, "args": list(w.args), "chunks": w.chunks, "steps": w.steps},
        "machine": machine(), "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
        "elapsed_s": round(elapsed, 1), "per_server": harness.PAIRS_PER_SERVER,
        "pairs": [{"a": proc(pair.bare), "b": proc(pair.container)} for pair in comp.pairs],
    }


if __name__ == "__main__":
    sys.exit(main())
