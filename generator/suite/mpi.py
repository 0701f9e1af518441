"""MPI and fabric comparisons: 2-rank ping-pong/allreduce bare vs container, the transport actually in
use, and the sequential measurement of both metrics (used by suites/test_mpi.py on this node and by
suites/test_scheduler.py as job steps)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
import time

import pytest

from generator.run import launch, runtimes
from generator.suite import fitness, harness, result, sequential
from generator.suite.plugin import Note, need_runtime, run_options, settle, tolerance
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
UNLIKE_PAIRS = 3        # a comparison that is no measure of the container's cost (`unlike`): recorded, not judged


def launcher_argv(site, env_names, runtime: str = "") -> list[str]:
    argv = list(launch.launcher(site, 1, RANKS, 0, forward=env_names, runtime=runtime))
    if not argv:
        pytest.skip(f"site {site.name} has no MPI launcher (host.launcher = none)")
    path = runtimes.with_host_mpi(site, os.environ).get("PATH")
    found = shutil.which(argv[0], path=path)
    if not found:
        pytest.skip(f"{argv[0]} not found on PATH (the launcher of --site={site.name})")
    prefix = runtimes.own_prefix(site)
    if prefix and not site.mpi.modules and not found.startswith(prefix + "/"):
        pytest.skip(f"site {site.name}'s host MPI is not installed: {prefix}/bin/{argv[0]} is missing "
                    f"(docs/bind.md: {host_mpi_install(site)})")
    if argv[0] in ("mpirun", "mpiexec") and site.mpi.flavour == "openmpi":
        argv[1:1] = ["--oversubscribe", "--bind-to", "none"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return argv


def run_mpi(argv: list[str], env: dict[str, str], timeout: float = 300) -> dict:
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode == 77:
        pytest.skip(f"mpi workload cannot run here: {r.stderr.strip().splitlines()[-1:]}")
    assert r.returncode == 0 and lines, f"{' '.join(argv[:8])} ...: exit {r.returncode}\n{r.stderr[-1500:]}"
    return json.loads(lines[-1])


def host_mpi_install(site) -> str:
    """The command that installs a site's host MPI where a wheel carries it (local-bind: MPICH from PyPI)."""
    return (f"pip install --no-deps --prefix {runtimes.own_prefix(site)} {site.mpi.flavour}=={site.mpi.version}"
            if site.mpi.flavour == "mpich" else f"install {site.mpi.flavour} {site.mpi.version} there")


def library_problem(site, mode: str, cont: dict) -> str | None:
    """Why the MPI library the container's ranks loaded is not the one `mode` means, or None: in bind mode the
    host's (under its own prefix, as the bind shows it in the container), in hybrid mode the image's own. Says
    nothing where the host MPI shares a system prefix with the image's (/usr: the paths cannot tell)."""
    prefix = runtimes.own_prefix(site)
    if not prefix:
        return None
    prefix = os.path.realpath(prefix) if os.path.isdir(prefix) else prefix    # what /proc/self/maps shows
    inside = runtimes.container_path(site, prefix)
    paths = cont.get("mpi_library_paths")
    if paths is None:
        return "the container's ranks did not say which MPI library they loaded (a workloads package older than the suite's)"
    host = [p for p in paths if inside and (p + "/").startswith(inside + "/")]
    image = [p for p in paths if p not in host]
    version = (cont.get("library_version") or "?").splitlines()[0]
    if mode == "bind" and (image or not host):
        return (f"bind mode, but the container's ranks loaded {', '.join(image) or 'no MPI library'} ({version})"
                + (" beside" if host else ", not") + f" the host MPI's from {prefix}"
                + (f" (bound at {inside})" if inside and inside != prefix else "")
                + ": the injection did not take (bind, LD_LIBRARY_PATH)")
    if mode == "hybrid" and not paths:
        return f"hybrid mode, but the container's ranks report no MPI library ({version}): the image's own was not found"
    if mode == "hybrid" and host:
        return (f"hybrid mode, but the container's ranks loaded the host MPI's {', '.join(host)} ({version}), not "
                "the image's own")
    return None


def transport_problem(bare: dict, cont: dict, site=None, mode: str = "hybrid") -> str | None:
    """Why the container's MPI is not the intended one, or None (`site`, `mode`: also which library it loaded,
    `library_problem`)."""
    problem = library_problem(site, mode, cont) if site is not None else None
    if problem:
        return problem
    if cont.get("transport") != bare.get("transport"):
        return (f"container MPI uses {cont.get('transport')}, bare metal uses {bare.get('transport')}: the "
                f"container fell back to a slower path (evidence: {cont.get('evidence')})")
    own = site is not None and bool(unlike(site, mode))
    if cont.get("network") != bare.get("network") and not own:    # own: another MPI build, its own network stack
        return (f"between nodes the container MPI would use {cont.get('network')}, bare metal {bare.get('network')}: "
                f"the container's network path differs (evidence: {cont.get('evidence')})")
    lib_b, lib_c = (bare.get("library_version") or "").split(",")[0], (cont.get("library_version") or "").split(",")[0]
    if lib_b != lib_c and not own:     # hybrid with an image MPI of another version than the host's: by design
        return f"container MPI library is {lib_c!r}, bare metal's is {lib_b!r}"
    return None


class Paired:
    """Bare and container runs of the mpi workload, one pair at a time in random order: set `bare_argv`,
    `cont_argv`, `bare_env` and `cont_env` (here: ranks under the launcher; test_scheduler: job steps)."""

    bare_argv: list[str]
    cont_argv: list[str]
    bare_env: dict[str, str]
    cont_env: dict[str, str]
    site = None                 # with mode: which library the container's ranks must load (library_problem)
    mode: str = "hybrid"

    def pairs(self, runs: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
        rng, bare, cont = random.Random(seed), [], []
        for _ in range(runs):
            order = [(bare, self.bare_argv, self.bare_env), (cont, self.cont_argv, self.cont_env)]
            rng.shuffle(order)
            for out, argv, env in order:
                out.append(run_mpi(argv, env))
        return bare, cont


class Sides(Paired):
    def __init__(self, suite, site, images, python, runtime, inject: dict | None = None, mode: str | None = None,
                 env: dict | None = None, args: tuple[str, ...] = ARGS):
        """`inject`: variables for the launcher's environment (ch-run passes them in); `env`: variables set
        in the container by the runtime (every runtime)."""
        need_runtime(suite, runtime)
        self.site = site
        image = images.for_runtime("pytorch", runtime)
        opts = runtimes.Options(**{**run_options(suite, runtime, mpi=True, env=env).__dict__,
                                   "ranks_per_node": RANKS, **({"mode": mode} if mode else {})})
        self.mode = opts.mode
        if runtime in ("podman", "docker"):
            # ranks in separate OCI containers meet through the host's /tmp (Open MPI's session directory)
            opts = runtimes.Options(**{**opts.__dict__, "binds": ("/tmp:/tmp",)})
        inner = harness.container_run(site, runtime, image, ("python3", "-m", "workloads.mpi", *args), opts,
                                      {**site.container.env, **(inject or {})})
        env_names = sorted({*site.container.env, *(inject or {})})
        self.bare_argv = launcher_argv(site, env_names) + [python, "-m", "workloads.mpi", *args]
        self.cont_argv = launcher_argv(site, env_names, runtime) + list(inner.argv)
        self.bare_env = runtimes.with_host_mpi(site, harness.bare_env(site, opts.mode))
        self.cont_env = runtimes.with_host_mpi(site, inner.env)
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
        if transport_problem(bare[0], cont[0], sides.site, sides.mode):
            return bare, cont, decided
        out_of_time = (time.monotonic() - start) * (n + design.step) / n > budget_s
        final = out_of_time or n >= design.max_pairs
        if not (design.is_look(n) or final):
            continue
        fit = load(bare, cont)
        for key, sizes, metric, is_time in METRICS:
            if metric not in decided or decided[metric].outcome == "continue":
                v = sequential.look(f"{metric} ({runtime})", as_pairs(bare, cont, key, sizes, time=is_time),
                                    tols[metric], design, final=final)
                decided[metric] = fitness.judge(v, fit, tols[metric], polling=True)
        if all(v.outcome != "continue" for v in decided.values()):
            return bare, cont, decided


def load(bare: list[dict], cont: list[dict]) -> fitness.Load:
    """What the machine took from the ranks' measuring threads (each launch's ranks summed: `waited_s`,
    `ran_s`), per side over the launches so far: an MPI comparison needs both CPUs, and a neighbour on one of
    them makes its rank wait (docs/measuring.md)."""
    def side(records):
        return fitness.share([r.get("waited_s") for r in records], [r.get("ran_s") for r in records])
    return fitness.Load(side(bare), side(cont))


def unlike(site, mode: str) -> str:
    """Why a bare-vs-container timing at `site` in `mode` is no measure of the container's cost ("" when it is):
    in hybrid mode an image MPI of another version than the host's (local-bind) runs another MPI build than the
    bare ranks. Its library and transport are still checked; its ratio is recorded, not judged."""
    image = site.software.mpi_version
    if mode != "hybrid" or image is None or image == site.mpi.version:
        return ""
    return (f"not like for like: the image's {site.mpi.flavour} {image} against the host's {site.mpi.version} on bare "
            "metal compares two MPI builds, not the container's cost (bind mode, the host's MPI in the image, does)")


def measure_and_judge(benchmark, suite, site, sides: Paired, runtime: str, mode: str, verdicts: list, label: str = "") -> None:
    """Measure (`measure`), check the library and transport, record the results and assert the verdicts (an
    `unlike` comparison: a fixed first look, recorded as info)."""
    label = label or runtime
    tols = {metric: tolerance(suite, metric) for _, _, metric, _ in METRICS}
    why = unlike(site, mode)
    rounds = suite.rounds or (UNLIKE_PAIRS if why else None)
    bare, cont, decided = benchmark.pedantic(measure, args=(sides, tols, label, rounds), rounds=1, iterations=1)
    problem = transport_problem(bare[0], cont[0], site, mode)
    assert problem is None, f"mpi ({label}): {problem}"
    results = []
    for key, sizes, metric, is_time in METRICS:
        v, tol = decided[metric], tols[metric]
        pairs = as_pairs(bare, cont, key, sizes, time=is_time)
        if why:
            v = dataclasses.replace(v, outcome="info", message=f"{v.message.split(' (95% CI')[0]}: {why}")
            verdicts.append(Note(v.message))
        else:
            verdicts.append(v)
        results.append(result.of(v.estimate, v, site=site.name, workload="mpi", runtime=runtime, mode=mode,
                                 metric=metric, tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                 bare=tuple(p.bare.speed() for p in pairs),
                                 container=tuple(p.container.speed() for p in pairs),
                                 extra={"transport": cont[0].get("transport"), "look": v.look,
                                        "library": cont[0].get("library_version"), "label": label,
                                        "library_paths": cont[0].get("mpi_library_paths"),
                                        "bare_library_paths": bare[0].get("mpi_library_paths"),
                                        "pmi": cont[0].get("pmi"),
                                        "network": cont[0].get("network"),
                                        # the launches its verdict rests on: the figures its fitness was judged on
                                        "load": load(bare[:v.pairs], cont[:v.pairs]).as_dict()}))
    result.record(benchmark, results)
    if why:                 # recorded, not judged: neither a fail nor unfit
        return
    failed = [v.message for v in decided.values() if v.outcome not in ("pass", "unfit")]
    assert not failed, "; ".join(failed)
    settle(*decided.values())


# "Generic": the image's own MPI kept off shared memory and its fabric, TCP only (Debian's MPICH: ch4 over UCX).
GENERIC_TCP = {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp"}
# Rounds of the three-way comparison: each is three launches (bare, tuned, generic) in random order.
THREE_WAY_ROUNDS = 8
GENERIC_TIMEOUT = 90         # one generic launch takes 2-4 s here
THREE_WAY_ARGS = ("--sizes", SIZES, "--iters", "100", "--warmup", "20")   # all three sides alike: TCP is slow


def three_way(bare_side: Paired, tuned: Paired, generic: Paired, rounds: int = THREE_WAY_ROUNDS, seed: int = 0):
    """Bare metal, the image tuned for the site (the host's MPI bound in) and the generic image (its own MPI over
    TCP only), one launch of each per round in random order, side by side in one run. Returns the three lists."""
    rng, out = random.Random(seed), ([], [], [])
    runs = [(out[0], bare_side.bare_argv, bare_side.bare_env), (out[1], tuned.cont_argv, tuned.cont_env),
            (out[2], generic.cont_argv, generic.cont_env)]
    hung = 0
    for _ in range(rounds):
        order = list(runs)
        rng.shuffle(order)
        for records, argv, env in order:
            if records is not out[2]:
                records.append(run_mpi(argv, env))
                continue
            try:        # UCX over TCP, kept off shared memory, hung once in about 40 launches here: one more try
                records.append(run_mpi(argv, env, timeout=GENERIC_TIMEOUT))
            except subprocess.TimeoutExpired:
                hung += 1
                assert hung <= 1, f"the generic side hung twice (UCX over TCP): {' '.join(argv[:8])} ..."
                records.append(run_mpi(argv, env, timeout=GENERIC_TIMEOUT))
    out[2][0]["generic_hung"] = hung
    return out


def judge_three_way(benchmark, suite, site, runtime: str, records, verdicts: list) -> dict:
    """The verdicts of the three-way comparison (MODAK's question: is the image tuned for the site faster than a
    generic one?): tuned vs bare against the site's tolerances; generic vs bare and generic vs tuned as measured
    ratios (verdict "info": the generic side runs another MPI build, `unlike`). Recorded for `gen-recipe report`;
    returns {(compared, metric): Verdict}."""
    bare, tuned, generic = records
    rounds = len(bare)
    design = sequential.Design(first=rounds, step=rounds, max_pairs=rounds)
    sides = {"tuned": (tuned, bare, ("tuned", "bare metal"), "bind, tuned: the host MPI"),
             "generic": (generic, bare, ("generic", "bare metal"), "hybrid, generic: its own MPI over TCP only"),
             "generic-vs-tuned": (generic, tuned, ("generic", "tuned"), "generic vs tuned")}
    results, decided = [], {}
    for compared, (cont, base, names, mode) in sides.items():
        for key, sizes, metric, is_time in METRICS:
            tol = tolerance(suite, metric)
            pairs = as_pairs(base, cont, key, sizes, time=is_time)
            v = sequential.look(f"{metric} ({runtime}, {compared})", pairs, tol, design, final=True, sides=names)
            decided[(compared, metric)] = v
            if compared == "tuned":
                verdicts.append(v)
            elif compared == "generic-vs-tuned":       # the value of tuning, in the summary beside the verdicts
                verdicts.append(Note(v.message.split(", allowed")[0] + ")"))
            outcome = v.outcome if compared == "tuned" else "info"       # generic: another MPI build (`unlike`)
            results.append(result.Result(
                site=site.name, workload="mpi", runtime=runtime, metric=metric, mode=mode, ratio=v.estimate.ratio,
                low=v.estimate.low, high=v.estimate.high, pairs=v.estimate.pairs, verdict=outcome,
                message=v.message, tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                bare=tuple(p.bare.speed() for p in pairs), container=tuple(p.container.speed() for p in pairs),
                extra={"three_way": compared, "transport": cont[0].get("transport"),
                       "library": (cont[0].get("library_version") or "").splitlines()[:1],
                       "library_paths": cont[0].get("mpi_library_paths"), "pmi": cont[0].get("pmi"),
                       "generic_hung": generic[0].get("generic_hung", 0)}))
    result.record(benchmark, results)
    return decided
