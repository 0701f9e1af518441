"""Batch scripts that run a workload in the site's container runtime, or bare (--bare).

    gen-recipe launch --site SITE --recipe NAME [--workload W] [--nodes N] [--gpus-per-node G]
                      [--tasks-per-node T] [--mode bind|hybrid] [--runtime R] [--bare]
                      [--image REF] [--account A] [--partition P] [--qos Q] [--debug]
                      [--out FILE] [-- WORKLOAD ARGS...]

The container script and its bare twin share everything but the container: the same
`module load` lines (site.host.modules, site.mpi.modules, the runtime's modules), the same
launcher line shape and the same environment, so their timings compare. Scheduler directives
come from site.host.scheduler (Slurm `#SBATCH`, PBS/Torque `#PBS`, LSF `#BSUB`, none: plain bash) and
the site's [scheduler] policy (`policy`: partition, QOS, constraint, account, what the allocation
must hold, the options and set-up modules of the site's job templates).
`script(site, job)` is pure; `gen-recipe launch` (generator/cli/launch.py) prints it or writes it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass

from workloads.registry import DDP, NAMES as WORKLOADS

from generator import __version__
from generator.recipe import catalog, payload
from generator.run import runtimes
from generator.model import site as site_mod
from generator.errors import UsageError, did_you_mean
from generator.model.schema import shown
from generator.quoting import dq, comment, heredoc_marker, line, name, word
from generator.model.site import Site

@dataclass(frozen=True, kw_only=True)
class Job:
    recipe: str | catalog.Recipe = "pytorch"    # a built-in name, the user's app file / Python recipe, or one resolved
    workload: str | None = None             # a built-in workload (default cnn); user recipes run their own
    nodes: int = 1
    gpus_per_node: int | None = None        # None: all of the site's GPUs
    tasks_per_node: int | None = None       # None: one per GPU, else one
    mode: str | None = None                 # None: the site's container.mpi_mode
    runtime: str | None = None              # None: the site's container.runtime
    bare: bool = False
    image: str | None = None                # None: what `gen-recipe build` makes for the site
    workload_args: tuple[str, ...] = ()
    time: str = "00:30:00"
    account: str = ""
    partition: str = ""                     # "": the one [scheduler] names for this kind of job
    qos: str = ""                           # "": [scheduler] job_qos (or the site's default)
    debug: bool = False                     # a short test run: [scheduler] debug_partition and debug_qos
    workloads_dir: str = ""                 # bare: the directory holding workloads/
    registry: str = ""                      # HOST[/PATH] the image was pushed to: the script says how to pull it
    allow_root: bool = False                # running as root (CI machines): root-only runtime flags (runtimes.Options)


@dataclass(frozen=True)
class JobPlan:
    """The resolved job: what goes into the script."""

    site: Site
    job: Job
    runtime: str
    mode: str
    gpus: int
    tasks: int
    image: str
    workload_argv: tuple[str, ...]
    recipe: catalog.Recipe
    policy: Policy
    caches: bool = False            # the image has torch: its kernel caches go to a node-local folder per job

    @property
    def from_file(self) -> bool:
        """The container runs an image file copied in (container.image_from = "file"), checked first."""
        return not self.job.bare and self.site.container.image_from == "file"


# -- the site's scheduler policy ---------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    """What the site's scheduler asks of one job ([scheduler] and the job's shape): where it goes and
    what its allocation must hold so that its steps get what they ask for."""

    partition: str = ""
    qos: str = ""
    constraint: str = ""
    account: str = ""
    cpus_per_task: int = 0              # asked in the allocation as on the launcher line (0: not asked)
    mem_per_gpu: str = ""
    options: tuple[str, ...] = ()       # the site's template options, then the collectives' (site.fabric)
    notes: tuple[str, ...] = ()         # what the site file could not check (a partition it does not list): said, not refused

    def slurm_options(self) -> list[str]:
        """The policy as sbatch/salloc options (without nodes, tasks, GPUs and time)."""
        return [*([f"--account={self.account}"] if self.account else []),
                *([f"--partition={self.partition}"] if self.partition else []),
                *([f"--qos={self.qos}"] if self.qos else []),
                *([f"--constraint={self.constraint}"] if self.constraint else []),
                *([f"--cpus-per-task={self.cpus_per_task}"] if self.cpus_per_task else []),
                *([f"--mem-per-gpu={self.mem_per_gpu}"] if self.mem_per_gpu else []),
                *self.options]


def _seconds(wall: str) -> int:
    return site_mod.wall_seconds(wall) or 0


def _hms(wall: str) -> str:
    """A limit as --time takes it (HH:MM:SS, hours beyond 24)."""
    return site_mod.hms(_seconds(wall))


def _named(site: Site, option: str, value: str, names: Sequence[str], table: str) -> str:
    """A --partition or --qos the site lists; one it does not is refused where the site file lists them all
    (scheduler.lists_complete: a typo would reach sbatch), else taken as given with a note ("": listed)."""
    if not value or not names or value in names:
        return ""
    what = "QOS" if table == "qos" else table[:-1]
    where = f"[[scheduler.{table}]] of {site.path}"
    if site.scheduler.lists_complete:
        raise UsageError(f"{option} {shown(value)}: site {site.name} has no such {what} ({did_you_mean(value, names)}; "
                         f"{where}, which lists them all): give one it lists")
    return (f"{option} {shown(value)} is not among the {what} names site {site.name} lists ({did_you_mean(value, names)}; "
            f"{where}): taken as given")


def policy(site: Site, *, nodes: int, gpus: int, tasks: int, time: str = "00:30:00", account: str = "",
           partition: str = "", qos: str = "", debug: bool = False) -> Policy:
    """The scheduler policy of a job of `nodes` × `tasks` ranks with `gpus` GPUs per node at `site` (pure).
    A job the site's scheduler would refuse (no account where one is required, more nodes or time than
    its partition or QOS allows, no debug partition or QOS for --debug) is a one-line UsageError naming
    the site's rule and the option that fixes it."""
    sched, kind = site.scheduler, site.host.scheduler
    given = [f"--{o}" for o, v in (("account", account), ("partition", partition), ("qos", qos), ("debug", debug)) if v]
    if kind == "none":
        if given:
            raise UsageError(f"{', '.join(given)}: site {site.name} has no batch system (host.scheduler = \"none\" in "
                             f"{site.path}): leave {'it' if len(given) == 1 else 'them'} out")
        return Policy()
    if qos and kind != "slurm":
        raise UsageError(f"--qos: site {site.name} runs {kind}, whose scripts take no QOS here: leave it out")
    rule = f"[scheduler] of {site.path}"
    # a partition or QOS the site file does not list: refused where it lists them all (scheduler.lists_complete), else
    # a note (a site that lists none: taken as given)
    notes = tuple(n for n in (_named(site, "--partition", partition, [p.name for p in sched.partitions], "partitions"),
                              _named(site, "--qos", qos, [q.name for q in sched.qos], "qos") if kind == "slurm" else "")
                  if n)
    if partition and gpus and sched.partition(partition) is not None and not sched.partition(partition).gpus:
        raise UsageError(f"--partition {shown(partition)}: site {site.name}'s partition has no GPUs ({rule}), and the job "
                         f"asks {gpus} per node: choose a GPU partition, or --gpus-per-node 0")
    if sched.account == "required" and not account:
        said = f"; the scheduler says: {sched.refusals['account']}" if "account" in sched.refusals else ""
        what = f" ({sched.account_name})" if sched.account_name else ""
        raise UsageError(f"site {site.name} runs no job without an account{what} (scheduler.account = \"required\" in "
                         f"{site.path}{said}): pass --account {sched.account_example or 'PROJECT'}")
    if debug and not (sched.debug_partition or sched.debug_qos):
        raise UsageError(f"--debug: site {site.name} names no partition or QOS for short test runs "
                         f"(scheduler.debug_partition, scheduler.debug_qos in {site.path}); give --partition/--qos")
    part = partition or (sched.debug_partition if debug else "") or sched.job_partition \
        or (sched.default_partition.name if sched.default_partition else "")
    chosen_qos = qos or (sched.debug_qos if debug else "") or sched.job_qos
    # the QOS whose limits apply: the one asked for, else the site's default one (not written: Slurm applies it)
    limiting = chosen_qos or next((q.name for q in sched.qos if q.default), "")
    for what, limits in (("partition", sched.partition(part)), ("QOS", sched.qos_named(limiting) if kind == "slurm" else None)):
        if limits is None:
            continue
        if limits.max_nodes and nodes > limits.max_nodes:
            raise UsageError(f"site {site.name}: {what} {limits.name} takes at most {limits.max_nodes} nodes per job, "
                             f"not {nodes} ({rule}): ask fewer --nodes, or another --{what.lower()}")
        most, size = limits.max_time_for(nodes) if what == "partition" else (limits.max_time, "")
        if most and _seconds(time) > _seconds(most):
            of = f" a job of {size} (time_by_nodes)" if size else " a job"
            raise UsageError(f"site {site.name}: {what} {limits.name} runs{of} at most {_hms(most)}, not {_hms(time)} "
                             f"({rule}): give --time {_hms(most)} or less, or another --{what.lower()}"
                             + (" or more --nodes" if size else ""))
    shared = bool(sched.partition(part) and sched.partition(part).shared)
    cpus = _cpus_per_task(site.host.rank_binding if gpus and tasks == gpus else ()) or \
        (sched.cpus_per_gpu if shared and gpus and tasks == gpus else 0)
    return Policy(partition=part, qos=chosen_qos if kind == "slurm" else "",
                  constraint=sched.constraint, account=account, cpus_per_task=cpus,
                  mem_per_gpu=sched.mem_per_gpu if shared and gpus else "",
                  options=(*sched.options, *site.fabric.collectives.sbatch) if kind == "slurm" else (), notes=notes)


def _cpus_per_task(options: Sequence[str]) -> int:
    found = [o.split("=", 1)[1] for o in options if o.startswith("--cpus-per-task=")]
    return int(found[-1]) if found and found[-1].isdigit() else 0


# -- scheduler directives -------------------------------------------------------------------

def _slurm(p: JobPlan, name: str) -> list[str]:
    lines = [f"#SBATCH --job-name={name}", f"#SBATCH --nodes={p.job.nodes}",
             f"#SBATCH --ntasks-per-node={p.tasks}", f"#SBATCH --time={p.job.time}"]
    lines += [f"#SBATCH --gpus-per-node={p.gpus}"] if p.gpus else []
    return lines + [f"#SBATCH {opt}" for opt in p.policy.slurm_options()]


def _pbs(p: JobPlan, name: str) -> list[str]:
    gpus = f":ngpus={p.gpus}" if p.gpus else ""
    return [f"#PBS -N {name}", f"#PBS -l select={p.job.nodes}:mpiprocs={p.tasks}{gpus}",
            f"#PBS -l walltime={p.job.time}"] + ([f"#PBS -A {p.job.account}"] if p.job.account else []) \
        + ([f"#PBS -q {p.policy.partition}"] if p.policy.partition else [])


def _torque(p: JobPlan, name: str) -> list[str]:
    gpus = f":gpus={p.gpus}" if p.gpus else ""
    return [f"#PBS -N {name}", f"#PBS -l nodes={p.job.nodes}:ppn={p.tasks}{gpus}",
            f"#PBS -l walltime={p.job.time}"] + ([f"#PBS -A {p.job.account}"] if p.job.account else []) \
        + ([f"#PBS -q {p.policy.partition}"] if p.policy.partition else [])


def _lsf(p: JobPlan, name: str) -> list[str]:
    minutes = -(-_seconds(p.job.time) // 60)          # LSF's -W [hour:]minute: up to the next minute, as Slurm
    h, m = minutes // 60, minutes % 60
    lines = [f"#BSUB -J {name}", f"#BSUB -n {p.job.nodes * p.tasks}", f'#BSUB -R "span[ptile={p.tasks}]"',
             f"#BSUB -W {int(h):d}:{int(m):02d}"]
    lines += [f'#BSUB -gpu "num={p.gpus}"'] if p.gpus else []
    return lines + ([f"#BSUB -P {p.job.account}"] if p.job.account else []) \
        + ([f"#BSUB -q {p.policy.partition}"] if p.policy.partition else [])


DIRECTIVES: Mapping[str, Callable[[JobPlan, str], list[str]]] = {
    "slurm": _slurm, "pbs": _pbs, "torque": _torque, "lsf": _lsf, "none": lambda p, name: []}
# Batch systems that start the script in the home directory: go back to where it was submitted.
WORKDIR = {"pbs": "PBS_O_WORKDIR", "torque": "PBS_O_WORKDIR", "lsf": "LS_SUBCWD"}


# -- launcher lines ---------------------------------------------------------------------------

MPI_LAUNCHERS = ("mpirun", "mpiexec")     # the host MPI's own: its module must be loaded to start ranks

def launcher(site: Site, nodes: int, tasks: int, gpus: int, forward: Sequence[str] = (),
             cpus_per_task: int = 0, runtime: str = "") -> tuple[str, ...]:
    """The launcher prefix for nodes × tasks ranks; `forward`: variables Open MPI's mpirun must pass;
    `cpus_per_task`: what the allocation asked per rank (`Policy`), asked again by srun; `runtime`: the
    container runtime each rank starts in ("" for a bare run)."""
    name, total = site.host.launcher, nodes * tasks
    if name == "srun":
        per_gpu = site.host.rank_binding if gpus and tasks == gpus else ()    # one rank per GPU: the site's layout
        cpus = (f"--cpus-per-task={cpus_per_task}",) if cpus_per_task and not _cpus_per_task(per_gpu) else ()
        return ("srun", f"--nodes={nodes}", f"--ntasks-per-node={tasks}", *cpus,
                *(per_gpu or ([f"--gpus-per-node={gpus}"] if gpus else [])),
                *([f"--mpi={site.mpi.pmi}"] if site.mpi.pmi != "none" else []))
    if name in MPI_LAUNCHERS and site.mpi.flavour == "openmpi":
        return (name, "-np", str(total), "--map-by", f"ppr:{tasks}:node",
                *[a for var in forward for a in ("-x", var)])
    if name in MPI_LAUNCHERS:  # MPICH family (hydra): the environment goes along
        # Hydra hands each rank its PMI socket as an open file (PMI_FD), which an OCI container does not keep:
        # there the ranks connect to the port Hydra listens on (PMI_PORT, over the host network)
        port = ("-pmi-port",) if site.mpi.flavour == "mpich" and runtime and \
            not runtimes.PLATFORMS[runtime].inherits_fds else ()
        return (name, "-n", str(total), "-ppn", str(tasks), *port)
    if name == "aprun":
        return ("aprun", "-n", str(total), "-N", str(tasks))
    if total > 1:
        raise UsageError(f"site {site.name} has no launcher (host.launcher = \"none\"); run one rank: --nodes 1 --tasks-per-node 1")
    return ()


# -- the plan and the script -------------------------------------------------------------------

def default_image(site: Site, recipe: catalog.Recipe, runtime: str, registry: str = "") -> str:
    """What the runtime runs when --image is not given: the exported file where images arrive as files
    (`<recipe>-<site>.tar.gz` / `.sif`), `<recipe>-<site>.sif` for SIF runtimes, the pushed reference where
    the image is pulled from `registry` by reference, else what `gen-recipe build` tags (in the runtime's
    local image form: images.convert)."""
    if site.container.image_from == "file":
        from generator.images.export import export_suffix
        return f"{recipe.name}-{site.name}{export_suffix(site, runtime)}"
    if runtimes.PLATFORMS[runtime].image == "sif":
        return f"{recipe.name}-{site.name}.sif"
    from generator.images import convert, tags  # the tag needs the build's content hash (renders the recipe)
    ref = tags.default_ref(site, recipe)
    if registry and pulled(site, runtime):
        ref = tags.retarget(ref, registry)
    return convert.runtime_image_name(site, ref, runtime)


def pulled(site: Site, runtime: str) -> bool:
    """The image comes from a registry: the site cannot build (container.build = "none"), or gen-recipe build
    makes no image the runtime runs (podman-hpc, Sarus, the container engine, docker)."""
    return site.container.build == "none" or not runtimes.PLATFORMS[runtime].built_here


def workload_argv(recipe: catalog.Recipe, job: Job, ranks: int) -> tuple[str, ...]:
    """What each rank runs: `python3 -m workloads.W` for a built-in workload, else the recipe's [workload]
    command (both followed by the arguments after --)."""
    if not recipe.builtin:
        if job.workload:
            raise UsageError(f"--workload picks a built-in workload; recipe {recipe.name} runs its own "
                             f"([workload] command of {recipe.source}); give extra arguments after --")
        argv = (*(recipe.workload.command if recipe.workload else ()), *job.workload_args)
        if not argv:
            raise UsageError(f"recipe {recipe.name} declares no workload: add a [workload] command to {recipe.source}, "
                             "or give the command after --")
        return argv
    workload = job.workload or "cnn"
    if workload not in WORKLOADS:
        raise UsageError(f"unknown workload '{workload}' (valid: {', '.join(WORKLOADS)})")
    argv = ("python3", "-m", f"workloads.{workload}")
    if ranks > 1 and workload in DDP and "--mode" not in job.workload_args:
        argv += ("--mode", "ddp")
    return argv + tuple(job.workload_args)


def _checked(option: str, value: str, kind: str, example: str) -> None:
    """`value` of `option` must be of the schema kind `kind` and printable (no control, escape, bidirectional
    or surrogate character), else a one-line UsageError naming the option and an example."""
    pattern, what = site_mod.KINDS[kind]
    if not (pattern.fullmatch(value) and value.isprintable()):
        raise UsageError(f"{option} {shown(value)}: give {what} (e.g. {example})")


# HOST[:PORT][/PATH] as OCI distribution names it: a host name, then lower-case path components.
REGISTRY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?"
                      r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")


def check_job(site: Site, job: Job) -> None:
    """Every string of `job` as the command line gave it, checked with the site schema's kinds before it reaches a
    script (gen-recipe launch calls this first): one-line UsageErrors naming the option and a fix."""
    if isinstance(job.recipe, str):
        _checked("--recipe", job.recipe, "arg", "--recipe pytorch")
    if job.image is not None:
        if not job.image:
            raise UsageError("--image '' is empty: give an image reference such as rocm/dev-ubuntu-22.04:6.2.4 or a "
                             "file's path, or leave --image out for what gen-recipe build makes")
        if not (site_mod.KINDS["image"][0].fullmatch(job.image.removeprefix("/")) and job.image.isprintable()):
            raise UsageError(f"--image {shown(job.image)}: give an image reference such as rocm/dev-ubuntu-22.04:6.2.4 "
                             "or a file's path (letters, digits, / . _ - + : @)")
    if job.runtime is not None and job.runtime not in runtimes.PLATFORMS:
        raise UsageError(f"--runtime {shown(job.runtime)}: unknown runtime (site {site.name} has "
                         f"{', '.join(rt.name for rt in site.runtimes)})")
    if not site_mod.wall_seconds(job.time):
        raise UsageError(f"--time {shown(job.time)}: give a wall time as Slurm's --time takes it, "
                         f"{site_mod.WALL_TIME_FORMS}, above zero (minutes and seconds below 60 after the first "
                         "field; e.g. --time 00:30:00 or --time 1-12)")
    for option, value, example in (("--account", job.account, site.scheduler.account_example or "abc123"),
                                   ("--partition", job.partition, "batch"), ("--qos", job.qos, "normal")):
        if value:
            _checked(option, value, "word", f"{option} {example}")
    if job.workloads_dir:
        _checked("--workloads-dir", job.workloads_dir, "path", "--workloads-dir /scratch/me/gen-recipe")
    if job.registry and not job.bare and not (len(job.registry) <= 255 and REGISTRY.fullmatch(job.registry)):
        raise UsageError(f"--registry {shown(job.registry)} (or $GEN_RECIPE_REGISTRY) is not HOST[:PORT][/PATH]: give "
                         "e.g. --registry ghcr.io/me/gen-recipe (lower-case path, no scheme, tag or digest)")
    for arg in job.workload_args:
        _checked("workload argument", arg, "arg", "-- --steps 5")


def plan_job(site: Site, job: Job) -> JobPlan:
    recipe = catalog.load(job.recipe)
    rt = site.runtime(job.runtime).name
    mode = job.mode or (site.container.mpi_mode if site.container.runtime == rt else site.runtime(rt).mpi_modes[0])
    runtimes.check_mode(site, rt, mode)
    gpus = site.gpu.count_per_node if job.gpus_per_node is None else job.gpus_per_node
    if gpus > site.gpu.count_per_node:
        raise UsageError(f"site {site.name} has {site.gpu.count_per_node} GPUs per node, not {gpus}")
    if job.nodes < 1:
        raise UsageError("--nodes must be at least 1")
    tasks = job.tasks_per_node or max(gpus, 1)
    if site_mod.wall_seconds(job.time):              # one form in every script: HH:MM:SS (check_job refused the rest)
        job = dataclasses.replace(job, time=site_mod.hms(site_mod.wall_seconds(job.time)))
    rules = policy(site, nodes=job.nodes, gpus=gpus, tasks=tasks, time=job.time, account=job.account,
                   partition=job.partition, qos=job.qos, debug=job.debug)
    argv = workload_argv(recipe, job, job.nodes * tasks)
    if job.bare:
        argv = recipe.local(argv)
    if job.image and not job.bare and runtimes.PLATFORMS[rt].image == "container" and re.search(r"[/:@]", job.image):
        make = runtimes.PLATFORMS[rt].pull.format(ref=shlex.quote(job.image), image="NAME")
        raise UsageError(f"--image {shown(job.image)}: {rt} runs a created container, named by --image; for an image "
                         f"in a registry: {make}, then --image NAME (or --registry HOST/PATH for the pushed image)")
    image = job.image or ("" if job.bare else default_image(site, recipe, rt, job.registry))
    spec = recipe.python(site)
    return JobPlan(site, job, rt, mode, gpus, tasks, image, argv, recipe, rules,
                   caches=bool(spec is not None and getattr(spec, "torch_compile", False)))


# The job's id in the kernel caches' folder, by batch system (no batch system: one folder per user).
JOB_ID = {"slurm": "SLURM_JOB_ID", "pbs": "PBS_JOBID", "torque": "PBS_JOBID", "lsf": "LSB_JOBID"}
CACHE_ROOT = "GEN_RECIPE_KERNEL_CACHE"
CACHE_BIND = "GEN_RECIPE_KERNEL_BIND"        # what runtimes that do not share /tmp mount (runtimes.cache_binds)


SCRIPT_IMAGE_DIR = f"${{PWD}}/{runtimes.LOCAL_IMAGE_DIR.as_posix()}"   # images gen-recipe build made, from the job's folder


def cache_root(site: Site) -> str:
    """The node-local folder of one job's kernel caches (host variables expanded where the script runs)."""
    job_id = JOB_ID.get(site.host.scheduler)
    return f"{site.host.local_tmp}/gen-recipe-cache-${{USER}}" + (f"-${{{job_id}}}" if job_id else "")


def cache_env(p: JobPlan) -> dict[str, str]:
    """The kernel caches' variables, under the job's folder ($GEN_RECIPE_KERNEL_CACHE), when the image has torch."""
    return runtimes.kernel_cache_env(p.site, f"${{{CACHE_ROOT}}}") if p.caches else {}


def loads_host_mpi(site: Site, mode: str, bare: bool) -> bool:
    """Whether a script loads the host MPI's modules: where it runs (bind mode, bare runs) or its
    mpirun starts the containers; a hybrid container run otherwise mounts no host MPI."""
    return mode == "bind" or bare or site.host.launcher in MPI_LAUNCHERS


def modules(p: JobPlan) -> list[tuple[str, ...]]:
    """The `module load` groups: the site's job-template set-up ([scheduler] setup), the host's, the host
    MPI's (`loads_host_mpi`), the runtime's, and the runtime's bind machinery in bind mode only."""
    rt = p.site.runtime(p.runtime)
    groups, seen = [], set()
    host_mpi = p.site.mpi.modules if loads_host_mpi(p.site, p.mode, p.job.bare) else ()
    for group in (p.site.scheduler.setup, p.site.host.modules, host_mpi, rt.modules,
                  rt.bind_modules if p.mode == "bind" else ()):
        new = [m for m in group if m not in seen]
        seen.update(new)
        if new:
            groups.append(("module", "load", *new))
    return groups


def container_command(p: JobPlan) -> runtimes.Command:
    opts = runtimes.Options(mode=p.mode, gpus=p.gpus, mpi=p.job.nodes * p.tasks > 1, ranks_per_node=p.tasks,
                            allow_root=p.job.allow_root, env=cache_env(p),
                            binds=runtimes.cache_binds(p.site, p.runtime) if p.caches else ())
    image = "${image}" if p.from_file else p.image
    return runtimes.command(p.site, image, p.workload_argv, opts, runtime=p.runtime)


def image_file_lines(p: JobPlan) -> list[str]:
    """For images that arrive as a file: check it against its .sha256 before anything runs, and for
    Charliecloud unpack it once (into a directory named after its checksum); `$image` is what runs."""
    from generator.images.export import export_suffix
    suffix = export_suffix(p.site, p.runtime)
    out = ["# the image file copied in (gen-recipe build --export) and its .sha256: checked before the job starts",
           f"image_file={word(p.image)}",
           'if ! (cd "$(dirname "$image_file")" && sha256sum --check --strict --quiet "$(basename "$image_file").sha256"); then',
           '    echo "$image_file does not match $image_file.sha256 (or one is missing): copy both again" >&2',
           "    exit 1",
           "fi"]
    if suffix == ".tar.gz":
        out += [f'image="${{image_file%{suffix}}}-$(cut -c1-12 "$image_file.sha256")"',
                '[ -d "$image" ] || ch-convert -i tar -o dir "$image_file" "$image"']
    else:
        out.append('image="$image_file"')
    return out


def bare_command(p: JobPlan) -> runtimes.Command:
    """The workload on the host, with the container's environment (see `runtimes.bare_env`) and the
    application's own (a user recipe's ENV)."""
    return runtimes.Command(p.workload_argv, {**runtimes.bare_env(p.site, p.mode), **cache_env(p), **p.recipe.env})


def _header(p: JobPlan) -> list[str]:
    job, site, recipe = p.job, p.site, p.recipe
    workload = (job.workload or "cnn") if recipe.builtin else ""
    name = "-".join(x for x in (recipe.name, workload, site.name) if x) + ("-bare" if job.bare else "")
    builtin = Path(site.path).name == f"{site.name}.toml" and Path(site.path).parent.name == "sites" \
        and site_mod.builtin_names().get(site.name) == site.name
    flags = [f"--site {shlex.quote(site.name if builtin else str(Path(site.path).absolute()))}", f"--recipe {shlex.quote(recipe.spec)}",
             *([f"--workload {workload}"] if workload else []), f"--nodes {job.nodes}", f"--mode {p.mode}"]
    flags += [f"--gpus-per-node {job.gpus_per_node}"] if job.gpus_per_node is not None else []
    flags += [f"--tasks-per-node {job.tasks_per_node}"] if job.tasks_per_node else []
    flags += [f"--runtime {p.runtime}"] if not job.bare else ["--bare"]
    flags += ["--debug"] if job.debug else []
    flags += [f"--{k} {shlex.quote(v)}" for k, v in (("account", job.account), ("partition", job.partition),
                                                      ("qos", job.qos)) if v]
    flags += [f"--time {job.time}"] if job.time != Job.time else []
    flags += [f"--image {shlex.quote(job.image)}"] if job.image and not job.bare else []
    flags += [f"--registry {shlex.quote(job.registry)}"] if job.registry and not job.bare else []
    flags += ["--", *map(shlex.quote, job.workload_args)] if job.workload_args else []
    if job.bare and not recipe.builtin:
        what = (f"bare run: your files and the host's python3 (holding what the image's /opt/venv holds), twin of the "
                f"{p.runtime} {p.mode}-mode run")
    elif job.bare:
        what = f"bare run: the host's python3 (with torch and mpi4py), twin of the {p.runtime} {p.mode}-mode run"
    else:
        what = f"{p.runtime}, {p.mode} mode: " + ("host MPI mounted into the container" if p.mode == "bind"
                                                  else "the container's own MPI, one container per rank")
    out = ["#!/bin/bash", *(comment(d.removeprefix("#"), mark="#") for d in DIRECTIVES[site.host.scheduler](p, name)),
           comment(f"Generated by gen-recipe {__version__}: gen-recipe launch {' '.join(flags)}"),
           comment(site.description), comment(what), *(comment(f"note: {n}") for n in p.policy.notes)]
    if not job.bare:
        out += [comment(x) for x in image_lines(p, flags[0].removeprefix("--site "))]
    out.append("set -euo pipefail")
    if site.host.scheduler in WORKDIR:
        out.append(f'cd "${{{WORKDIR[site.host.scheduler]}}}"')
    return out


def image_lines(p: JobPlan, site_arg: str) -> list[str]:
    """How the image gets to the site, as the site documents it (container.build, container.image_from): the
    commands, each working as printed from the folder the job starts in (the image's path is relative to it)."""
    site, job, recipe, plat = p.site, p.job, p.recipe, runtimes.PLATFORMS[p.runtime]
    build = f"gen-recipe build --site {site_arg} --recipe {shlex.quote(recipe.spec)}"
    sif = plat.image == "sif"
    fmt = " --format apptainer" if sif else ""
    if p.from_file:
        return [f"Image: {build}{fmt} --export {shlex.quote(p.image)} where there is internet; copy it and its "
                ".sha256 here"]
    if not plat.pull and (job.registry or job.image is not None):
        return [f"Image: the engine imports {shlex.quote(p.image)} when the job starts (enroot import for a squashfs)"]
    if job.image is not None and plat.image == "oci" and pulled(site, p.runtime):
        return [f"Image: {plat.pull.format(ref=shlex.quote(p.image))}  (--image)"]
    if job.image is not None and (not sif or "://" in job.image):
        return [f"Image: {shlex.quote(p.image)}, given with --image" + (" (the runtime pulls it when the job starts)"
                                                                        if "://" in job.image else "")]
    if not pulled(site, p.runtime):
        out = ("" if job.image is None else f" --out {shlex.quote(p.image)}") if sif else \
            (f" --runtime {p.runtime}" if plat.local_image != "oci" else "")
        made = [f"Image: {build}{fmt}{out}"]
        if site.container.build == "fakeroot":
            made.append("   (it runs apptainer/singularity build --fakeroot for a plain user, as this site builds)")
        return made + ([f"   or: {pull_command(p)}"] if job.registry and sif else [])
    pushed = " --format apptainer" if pull_format(plat) == "apptainer" else ""
    push = f"{build}{pushed} --push --registry {shlex.quote(job.registry or 'HOST/PATH')}"
    why = (f"{site.name} cannot build images (container.build)" if site.container.build == "none"
           else f"{p.runtime} runs images from a registry")
    if not job.registry:
        return [f"Image: {push}",
                f"   (where images can be built: {why}; then this launch command with --registry HOST/PATH names "
                "the pushed image" + (" and prints the line that pulls it here)" if plat.pull else ")")]
    return [f"Image: {pull_command(p)}", f"   ({why}: pushed by {push} where images can be built)"]


def pull_format(plat: runtimes.Platform) -> str:
    """What the runtime pulls: a SIF pushed with ORAS (gen-recipe build --format apptainer --push), else the OCI image."""
    return "apptainer" if "oras://" in plat.pull else "docker"


def pull_command(p: JobPlan) -> str:
    """The runtime's command that brings the image pushed to --registry to where the job runs."""
    from generator.images import tags
    plat = runtimes.PLATFORMS[p.runtime]
    ref = tags.default_ref(p.site, p.recipe, registry=p.job.registry, fmt=pull_format(plat))
    cmd = plat.pull.format(ref=shlex.quote(ref), image=shlex.quote(p.image))
    if tags.insecure(ref) and p.runtime in ("podman", "podman-hpc"):
        cmd = cmd.replace(" pull ", " pull --tls-verify=false ", 1)     # a registry on this machine speaks HTTP
    return cmd


def script(site: Site, job: Job) -> str:
    """The batch script for `job` at `site` (pure)."""
    return script_of(plan_job(site, job))


def script_of(p: JobPlan) -> str:
    """The batch script of a planned job (pure)."""
    site, job = p.site, p.job
    out = _header(p)
    mods = modules(p)
    if mods:
        out += ["", *(line(m) for m in mods)]
    own = runtimes.host_mpi_env(site) if loads_host_mpi(site, p.mode, job.bare) else {}
    if own:
        out += ["", comment(f"the host MPI ({site.mpi.flavour} {site.mpi.version} in {site.mpi.install_path}; mpi.setup = prefix: "
                               "no module sets it up)"),
                *(f'export {name(k)}="{dq(v)}${{{k}:+:${k}}}"' for k, v in own.items())]
    cmd = bare_command(p) if job.bare else container_command(p)
    if p.caches:
        out += ["", comment("kernel caches (torch.compile's Inductor and Triton, the GPU stack's): node-local "
                            f"({site.host.local_tmp}), a folder per job, unless {CACHE_ROOT} names one (on a "
                            "file system every node sees: kernels kept across jobs)"),
                f'if [ -z "${{{CACHE_ROOT}:-}}" ]; then', f"    {CACHE_ROOT}={word(cache_root(site))}",
                f"    {CACHE_BIND}={word(site.host.local_tmp)}", "else", f'    {CACHE_BIND}="${CACHE_ROOT}"', "fi",
                f'(umask 077 && mkdir -p "${CACHE_ROOT}")',
                f'if [ ! -O "${CACHE_ROOT}" ]; then',
                f'    echo "${CACHE_ROOT} is not yours: another user made it first; set {CACHE_ROOT} to a folder '
                'of yours" >&2', "    exit 1", "fi",
                f"export {CACHE_ROOT} {CACHE_BIND}"]
    local = runtimes.PLATFORMS[p.runtime].local_env(SCRIPT_IMAGE_DIR) \
        if not job.bare and job.image is None and not pulled(site, p.runtime) else {}
    if local:
        out += ["", comment(f"where gen-recipe build --runtime {p.runtime} made the image (run from this folder)"),
                *(f"export {name(k)}={word(v)}" for k, v in local.items())]
    if cmd.env:
        out += ["", *(f"export {name(k)}={word(v)}" for k, v in cmd.env.items())]
    forward = list(cmd.env)
    if job.bare and p.recipe.builtin:
        workloads = dq(job.workloads_dir or str(payload.workloads_dir().parent)).replace("}", "\\}")  # inside ${X:=...}
        out += ["", "# the workloads package, as the image carries it in /opt/workloads",
                f': "${{GEN_RECIPE_WORKLOADS:={workloads}}}"',
                'export PYTHONPATH="${GEN_RECIPE_WORKLOADS}${PYTHONPATH:+:${PYTHONPATH}}"']
        forward.append("PYTHONPATH")
    for path, text in cmd.files.items():
        folder = path.rsplit("/", 1)[0]
        end = heredoc_marker(text)
        out += ["", f"mkdir -p {word(folder)}", f"cat > {word(path)} <<'{end}'", text.rstrip("\n"), end]
    if p.from_file:
        out += ["", *image_file_lines(p)]
    if cmd.setup:
        out += ["", *(line(s) for s in cmd.setup)]
    full = (*launcher(site, job.nodes, p.tasks, p.gpus, forward, p.policy.cpus_per_task,
                      "" if job.bare else p.runtime), *cmd.launcher_args, *cmd.argv)
    out += ["", line(full)]
    return "\n".join(out) + "\n"



