"""Rehearse a site's batch scripts on this machine, before anyone spends allocation hours on the site.

On the site's shape of the test cluster (`gen-recipe minicluster up --shape SITE`: its partitions, limits,
GPUs, constraint, QOS and accounts under real accounting, its modules under Lmod), every script
`gen-recipe launch` prints for the site (each runtime × MPI mode, and the bare twin; 1 and 2 nodes; the
`mpi` workload) is submitted as printed and must be accepted, started and completed:

- for real where this machine has what the script needs: a runtime with a local image form (registry: Platform.local_image) with
  the `local` pytorch image standing in for the site's, and an MPI of the site's family (Open MPI: the
  host's, launched by mpirun or by srun over PMIx); the workload's record must count every rank;
- else with a stub standing in for what is missing (`generator.dev.stub`: the runtime, the container
  engine's srun option, Intel MPI's mpiexec, the bare twin's python3 of another MPI), which checks its command
  line against the program's documented options; each case says why it was not run for real.

Negative cases: the same script without its account, its constraint or its partition, each refused by the
scheduler (Slurm's own message, or the site's documented one). `cases`, `negatives` and `stubs` are pure;
`run` submits and waits.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.files import write_atomic
from generator.model import runtimes as registry
from generator.model.site import Site
from generator.recipe import payload
from generator.run import launch, slurmjob

NODES = (1, 2)
ARGS = ("--sizes", "8", "--iters", "5", "--warmup", "1")       # the mpi workload, as short as it goes
HERE_MPI = "openmpi"                                            # the host's MPI and the local image's


@dataclass(frozen=True)
class Case:
    name: str                        # e.g. "apptainer-bind-2node", "bare-1node"
    job: launch.Job
    real: bool                       # run for real here (else stubs stand in)
    why: str = ""                    # what stands in, and why (empty when real)
    stubbed: tuple[str, ...] = ()    # the programs stubs stand in for
    records: int = 1                 # records the output must hold: every rank's (srun starts each), else one


def runnable_mpi(site: Site) -> str:
    """Why the site's MPI cannot be stood in for here ("" when the host's Open MPI can: the same family,
    started by mpirun, or by srun over PMIx)."""
    if site.mpi.flavour not in (HERE_MPI, "none"):
        return f"site {site.name}'s MPI is {site.mpi.flavour}, this machine's is Open MPI"
    if site.host.launcher == "srun" and site.mpi.pmi not in ("pmix", "none"):
        return f"site {site.name} starts ranks with srun --mpi={site.mpi.pmi}; this machine's Open MPI takes PMIx"
    return ""


def host_mpi4py() -> str:
    """Why the jobs' python3 (this interpreter: the rehearsal puts its folder first on PATH) cannot run the bare
    twin's mpi workload ("" when it can import mpi4py)."""
    import importlib.util
    if importlib.util.find_spec("mpi4py") is None:
        return (f"{sys.executable} cannot import mpi4py (a virtual environment made with --system-site-packages "
                "sees Debian's python3-mpi4py)")
    return ""


def stubs(site: Site) -> dict[str, tuple[str, str]]:
    """The programs a stub stands in for at `site` (name on PATH -> (stub tool, version)): each runtime this
    machine lacks, the container engine's srun, and Intel MPI's (or another MPICH family's) mpiexec."""
    out: dict[str, tuple[str, str]] = {}
    for rt in site.runtimes:
        platform = registry.PLATFORMS[rt.name]
        if rt.name == "ce":
            out["srun"] = ("ce", str(rt.version))
        elif not platform.local_image:
            out[platform.binary] = (rt.name, str(rt.version))
    if site.host.launcher in launch.MPI_LAUNCHERS and site.mpi.flavour not in (HERE_MPI, "none"):
        out[site.host.launcher] = ("mpiexec", str(site.mpi.version or ""))
    return out


def local_image_for(runtime: str) -> str:
    """The `local` site's pytorch image in `runtime`'s local form (built and converted when missing): what
    stands in for a site's image in a rehearsal's real runs."""
    from generator.images import base, convert, oci
    from generator.model import site as site_mod

    local = site_mod.load("local")
    base.ensure_base_image(local)
    ref = oci.build_image(local, "pytorch").ref
    return str(Path(convert.runtime_image(local, ref, runtime)).absolute()) if registry.PLATFORMS[runtime].local_image \
        == "directory" else convert.runtime_image(local, ref, runtime)


def cases(site: Site, image_for: Callable[[str], str], account: str = "",
          placeholder: Callable[[str], str] = lambda runtime: f"/rehearsal/{runtime}-image") -> list[Case]:
    """Every runtime × mode script and its bare twin of `site` on 1 and 2 nodes, with how each runs here.
    `image_for(runtime)` gives the local image standing in (in the runtime's form) for a case run for real,
    `placeholder(runtime)` the image a stub is told of; `account` is the one the cluster knows (shape.account)."""
    out = []
    tasks = max(site.gpu.count_per_node, 1)              # one rank per GPU, else one: the site's own layout
    per_rank = site.host.launcher == "srun"
    mpi_why = runnable_mpi(site)
    stubbed = stubs(site)
    launcher_stub = [name for name, (tool, _) in stubbed.items() if tool == "mpiexec"]
    for rt in site.runtimes:
        here = bool(registry.PLATFORMS[rt.name].local_image)
        for mode in rt.mpi_modes:
            for nodes in NODES:
                real = here and not mpi_why and mode == "hybrid"
                why = "" if real else "; ".join(w for w in (
                    "" if here else f"{rt.name} {rt.version} is not here: a stub checks its command line",
                    (f"{mpi_why}: a stub stands in for its {launcher_stub[0]}" if launcher_stub else mpi_why) if here
                    else "", "bind mode mounts the site's MPI, which is not here" if here and mode == "bind" else "") if w)
                names = tuple(n for n in stubbed if stubbed[n][0] in (rt.name, "ce", "mpiexec")
                              and (stubbed[n][0] != "ce" or rt.name == "ce"))
                image = image_for(rt.name) if real else placeholder(rt.name)
                # run for real: one rank per node (a container each, as the suite's mpi scripts), else the site's layout
                per_node = 1 if real else tasks
                job = launch.Job(workload="mpi", nodes=nodes, tasks_per_node=per_node, runtime=rt.name, mode=mode,
                                 image=image, workload_args=ARGS, account=account, allow_root=os.geteuid() == 0)
                ranks = nodes * per_node if real or per_rank and "mpiexec" not in names else 1
                out.append(Case(f"{rt.name}-{mode}-{nodes}node", job, real, why, names, ranks))
    bare_why = mpi_why or host_mpi4py()
    for nodes in NODES:
        real = not bare_why
        job = launch.Job(workload="mpi", nodes=nodes, tasks_per_node=tasks, bare=True, workload_args=ARGS,
                         account=account, workloads_dir=str(payload.pythonpath()))
        why = "" if real else f"{bare_why}: a stub stands in for the bare twin's python3" + \
            (" (and mpiexec)" if launcher_stub else "")
        ranks = nodes * tasks if real or per_rank else 1
        out.append(Case(f"bare-{nodes}node", job, real, why, () if real else ("python3", *launcher_stub), ranks))
    return out


@dataclass(frozen=True)
class Negative:
    name: str                        # "no-account", "no-constraint", "no-partition", "time-over-bin"
    drop: str                        # the #SBATCH line removed from the script
    expect: str                      # what the refusal says (a part of sbatch's message)
    put: str = ""                    # the line written in its place ("": none)

    def applied(self, script: str) -> str:
        """`script` with `drop` removed (or replaced by `put`)."""
        return "\n".join(self.put if ln == self.drop else ln for ln in script.splitlines()
                         if ln != self.drop or self.put) + "\n"


def negatives(site: Site, script: str, shape_default: str | None) -> list[Negative]:
    """The site's rules, one at a time: the same script without its account, constraint or partition (where the
    scheduler would take the script without that line, there is no case), and with a minute more than its size's
    wall-time bin allows (a partition's time_by_nodes). `shape_default` is the cluster's default partition (None:
    there is none)."""
    sched, out = site.scheduler, []
    lines = script.splitlines()

    def line(option: str) -> str | None:
        return next((ln for ln in lines if ln.startswith(f"#SBATCH --{option}=")), None)

    if sched.account == "required" and line("account"):
        out.append(Negative("no-account", line("account"), sched.refusals.get(
            "account", "Job violates accounting/QOS policy")))
    if sched.constraint and line("constraint"):
        from generator.dev.shape import shape_of
        out.append(Negative("no-constraint", line("constraint"), sched.refusals.get(
            "constraint", shape_of(site).constraint_message)))
    part = line("partition")
    if part and part.split("=", 1)[1] != shape_default:
        default = sched.partition(shape_default) if shape_default else None
        expect = sched.refusals.get("partition", "No partition specified or system default partition"
                                    if default is None else "Requested node configuration is not available")
        out.append(Negative("no-partition", part, expect))
    chosen = sched.partition(part.split("=", 1)[1] if part else shape_default or "")
    nodes, time = line("nodes"), line("time")
    if chosen is not None and chosen.time_by_nodes and nodes and time:
        from generator.dev.shape import TIME_REFUSAL
        from generator.model.site import hms, wall_seconds
        most, size = chosen.max_time_for(int(nodes.split("=", 1)[1]))
        if size:
            out.append(Negative("time-over-bin", time, TIME_REFUSAL, put=f"#SBATCH --time={hms(wall_seconds(most) + 60)}"))
    return out


# -- running them ---------------------------------------------------------------------------------------

STUB = '#!/bin/sh\n# gen-recipe rehearsal: stands in for {name} ({tool} {version}); checks its command line\n' \
       'GEN_RECIPE_REHEARSAL_ROOT={root} exec {python} -m generator.dev.stub {tool} {version} "$@"\n'
SRUN = ('#!/bin/sh\n# gen-recipe rehearsal: the container engine\'s srun --environment (a stub runs in the step)\n'
        'for a in "$@"; do case "$a" in --environment=*) GEN_RECIPE_REAL_SRUN={srun} GEN_RECIPE_REHEARSAL_ROOT={root} '
        'exec {python} -m generator.dev.stub ce-srun {version} "$@" ;; esac; done\n'
        'exec {srun} "$@"\n')


def write_stubs(bin_dir: Path, folder: Path, site: Site, site_root: Path | None = None) -> tuple[Path, Path]:
    """The stub programs of `site` in `bin_dir` (the cluster's: the shape's modules put it on PATH, for jobs that
    take no environment along, --export=NONE), and the bare twins' python3 in `folder`/bare-bin; the stubbed
    runtimes look for bind sources on the node and under `site_root` (the cluster's, Layout.site_root)."""
    bare_dir = folder / "bare-bin"
    for d in (bin_dir, bare_dir):
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():
            old.unlink()
    python, root = shlex.quote(sys.executable), shlex.quote(str(site_root or ""))
    for name, (tool, version) in stubs(site).items():
        text = SRUN.format(python=python, version=shlex.quote(version), srun=shlex.quote(_real("srun")), root=root) \
            if tool == "ce" else STUB.format(name=name, tool=tool, version=shlex.quote(version) or "-", python=python,
                                             root=root)
        write_atomic(bin_dir / name, text, mode=0o755)
    write_atomic(bare_dir / "python3", STUB.format(name="python3", tool="python3", version="-", python=python,
                                                   root=root), mode=0o755)
    return bin_dir, bare_dir


def _real(program: str) -> str:
    import shutil
    return shutil.which(program) or program


@dataclass(frozen=True)
class Outcome:
    case: str
    job_id: str
    state: str
    records: tuple[dict, ...]
    output: str
    problem: str = ""                # "" when the case passed


def env_for(case: Case, base: Mapping[str, str], bin_dir: Path, bare_dir: Path, home: Path) -> dict[str, str]:
    """A case's submission environment: the cluster's (SLURM_CONF, MODULEPATH, BASH_ENV), the stubs first on
    PATH, the bare twins' python3 stub where the bare twin is not run for real, what the runtime's locally made
    image needs (Platform.local_env), USER where the caller's environment lacks it, HOME a folder of the
    rehearsal's (the container engine's EDF goes to ~/.edf) and, as root, Open MPI's consent to run as root
    (its mpirun refuses otherwise)."""
    path = [str(bin_dir)] + ([str(bare_dir)] if case.job.bare and not case.real else [])
    repo = str(Path(__file__).resolve().parents[2])
    runtime = {} if case.job.bare or not case.real else registry.PLATFORMS[case.job.runtime].local_env()
    root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"} if os.geteuid() == 0 else {}
    user = {} if base.get("USER") else {"USER": pwd.getpwuid(os.geteuid()).pw_name}     # as a login shell sets it
    return {**base, **runtime, **root, **user, "PATH": ":".join([*path, base.get("PATH", "/usr/bin:/bin")]), "HOME": str(home),
            "PYTHONPATH": ":".join(p for p in (repo, base.get("PYTHONPATH", "")) if p)}


def submit_all(scripts: Sequence[tuple[Case, Path, dict[str, str]]], timeout: float = 300) -> list[Outcome]:
    """Queue every script at once, then wait for all (the cluster runs what fits side by side)."""
    queued = []
    for case, path, env in scripts:
        out = path.with_suffix(".out")
        proc = subprocess.run(slurmjob.sbatch_argv(path, out), env=env, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
        job_id = slurmjob.job_id_of(proc.stdout) if proc.returncode == 0 else None
        queued.append((case, job_id, out, env, (proc.stderr or proc.stdout).strip()))
    deadline, outcomes = time.monotonic() + timeout, []
    for case, job_id, out, env, said in queued:
        if job_id is None:
            outcomes.append(Outcome(case.name, "", "REFUSED", (), said, f"sbatch refused it: {slurmjob.tail(said)}"))
            continue
        info = slurmjob.wait(job_id, env, max(deadline - time.monotonic(), 1))
        state = info.get("JobState", "?")
        if state in slurmjob.ACTIVE:
            slurmjob.cancel(job_id, env)
        text = out.read_text(errors="replace") if out.is_file() else ""
        records = tuple(slurmjob.json_lines(text))
        outcomes.append(Outcome(case.name, job_id, state, records, text, judge(case, state, records, text, info)))
    return outcomes


def judge(case: Case, state: str, records: Sequence[dict], output: str, info: Mapping[str, str]) -> str:
    """Why a case did not pass ("" when it did): it started and completed, and its records count every rank
    (the workload's world; or a stub's record per rank the launcher started, one where a stub launcher stood in)."""
    if state != "COMPLETED":
        return slurmjob.failure_line(info.get("JobId", "?"), state, info.get("ExitCode", "?"), output)
    if case.real:
        found = [r for r in records if r.get("workload") == "mpi"]
        if not found:
            return f"no mpi record in the output: {slurmjob.tail(output)}"
        world = found[-1].get("world_size")
        return "" if world == case.records else f"world size {world}, not {case.records}"
    stubbed = [r for r in records if r.get("rehearsal") == "stub"]
    if len(stubbed) != case.records:
        return f"{len(stubbed)} stub records, not {case.records}: {slurmjob.tail(output)}"
    return ""


def refusal(path: Path, env: Mapping[str, str]) -> str:
    """What sbatch says when it refuses `path` ("" when it takes it: then the job is cancelled at once)."""
    proc = subprocess.run(["sbatch", "--parsable", f"--output={path.with_suffix('.out')}", str(path)], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode == 0:
        job_id = slurmjob.job_id_of(proc.stdout)
        if job_id:
            slurmjob.cancel(job_id, env)
        return ""
    return re.sub(r"\s+", " ", (proc.stderr or proc.stdout).strip())


# -- one site's rehearsal, whole ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Report:
    site: str
    outcomes: tuple[Outcome, ...]
    cases: tuple[Case, ...]
    refusals: tuple[tuple[Negative, str], ...]       # each negative case and what sbatch said

    def problems(self) -> list[str]:
        out = [f"{o.case}: {o.problem}" for o in self.outcomes if o.problem]
        out += [f"{n.name}: sbatch took the script " + (f"with `{n.put}`" if n.put else f"without `{n.drop}`") if not said else
                f"{n.name}: refused, but not with \"{n.expect}\": {said}"
                for n, said in self.refusals if not said or n.expect not in said]
        return out

    def lines(self) -> list[str]:
        """What ran how, one line each (the suite's summary, the test's report)."""
        out = []
        for case, o in zip(self.cases, self.outcomes):
            how = "ran" if case.real else f"stub ({case.why})"
            out.append(f"{'PASS' if not o.problem else 'FAIL':<5} {self.site} {case.name}: job {o.job_id or '-'} "
                       f"{o.state}, {how}" + (f": {o.problem}" if o.problem else ""))
        for n, said in self.refusals:
            ok = bool(said) and n.expect in said
            out.append(f"{'PASS' if ok else 'FAIL':<5} {self.site} {n.name}: " +
                       (f"refused: {said}" if said else "accepted (should be refused)"))
        return out


def placeholder_image(site: Site, runtime: str, folder: Path) -> str:
    """The image a stubbed runtime is told of. Where images arrive as files (container.image_from = "file"), a
    file whose .sha256 matches, so that the script's check passes, and the folder Charliecloud's would
    unpack to, so that nothing is unpacked; elsewhere a name."""
    if site.container.image_from != "file":
        return f"/rehearsal/{runtime}-image"
    import hashlib

    from generator.images.export import export_suffix
    suffix = export_suffix(site, runtime)
    path = folder / f"rehearsal-{runtime}{suffix}"
    data = f"gen-recipe rehearsal: stands in for {site.name}'s {runtime} image\n".encode()
    write_atomic(path, data)
    digest = hashlib.sha256(data).hexdigest()
    write_atomic(path.with_name(path.name + ".sha256"), f"{digest}  {path.name}\n")
    if suffix == ".tar.gz":
        (folder / f"{path.name.removesuffix(suffix)}-{digest[:12]}").mkdir(exist_ok=True)
    return str(path)


def rehearse(site: Site, cluster: Path, folder: Path, image_for: Callable[[str], str], *,
             account: str = "", environ: Mapping[str, str] | None = None, progress=lambda line: None) -> Report:
    """Bring `cluster` (a minicluster state directory) to `site`'s shape, write the site's scripts and stubs
    into `folder`, submit every case at once and wait, then the negative cases one by one."""
    from generator.dev import minicluster, shape as shapes

    shape = shapes.shape_of(site, os.cpu_count() or 1, account=account)
    progress(f"rehearsal of {site.name}: the cluster in {cluster} takes {site.name}'s shape")
    minicluster.up(cluster, shape)
    folder.mkdir(parents=True, exist_ok=True)
    lay = minicluster.layout(cluster)
    bin_dir, bare_dir = write_stubs(lay.stubs, folder, site, lay.site_root)
    home = folder / "home"
    home.mkdir(exist_ok=True)
    base = {**(os.environ if environ is None else environ), **minicluster.rehearsal_env(cluster)}
    base["PATH"] = f"{Path(sys.executable).parent}:{base.get('PATH', '/usr/bin:/bin')}"
    todo = cases(site, image_for, shape.account, lambda runtime: placeholder_image(site, runtime, folder))
    scripts = []
    for case in todo:
        path = folder / f"{case.name}.sh"
        write_atomic(path, launch.script(site, case.job), mode=0o755)
        scripts.append((case, path, env_for(case, base, bin_dir, bare_dir, home)))
    progress(f"rehearsal of {site.name}: {len(scripts)} scripts submitted "
             f"({sum(c.real for c in todo)} for real, the rest with stubs)")
    outcomes = submit_all(scripts)
    first = scripts[-1]                                          # the bare twin on 2 nodes: every rule applies
    text = first[1].read_text()
    default = next((p.name for p in shape.partitions if p.default), None)
    refused = []
    for neg in negatives(site, text, default):
        path = folder / f"{neg.name}.sh"
        write_atomic(path, neg.applied(text), mode=0o755)
        refused.append((neg, refusal(path, first[2])))
    return Report(site.name, tuple(outcomes), tuple(todo), tuple(refused))


# -- batch systems without a Debian package: directives against the documentation ----------------------------

# The directives the scripts write for PBS-family schedulers, as their documentation defines them:
# option -> the resources `-l` may name (the chunk's for select/nodes; the job's for walltime).
DOCUMENTED_DIRECTIVES: Mapping[str, tuple[str, Mapping[str, frozenset[str]]]] = {
    "torque": ("TORQUE Resource Manager Administrator Guide 6.1, qsub: -N, -A, -q, -l nodes=N:ppn=P[:gpus=G], "
               "-l walltime=[[HH:]MM:]SS", {"-N": frozenset(), "-A": frozenset(), "-q": frozenset(),
                                             "-l": frozenset({"nodes", "ppn", "gpus", "walltime"})}),
    "pbs": ("Altair PBS Professional User's Guide, qsub: -N, -A, -q, -l select=N:mpiprocs=P[:ngpus=G], "
            "-l walltime=HH:MM:SS; HLRS, Batch System PBSPro (Hawk): -l select=[N:]chunk",
            {"-N": frozenset(), "-A": frozenset(), "-q": frozenset(),
             "-l": frozenset({"select", "mpiprocs", "ngpus", "ncpus", "walltime"})}),
}


def check_directives(kind: str, script: str) -> list[str]:
    """The #PBS lines of `script` against the documentation of `kind` (torque or pbs): what each would
    refuse, one line each (empty: every directive is documented)."""
    source, options = DOCUMENTED_DIRECTIVES[kind]
    problems = []
    for ln in script.splitlines():
        if not ln.startswith("#PBS "):
            continue
        words = ln.split()[1:]
        if len(words) != 2 or words[0] not in options:
            problems.append(f"{ln}: not one of the documented options {', '.join(options)} with a value ({source})")
            continue
        if words[0] == "-l":
            names = {part.split("=", 1)[0] for item in words[1].split(",") for part in item.split(":") if "=" in part}
            head = words[1].split("=", 1)[0]
            unknown = sorted((names | {head}) - options["-l"])
            if unknown:
                problems.append(f"{ln}: {', '.join(unknown)} is not a documented resource ({source})")
    return problems
