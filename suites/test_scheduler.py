"""The suite through the scheduler (--launch=scheduler): the launch scripts as jobs, comparisons as job steps.

What runs is what `gen-recipe launch` prints, bare twin and container script alike:

- every runtime × mode script and its bare twin is submitted with `sbatch` (and waited for) on 1 and 2 nodes,
  and the JSON line of its workload is read from the job's output;
- the comparisons run inside one allocation of 2 nodes (`salloc --no-shell`, or the allocation pytest
  runs in): each side's script is started with `bash` and its `srun` makes a job step there, bare and
  container steps in pairs in random order. Fresh steps are the replicates (each starts new processes
  on the nodes), judged by the same sequential design as on one node: ddp training on 1 and 2 nodes
  (throughput ratio and scaling efficiency), MPI between the nodes (latency, bandwidth, and the
  transport between nodes), and the A/A and power controls.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from generator.run import launch, slurmjob
from generator.errors import UsageError
from generator.files import write_atomic
from generator.model.app import AppWorkload as Workload
from generator.recipe import payload
from generator.suite import result
from generator.suite import harness
from generator.suite.plugin import SUITE, Note, mode_of, need_runtime, runtimes_under_test, settle, size, tolerance
from generator.suite.mpi import (ARGS as MPI_ARGS, Paired, library_problem, measure_and_judge, run_mpi,
                                 transport_problem)
from workloads.registry import DDP

pytestmark = pytest.mark.whole_machine      # jobs and job steps on both nodes: not beside another measurement

JOBS = Path("build") / "suite-jobs"       # scripts and job output: on a file system the nodes see
NODES = (1, 2)
STEP_TIMEOUT = 600
# A fresh step runs this many times the fork-server size's steps (a ddp step also starts the ranks and
# the process group, which the metric leaves out).
STEPS_PER_RUN = 2
# Slower than bare: Open MPI's pml cm over libfabric's sockets provider instead of its TCP transport
# (the container's libfabric not finding the fabric, as a container MPI without the site's provider does).
SLOWER_TRANSPORT = {"OMPI_MCA_pml": "cm", "OMPI_MCA_mtl": "ofi", "FI_PROVIDER": "sockets",
                    "OMPI_MCA_mtl_ofi_provider_exclude": "shm"}


COMPILED_DDP = ("mnist", "cnn")         # the compiled ddp comparison takes the first of these the run has


def ddp_workloads(options) -> list[str]:
    return [w for w in options.workloads if w in DDP]


def pytest_generate_tests(metafunc):
    options = metafunc.config.stash[SUITE]
    modes = {r: [m for m in options.site.runtime(r).mpi_modes if options.mode in (None, m)]
             for r in runtimes_under_test(options)}
    sides = ["bare", *(f"{r}:{m}" for r, ms in modes.items() for m in ms)]
    if "script_case" in metafunc.fixturenames:
        cases = [(w, s, n) for w in (*ddp_workloads(options)[:1], *(["mpi"] if "mpi" in options.workloads else []))
                 for s in sides for n in NODES]
        metafunc.parametrize("script_case", cases, ids=[f"{w}-{s.replace(':', '-')}-{n}node" for w, s, n in cases])
    if "ddp_case" in metafunc.fixturenames:
        cases = [(w, r) for w in ddp_workloads(options) for r in runtimes_under_test(options)]
        metafunc.parametrize("ddp_case", cases, ids=[f"{w}-{r}" for w, r in cases])
    if "compiled_ddp" in metafunc.fixturenames:      # one workload, one runtime: a cold compile per side is long
        found = [w for w in COMPILED_DDP if w in ddp_workloads(options)][:1]
        cases = [(w, r) for w in found for r in runtimes_under_test(options)[:1]]
        metafunc.parametrize("compiled_ddp", cases, ids=[f"{w}-compiled-{r}" for w, r in cases])
    if "mpi_runtime" in metafunc.fixturenames:
        metafunc.parametrize("mpi_runtime", list(runtimes_under_test(options)) if "mpi" in options.workloads else [])


# -- the scheduler, the allocation, the scripts ---------------------------------------------------------------

@pytest.fixture(scope="session")
def slurm(suite, on_site) -> dict[str, str]:
    """The environment for sbatch/srun; skips where the site's scheduler is not Slurm or does not answer."""
    site = suite.site
    if site.host.scheduler != "slurm":
        pytest.skip(f"site {site.name} uses {site.host.scheduler}: the suite submits through Slurm only, so its "
                    f"{site.host.scheduler} scripts are checked statically (test_static.py), not run")
    env = dict(os.environ)
    why = slurmjob.reachable(env)
    if why:
        hint = ("start the test cluster: gen-recipe minicluster up, then export SLURM_CONF=...; docs/minicluster.md"
                if site.name == "local-slurm" else f"run the suite on a login node of {site.name}")
        pytest.skip(f"no Slurm controller answers here ({why}): {hint}")
    return env


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: int
    env: dict[str, str]        # SLURM_JOB_ID set: an srun started with it makes a step in this allocation


@pytest.fixture(scope="module")
def allocation(suite, slurm):
    """The allocation the comparisons run in: pytest's own (SLURM_JOB_ID set), else 2 nodes from salloc,
    released when this module ends (after the sbatch tests, which need the nodes free)."""
    if "SLURM_JOB_ID" in slurm:
        yield Allocation(slurm["SLURM_JOB_ID"], int(slurm.get("SLURM_JOB_NUM_NODES") or slurm.get("SLURM_NNODES") or 1),
                         slurm)
        return
    time_limit = slurmjob.given(suite.sbatch_args, "time") or "01:00:00"
    given = [o for o in suite.sbatch_args if not o.startswith("--time=")]
    site, named = suite.site, {o.split("=", 1)[0] for o in given}
    try:                                             # the site's policy for what --sbatch-arg does not say
        rules = launch.policy(site, nodes=max(NODES), gpus=site.gpu.count_per_node, tasks=max(site.gpu.count_per_node, 1),
                              time=time_limit if ":" in time_limit else "01:00:00",
                              account=slurmjob.given(given, "account") or "", partition=slurmjob.given(given, "partition") or "",
                              qos=slurmjob.given(given, "qos") or "")
    except UsageError as exc:
        pytest.fail(f"the suite's allocation: {exc}", pytrace=False)
    extra = (*given, *(o for o in rules.slurm_options() if o.split("=", 1)[0] not in named))
    try:
        job_id = slurmjob.allocate(max(NODES), time_limit, env=slurm, extra=extra)
    except slurmjob.JobFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield Allocation(job_id, max(NODES), {**slurm, "SLURM_JOB_ID": job_id, "SLURM_JOBID": job_id})
    finally:
        slurmjob.cancel(job_id, slurm)


def script(site, path: Path, job: launch.Job) -> Path:
    """`gen-recipe launch` for `job`, written to `path` (what a user submits)."""

    path = path.absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, launch.script(site, job), mode=0o755)
    return path


class Scripts:
    """The launch scripts of one workload: the bare twin and each runtime's, for a number of nodes."""

    def __init__(self, suite, images, bare_python, folder: Path) -> None:
        self.suite, self.images, self.bare_python, self.folder = suite, images, bare_python, folder

    def job(self, workload: str, side: str, nodes: int, args: tuple[str, ...] = ()) -> launch.Job:
        suite = self.suite
        common = dict(workload=workload, nodes=nodes, tasks_per_node=1 if workload == "mpi" else None, workload_args=args,
                      account=slurmjob.given(suite.sbatch_args, "account") or "",
                      partition=slurmjob.given(suite.sbatch_args, "partition") or "",
                      qos=slurmjob.given(suite.sbatch_args, "qos") or "", allow_root=os.geteuid() == 0)
        if side == "bare":
            return launch.Job(bare=True, workloads_dir=str(payload.pythonpath()), **common)
        runtime, _, mode = side.partition(":")           # "charliecloud" or "charliecloud:hybrid"
        need_runtime(suite, runtime)
        image = self.images.for_runtime("pytorch", runtime)
        image = str(Path(image).absolute()) if Path(image).exists() else image      # the nodes' cwd may differ
        return launch.Job(runtime=runtime, mode=mode or mode_of(suite, runtime), image=image, **common)

    def path(self, workload: str, side: str, nodes: int, args: tuple[str, ...] = (), tag: str = "") -> Path:
        name = f"{workload}-{side.replace(':', '-')}-{nodes}node{tag}.sh"
        return script(self.suite.site, self.folder / name, self.job(workload, side, nodes, args))

    def env(self, side: str, base: dict[str, str], extra: dict[str, str] | None = None) -> dict[str, str]:
        """A side's environment: the bare twin's python3 first on PATH for bare scripts."""
        env = {**base, **(extra or {})}
        if side == "bare":
            env["PATH"] = f"{Path(self.bare_python('pytorch')).parent}:{env.get('PATH', '/usr/bin:/bin')}"
        return env


@pytest.fixture(scope="module")
def scripts(suite, images, bare_python) -> Scripts:
    return Scripts(suite, images, bare_python, (JOBS / suite.site.name).absolute())


def step_args(site, workload: str) -> tuple[str, ...]:
    """A ddp workload's arguments for one measured step: the suite's size, STEPS_PER_RUN times its work."""
    w = size(site, workload)
    return (*w.args, "--steps", str(w.chunks * w.steps * STEPS_PER_RUN))


# -- 1. every script through sbatch ----------------------------------------------------------------------------

def test_script_through_sbatch(suite, site, slurm, scripts, script_case):
    """The script `gen-recipe launch` prints, submitted as it is: completed, every rank in the world."""
    workload, side, nodes = script_case
    if "SLURM_JOB_ID" in slurm:
        pytest.skip("inside an allocation: sbatch would wait for nodes this job holds; the scripts run as job "
                    "steps in the comparisons")
    args = ("--sizes", "8,1M", "--iters", "50") if workload == "mpi" else step_args(site, workload)
    path = scripts.path(workload, side, nodes, args)
    try:
        done = slurmjob.submit(path, env=scripts.env(side, slurm), timeout=STEP_TIMEOUT,
                               extra=list(suite.sbatch_args))
    except slurmjob.JobFailed as exc:
        pytest.fail(f"{path.name}: {exc}", pytrace=False)
    records = [r for r in slurmjob.json_lines(done.output) if r.get("workload") == workload]
    assert records, f"{path.name}: job {done.job_id} printed no {workload} record: {slurmjob.tail(done.output)}"
    record = records[-1]
    ranks = nodes * (1 if workload == "mpi" else max(site.gpu.count_per_node, 1))      # one per GPU, else one
    assert record["world_size"] == ranks, f"{path.name}: world size {record['world_size']}, not {ranks}"
    if workload == "mpi":
        assert len(record["evidence"]["per_rank"]) == ranks
        assert nodes == 1 or record["transport"] == record["network"], record["transport"]    # between the nodes
        assert len({r.get("node") for r in record["evidence"]["per_rank"]}) == nodes, record["evidence"]["per_rank"]
        if side != "bare":      # every rank, on every node, loaded the MPI the mode means (bind: the host's)
            mode = side.partition(":")[2] or mode_of(suite, side)
            assert library_problem(site, mode, record) is None, f"{path.name}: {library_problem(site, mode, record)}"
    else:
        assert record["value"] > 0
        assert nodes == 1 or (record["mode"], record["backend"]) == ("ddp", "gloo" if site.gpu.stack == "none" else "nccl")


# -- 2. ddp on 1 and 2 nodes -----------------------------------------------------------------------------------

def steps_run(scripts: Scripts, allocation: Allocation, workload: str, side: str, nodes: int,
              label: str | None = None, wrapper: tuple[str, ...] = (), tag: str = "", extra_args: tuple[str, ...] = (),
              env: dict[str, str] | None = None) -> harness.Run:
    """One side of a comparison: its launch script, started with bash inside the allocation."""
    path = scripts.path(workload, side, nodes, (*step_args(scripts.suite.site, workload), *extra_args), tag)
    if wrapper:     # the power control: the ranks run under the throttle (the srun line's command)
        text = path.read_text()
        assert text.count(" python3 -m workloads.") == 1, f"not one workload command in {path}"
        path.write_text(text.replace(" python3 -m workloads.", f" {shlex.join(wrapper)} python3 -m workloads."))
    return harness.Run(label or side, ("bash", str(path)), scripts.env(side, allocation.env, env), None)


def metric_of(workload: str):
    return Workload(command=("python3", "-m", f"workloads.{workload}"), json_key="value", regex="",
                    unit="samples/s", better="higher", timeout=STEP_TIMEOUT)


def compare_steps(benchmark, suite, a: harness.Run, b: harness.Run, workload: str, label: str, tol,
                  sides=("container", "bare metal")):
    return harness.decide_with(benchmark, lambda pairs, until: harness.compare_runs(a, b, metric_of(workload), pairs,
                               until=until), label, tol, rounds=suite.rounds, sides=sides)


def test_ddp_across_nodes(benchmark, suite, site, scripts, allocation, verdicts, ddp_case):
    """ddp training bare vs container on 1 node and on 2 nodes: each a verdict; and the scaling efficiency
    (2-node speed / 2 × 1-node speed) of both sides."""
    workload, runtime = ddp_case
    if allocation.nodes < max(NODES):
        pytest.skip(f"the allocation has {allocation.nodes} node(s); the comparison needs {max(NODES)}")
    tol = tolerance(suite, workload)
    out, found = {}, []
    for nodes in NODES:
        bare = steps_run(scripts, allocation, workload, "bare", nodes)
        cont = steps_run(scripts, allocation, workload, runtime, nodes)
        if nodes > 1:       # the collectives between the nodes: on the bare run's network, or no verdict
            said = {r.label: (harness.records_of(r, workload, STEP_TIMEOUT) or [{}])[-1].get("collectives")
                    for r in (bare, cont)}
            problem = harness.collectives_problem(said[bare.label], said[cont.label])
            if problem:
                pytest.fail(f"{workload} ddp {nodes} nodes ({runtime}): {problem}", pytrace=False)
        comp, v = compare_steps(benchmark if nodes == max(NODES) else None, suite, bare, cont, workload,
                                f"{workload} ddp {nodes} node{'s' if nodes > 1 else ''} ({runtime})", tol)
        verdicts.append(v)
        found.append(v)
        out[nodes] = comp
    speeds = {n: ([p.bare.speed() for p in c.pairs], [p.container.speed() for p in c.pairs]) for n, c in out.items()}
    mean = lambda xs: sum(xs) / len(xs)       # noqa: E731
    eff = {side: mean(speeds[2][i]) / (2 * mean(speeds[1][i])) for i, side in enumerate(("bare", "container"))}
    verdicts.append(Note(f"{workload} ddp scaling efficiency 1 -> 2 nodes ({runtime}; 2-node speed / 2 x 1-node "
                         f"speed, mean of the pairs): bare {eff['bare']:.2f}, container {eff['container']:.2f}"))
    result.record(benchmark, [result.of(
        v.estimate, v, site=site.name, workload=workload, runtime=runtime, mode=mode_of(suite, runtime),
        metric=f"throughput-{n}node", tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
        bare=tuple(speeds[n][0]), container=tuple(speeds[n][1]),
        extra={"nodes": n, "look": v.look, "scaling_efficiency": eff, "job_id": allocation.job_id})
        for n, v in zip(NODES, found)])
    failed = [v.message for v in found if v.outcome not in ("pass", "unfit")]
    assert not failed, "; ".join(failed)
    settle(*found)


def test_compiled_ddp_across_nodes(benchmark, suite, site, scripts, allocation, verdicts, compiled_ddp, tmp_path_factory):
    """ddp training with `--compile` on 2 nodes, bare vs container, as job steps of the launch scripts: each side
    with a kernel cache of its own (GEN_RECIPE_KERNEL_CACHE, which the scripts take when it is set), so that
    the first step of each compiles into an empty cache and the later ones find their own kernels."""
    workload, runtime = compiled_ddp
    if allocation.nodes < max(NODES):
        pytest.skip(f"the allocation has {allocation.nodes} node(s); the comparison needs {max(NODES)}")
    tol = tolerance(suite, workload)
    roots = {side: tmp_path_factory.mktemp(f"kernels-ddp-{side}") for side in ("bare", runtime)}
    runs = [steps_run(scripts, allocation, workload, side, max(NODES), extra_args=("--compile",), tag="-compiled",
                      env={launch.CACHE_ROOT: str(roots[side])}) for side in ("bare", runtime)]
    comp, v = compare_steps(benchmark, suite, *runs, workload, f"{workload} ddp compiled {max(NODES)} nodes ({runtime})", tol)
    verdicts.append(v)
    for side, root in roots.items():
        assert any(root.rglob("*.py")), f"the {side} side compiled nothing into {root}"
    records = {r.label: (harness.records_of(r, workload, STEP_TIMEOUT) or [{}])[-1] for r in runs}
    assert all(rec.get("compiled") for rec in records.values()), records
    result.record(benchmark, [result.of_pairs(
        v, comp.pairs, site=site.name, workload=workload, runtime=runtime, mode=mode_of(suite, runtime),
        metric=f"throughput-compiled-{max(NODES)}node", tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
        extra={"nodes": max(NODES), "look": v.look, "compiled": True, "job_id": allocation.job_id})])
    settle(v)
    assert v.outcome == "pass", v.message


# -- 3. MPI between nodes --------------------------------------------------------------------------------------

class Steps(Paired):
    """The mpi workload's bare and container scripts on 2 nodes, one rank each, as steps of the allocation."""

    def __init__(self, scripts: Scripts, allocation: Allocation, runtime: str, inject: dict | None = None,
                 args: tuple[str, ...] = MPI_ARGS) -> None:
        tag = "-injected" if inject else ""
        bare = scripts.path("mpi", "bare", 2, args)
        cont = scripts.path("mpi", runtime, 2, args, tag)
        self.bare_argv, self.cont_argv = ["bash", str(bare)], ["bash", str(cont)]
        self.bare_env = scripts.env("bare", allocation.env)
        self.cont_env = scripts.env(runtime, allocation.env, inject)
        self.site, self.mode = scripts.suite.site, mode_of(scripts.suite, runtime)


def test_mpi_across_nodes(benchmark, suite, site, scripts, allocation, verdicts, mpi_runtime):
    """Ping-pong and bandwidth between two nodes, bare vs container; the transport between the nodes must match."""
    if allocation.nodes < 2:
        pytest.skip(f"the allocation has {allocation.nodes} node; MPI between nodes needs 2")
    measure_and_judge(benchmark, suite, site, Steps(scripts, allocation, mpi_runtime), mpi_runtime,
                      mode_of(suite, mpi_runtime), verdicts, label=f"{mpi_runtime}, 2 nodes")


def test_slower_transport_between_nodes_is_caught(suite, site, scripts, allocation):
    """A container whose MPI goes between the nodes over libfabric's sockets provider instead of the bare
    ranks' transport fails the transport check (and is far slower)."""
    if site.mpi.flavour != "openmpi":
        pytest.skip(f"the injection uses Open MPI's MCA variables; site {site.name} runs {site.mpi.flavour}")
    if allocation.nodes < 2:
        pytest.skip(f"the allocation has {allocation.nodes} node; MPI between nodes needs 2")
    runtime = site.container.runtime
    args = ("--sizes", "8,1M", "--iters", "50", "--warmup", "5")
    clean = Steps(scripts, allocation, runtime, args=args)
    forced = Steps(scripts, allocation, runtime, inject=SLOWER_TRANSPORT, args=args)
    bare = run_mpi(clean.bare_argv, clean.bare_env)
    assert bare["network"] and bare["world_size"] == 2
    assert transport_problem(bare, run_mpi(clean.cont_argv, clean.cont_env)) is None
    slow = run_mpi(forced.cont_argv, forced.cont_env)
    problem = transport_problem(bare, slow)
    assert problem is not None and "ofi:sockets" in problem, problem
    assert slow["latency_us"]["8"] > bare["latency_us"]["8"], (slow["latency_us"], bare["latency_us"])


# -- 4. the controls, as job steps --------------------------------------------------------------------------

def control_workload(options) -> str:
    found = ddp_workloads(options)
    if not found:
        pytest.skip("the scheduler controls run a ddp workload: add one to --workloads (e.g. mnist)")
    return found[-1]


def test_aa_control_through_scheduler(benchmark, suite, site, scripts, allocation, verdicts):
    """A/A: the bare script against itself, as steps on 2 nodes, passes."""
    workload = control_workload(suite)
    tol = tolerance(suite, workload)
    a = steps_run(scripts, allocation, workload, "bare", 2, "bare A")
    b = steps_run(scripts, allocation, workload, "bare", 2, "bare B", tag="-b")
    _, v = compare_steps(benchmark, suite, a, b, workload, f"A/A bare-bare steps ({workload}, 2 nodes)", tol,
                         sides=("bare B", "bare A"))
    verdicts.append(v)
    result.record(benchmark, [result.of(v.estimate, v, site=site.name, workload=workload, runtime="bare-bare-steps",
                                        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                        extra={"half_width": v.estimate.half_width, "look": v.look})])
    settle(v)
    assert v.outcome == "pass", v.message


def test_injected_slowdown_through_scheduler_fails(benchmark, suite, site, scripts, allocation, verdicts):
    """Power: twice the allowed slowdown, injected into every rank of one side's steps, is caught."""
    workload = control_workload(suite)
    tol = tolerance(suite, workload)
    slowdown = min(0.9, -2 * tol.lower)
    a = steps_run(scripts, allocation, workload, "bare", 2)
    b = steps_run(scripts, allocation, workload, "bare", 2, "throttled", wrapper=harness.throttle_argv(slowdown),
                  tag="-throttled")
    _, v = compare_steps(benchmark, suite, a, b, workload, f"power test, steps ({slowdown:.0%} injected)", tol)
    verdicts.append(v)
    result.record(benchmark, [result.of(v.estimate, v, site=site.name, workload=workload, runtime="power-steps",
                                        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                        extra={"injected": slowdown, "look": v.look})])
    settle(v)
    assert v.outcome == "fail", f"an injected {slowdown:.0%} slowdown was not caught: {v.message}"

