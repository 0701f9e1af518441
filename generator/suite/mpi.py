"""MPI and fabric comparisons: 2-rank ping-pong/allreduce bare vs container, the transport actually in
use, and the sequential measurement of both metrics (used by suites/test_mpi.py on this node and by
suites/test_scheduler.py as job steps)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time

import pytest

from generator.run import launch, runtimes
from generator.suite import harness, result, sequential
from generator.suite.plugin import need_runtime, run_options, tolerance
from generator.suite.stats import Pair, Process

RANKS = 2
# Latency is heavy-tailed here (single runs reach 100x the rest): each process measures 8 small sizes and
# is summarised by their median (docs/measuring.md); bandwidth by its 1 MiB figure.
LATENCY_SIZES = tuple(str(s) for s in range(8, 16))
BANDWIDTH_SIZES = tuple(str(s) for s in range(1 << 20, (1 << 20) + 8))     # 8 samples of 1 MiB
SIZES = ",".join((*LATENCY_SIZES, *BANDWIDTH_SIZES))
ARGS = ("--sizes", SIZES, "--iters", "300", "--warmup", "50")
METRICS = (("latency_us", LATENCY_SIZES, "mpi_latency", True), ("bandwidth_MBps", BANDWIDTH_SIZES, "mpi_bandwidth", False))
# Each pair is two launches (bare and container): looks after 8, 12, ..., 32 pairs.
DESIGN = sequential.Design(first=8, step=4, max_pairs=32)


def launcher_argv(site, env_names) -> list[str]:
    argv = list(launch.launcher(site, 1, RANKS, 0, forward=env_names))
    if not argv:
        pytest.skip(f"site {site.name} has no MPI launcher (host.launcher = none)")
    if not shutil.which(argv[0]):
        pytest.skip(f"{argv[0]} not found on PATH (the launcher of --site={site.name})")
    if argv[0] in ("mpirun", "mpiexec") and site.mpi.flavour == "openmpi":
        argv[1:1] = ["--oversubscribe", "--bind-to", "none"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return argv


def run_mpi(argv: list[str], env: dict[str, str]) -> dict:
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode == 77:
        pytest.skip(f"mpi workload cannot run here: {r.stderr.strip().splitlines()[-1:]}")
    assert r.returncode == 0 and lines, f"{' '.join(argv[:8])} ...: exit {r.returncode}\n{r.stderr[-1500:]}"
    return json.loads(lines[-1])


def transport_problem(bare: dict, cont: dict) -> str | None:
    """Why the container's MPI is not the intended one, or None."""
    if cont.get("transport") != bare.get("transport"):
        return (f"container MPI uses {cont.get('transport')}, bare metal uses {bare.get('transport')}: the "
                f"container fell back to a slower path (evidence: {cont.get('evidence')})")
    if cont.get("network") != bare.get("network"):
        return (f"between nodes the container MPI would use {cont.get('network')}, bare metal {bare.get('network')}: "
                f"the container's network path differs (evidence: {cont.get('evidence')})")
    lib_b, lib_c = (bare.get("library_version") or "").split(",")[0], (cont.get("library_version") or "").split(",")[0]
    if lib_b != lib_c:
        return f"container MPI library is {lib_c!r}, bare metal's is {lib_b!r}"
    return None


class Paired:
    """Bare and container runs of the mpi workload, one pair at a time in random order: set `bare_argv`,
    `cont_argv`, `bare_env` and `cont_env` (here: ranks under the launcher; test_scheduler: job steps)."""

    bare_argv: list[str]
    cont_argv: list[str]
    bare_env: dict[str, str]
    cont_env: dict[str, str]

    def pairs(self, runs: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
        rng, bare, cont = random.Random(seed), [], []
        for _ in range(runs):
            order = [(bare, self.bare_argv, self.bare_env), (cont, self.cont_argv, self.cont_env)]
            rng.shuffle(order)
            for out, argv, env in order:
                out.append(run_mpi(argv, env))
        return bare, cont


class Sides(Paired):
    def __init__(self, suite, site, images, python, runtime, inject: dict | None = None):
        need_runtime(suite, runtime)
        self.site = site
        image = images.for_runtime("pytorch", runtime)
        opts = run_options(suite, runtime, mpi=True)
        self.mode = opts.mode
        if runtime in ("podman", "docker"):
            # ranks in separate OCI containers meet through the host's /tmp (Open MPI's session directory)
            opts = runtimes.Options(**{**opts.__dict__, "binds": ("/tmp:/tmp",)})
        inner = harness.container_run(site, runtime, image, ("python3", "-m", "workloads.mpi", *ARGS), opts,
                                      {**site.container.env, **(inject or {})})
        env_names = sorted({*site.container.env, *(inject or {})})
        self.bare_argv = launcher_argv(site, env_names) + [python, "-m", "workloads.mpi", *ARGS]
        self.cont_argv = launcher_argv(site, env_names) + list(inner.argv)
        self.bare_env = harness.bare_env(site, opts.mode)
        self.cont_env = dict(inner.env)
        harness.run_setup(inner)


def as_pairs(bare: list[dict], cont: list[dict], key: str, sizes: tuple[str, ...], *, time: bool) -> list[Pair]:
    def proc(record):
        return Process.of_samples([float(record[key][s]) for s in sizes], time=time)
    return [Pair(proc(b), proc(c)) for b, c in zip(bare, cont)]


def measure(sides: Sides, tols, runtime: str, rounds: int | None, budget_s: float = harness.BUDGET_S):
    """Pairs in batches until every metric's verdict decides (the sequential design, each metric kept at
    the look that decided it), the design's last look, or the time budget; a transport mismatch stops at
    once. Returns (bare records, container records, {metric: Verdict})."""
    design = sequential.Design(first=rounds, step=rounds, max_pairs=rounds) if rounds else DESIGN
    bare, cont, decided, start = [], [], {}, time.monotonic()
    while True:
        b, c = sides.pairs(design.step if bare else design.first, seed=len(bare))
        bare, cont = bare + b, cont + c
        n = len(bare)
        if transport_problem(bare[0], cont[0]):
            return bare, cont, decided
        out_of_time = (time.monotonic() - start) * (n + design.step) / n > budget_s
        final = out_of_time or n >= design.max_pairs
        if not (design.is_look(n) or final):
            continue
        for key, sizes, metric, is_time in METRICS:
            if metric not in decided or decided[metric].outcome == "continue":
                decided[metric] = sequential.look(f"{metric} ({runtime})", as_pairs(bare, cont, key, sizes, time=is_time),
                                                  tols[metric], design, final=final)
        if all(v.outcome != "continue" for v in decided.values()):
            return bare, cont, decided


def measure_and_judge(benchmark, suite, site, sides: Paired, runtime: str, mode: str, verdicts: list, label: str = "") -> None:
    """Measure (`measure`), check the transport, record the results and assert the verdicts."""
    label = label or runtime
    tols = {metric: tolerance(suite, metric) for _, _, metric, _ in METRICS}
    bare, cont, decided = benchmark.pedantic(measure, args=(sides, tols, label, suite.rounds), rounds=1, iterations=1)
    problem = transport_problem(bare[0], cont[0])
    assert problem is None, f"mpi ({label}): {problem}"
    results = []
    for key, sizes, metric, is_time in METRICS:
        v, tol = decided[metric], tols[metric]
        pairs = as_pairs(bare, cont, key, sizes, time=is_time)
        verdicts.append(v)
        results.append(result.of(v.estimate, v, site=site.name, workload="mpi", runtime=runtime, mode=mode,
                                 metric=metric, tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                 bare=tuple(p.bare.speed() for p in pairs),
                                 container=tuple(p.container.speed() for p in pairs),
                                 extra={"transport": cont[0].get("transport"), "look": v.look,
                                        "library": cont[0].get("library_version"), "label": label,
                                        "network": cont[0].get("network")}))
    result.record(benchmark, results)
    failed = [v.message for v in decided.values() if v.outcome != "pass"]
    assert not failed, "; ".join(failed)
