"""MPI and fabric: 2-rank ping-pong/allreduce bare vs container, and the transport actually in use.

The container must be as fast as bare metal *and* use the same MPI library and transport: a
container MPI that silently fell back to TCP (the SuperMUC-NG story) fails here even when TCP
happens to be fast enough on a small machine.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

from generator import launch, runtimes
from generator.build import udocker_env
from generator.stats import Pair, Process, estimate, verdict
from suites import harness
from suites.conftest import need_runtime, run_options, runtimes_under_test, tolerance
from suites.options import SUITE

RANKS = 2
SIZES = "8,1048576"
ARGS = ("--sizes", SIZES, "--iters", "1000", "--warmup", "100")
RUNS = 16


def pytest_generate_tests(metafunc):
    if "runtime" in metafunc.fixturenames:
        options = metafunc.config.stash[SUITE]
        names = list(runtimes_under_test(options)) if "mpi" in options.workloads else []
        metafunc.parametrize("runtime", names)


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
    lib_b, lib_c = (bare.get("library_version") or "").split(",")[0], (cont.get("library_version") or "").split(",")[0]
    if lib_b != lib_c:
        return f"container MPI library is {lib_c!r}, bare metal's is {lib_b!r}"
    return None


class Sides:
    def __init__(self, suite, site, images, python, runtime, inject: dict | None = None):
        need_runtime(suite, runtime)
        self.site = site
        image = images.for_runtime("pytorch", runtime)
        opts = run_options(suite, runtime, mpi=True)
        if runtime in ("podman", "docker"):
            # ranks in separate OCI containers meet through the host's /tmp (Open MPI's session directory)
            opts = runtimes.Options(**{**opts.__dict__, "binds": ("/tmp:/tmp",)})
        inner = runtimes.resolved(runtimes.command(site, image, ("python3", "-m", "workloads.mpi", *ARGS), opts,
                                                   runtime), os.environ)
        env_names = sorted({*site.container.env, *(inject or {})})
        self.bare_argv = launcher_argv(site, env_names) + [python, "-m", "workloads.mpi", *ARGS]
        self.cont_argv = launcher_argv(site, env_names) + list(inner.argv)
        self.bare_env = harness.bare_env(site)
        self.cont_env = {**os.environ, **site.container.env, **inner.env, **(inject or {}),
                         **(udocker_env() if runtime == "udocker" else {})}
        for step in inner.setup:
            subprocess.run(step, env=self.cont_env, check=True, capture_output=True)

    def pairs(self, runs: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
        rng, bare, cont = random.Random(seed), [], []
        for _ in range(runs):
            order = [(bare, self.bare_argv, self.bare_env), (cont, self.cont_argv, self.cont_env)]
            rng.shuffle(order)
            for out, argv, env in order:
                out.append(run_mpi(argv, env))
        return bare, cont


def as_pairs(bare: list[dict], cont: list[dict], key: str, size: str, *, time: bool) -> list[Pair]:
    def proc(record):
        value = float(record[key][size])
        return Process(work=(1.0,), seconds=(value,)) if time else Process(work=(value,), seconds=(1.0,))
    return [Pair(proc(b), proc(c)) for b, c in zip(bare, cont)]


def test_mpi_bare_vs_container(benchmark, suite, site, images, bare_python, verdicts, runtime):
    sides = Sides(suite, site, images, bare_python("pytorch"), runtime)
    bare, cont = benchmark.pedantic(sides.pairs, args=(suite.rounds or RUNS,), rounds=1, iterations=1)
    problem = transport_problem(bare[0], cont[0])
    assert problem is None, f"mpi ({runtime}): {problem}"
    results = []
    for key, size, metric, time in (("latency_us", "8", "mpi_latency", True),
                                    ("bandwidth_MBps", "1048576", "mpi_bandwidth", False)):
        tol = tolerance(suite, metric)
        est = estimate(as_pairs(bare, cont, key, size, time=time))
        v = verdict(f"{metric} ({runtime})", est, tol)
        verdicts.append(v)
        results.append(v)
        benchmark.extra_info[metric] = {"ratio": est.ratio, "ci_low": est.low, "ci_high": est.high,
                                        "pairs": est.pairs, "verdict": v.outcome, "message": v.message,
                                        "bare": [b[key][size] for b in bare], "container": [c[key][size] for c in cont]}
    benchmark.extra_info.update(site=site.name, runtime=runtime, workload="mpi", transport=cont[0].get("transport"),
                                library=cont[0].get("library_version"))
    failed = [v.message for v in results if v.outcome != "pass"]
    assert not failed, "; ".join(failed)


def test_forced_tcp_in_the_container_is_caught(suite, site, images, bare_python):
    """Forcing the container's Open MPI onto TCP (OMPI_MCA_btl=tcp,self) must make the check fail."""
    if site.mpi.flavour != "openmpi":
        pytest.skip(f"the TCP injection uses Open MPI's MCA variables; site {site.name} runs {site.mpi.flavour}")
    runtime = site.container.runtime
    python = bare_python("pytorch")
    clean = Sides(suite, site, images, python, runtime)
    forced = Sides(suite, site, images, python, runtime, inject={"OMPI_MCA_btl": "tcp,self"})
    bare = run_mpi(clean.bare_argv, clean.bare_env)
    assert transport_problem(bare, run_mpi(clean.cont_argv, clean.cont_env)) is None
    problem = transport_problem(bare, run_mpi(forced.cont_argv, forced.cont_env))
    assert problem is not None and "tcp" in problem
