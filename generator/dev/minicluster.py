"""Run a Slurm cluster on this machine: slurmctld, one slurmd per node and munged, all on 127.0.0.1.

    gen-recipe minicluster up|down|status [--dir DIR] [--shape SITE]

Everything lives under one state directory (default `build/minicluster/`, or $GEN_RECIPE_MINICLUSTER):
slurm.conf, the munge key and socket, pid files, logs, the controller's state and each node's spool.
Use it with `export SLURM_CONF=DIR/slurm.conf` (printed by `up` and `status`). `up` and `down` are
idempotent. Each slurmd has its own port and its own TmpFS (`tmp-<node>/`), where the PMIx plugin puts
the per-step directories (`srun --mpi=pmix` across nodes needs them apart). The TmpFS directories are under
/tmp (`/tmp/gen-recipe-minicluster-<hash of the state directory>/`), because containers (ch-run) share the
machine's /tmp and Open MPI keeps its session directory in the step's directory there.

The cluster's shape is a site's `[scheduler]` facts (`generator.dev.shape`): by default `local-slurm`'s (two
nodes n1 and n2, one partition `debug`); `--shape SITE` gives the site's partitions, limits, GPUs, node
features, node sharing, QOS and accounts (enforced by real accounting: slurmdbd with a MariaDB of the
cluster's own, started only for shapes that have QOS or require an account), the rules slurm.conf cannot
say (job_submit.lua) and the site's modules as Lmod modulefiles (`modules/`). `up` with another shape
restarts the controller and the nodes on the new configuration; munged and the database stay.

For tests:  up(path, shape) -> Status,  down(path) -> list of stopped daemons,  status(path) -> Status,
slurm_env(path) -> the environment for sbatch/srun. The config text comes from pure functions.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import signal
import stat
import subprocess
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from generator.dev import shape as shapes
from generator.dev.shape import Shape
from generator.errors import CheckFailed, UsageError
from generator.files import write_atomic

NODES = ("n1", "n2")                 # the default shape's nodes (local-slurm's)
ENV_VAR = "GEN_RECIPE_MINICLUSTER"
DEFAULT_DIR = Path("build") / "minicluster"
DEFAULT_SHAPE = "local-slurm"
TMP = Path("/tmp")
TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "scontrol", "unshare", "mount")
ACCOUNTING_TOOLS = ("slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db", "mariadb")
PACKAGES = "slurm-wlm slurm-wlm-basic-plugins munge"
ACCOUNTING_PACKAGES = "slurmdbd mariadb-server"
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")     # Debian's lmod
SYSTEM_MODULES = Path("/etc/lmod/modules")              # on Lmod's default MODULEPATH (/etc/lmod/modulespath)
READY_STATES = ("idle", "mixed", "allocated", "completing")


@dataclass(frozen=True)
class Layout:
    """Where everything of one cluster lives (all paths absolute)."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def key(self) -> Path:
        return self.root / "munge.key"

    @property
    def socket(self) -> Path:
        """munged's socket, named as libmunge's default: accounting connections ignore AuthInfo's socket, so
        the controller and sacctmgr see this directory at /run/munge (`in_munge_namespace`)."""
        return self.root / "munge" / "munge.socket.2"

    @property
    def modules(self) -> Path:
        """The shape's Lmod modulefiles (MODULEPATH)."""
        return self.root / "modules"

    @property
    def stubs(self) -> Path:
        """Where a rehearsal puts the programs that stand in for the site's (generator.dev.rehearsal): the
        shape's modulefiles put it on PATH, as a site's modules put its programs there."""
        return self.root / "stubs"

    @property
    def site_root(self) -> Path:
        """The site's bind sources, as folders (and bind mode's single libraries as empty files) under this
        folder: a rehearsal's stubbed runtimes find a script's bind sources here or on this machine."""
        return self.root / "siteroot"

    @property
    def site_env(self) -> Path:
        """A folder per user variable the site's binds name (`${SCRATCH}`): rehearsal_env sets each to its own."""
        return self.root / "siteenv"

    @property
    def devices(self) -> Path:
        """The GPUs' files of gres.conf: links to /dev/null."""
        return self.root / "dev"

    @property
    def shape_file(self) -> Path:
        return self.root / "shape"

    def pidfile(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    def log(self, daemon: str) -> Path:
        return self.root / "log" / f"{daemon}.log"

    @property
    def tmp_root(self) -> Path:
        """The nodes' TmpFS directories go here: under /tmp, which containers share."""
        return TMP / f"gen-recipe-minicluster-{zlib.crc32(str(self.root).encode()):08x}"

    def dirs(self, nodes: tuple[str, ...] = NODES) -> list[Path]:
        return [self.root / d for d in ("munge", "run", "log", "state", *(f"spool-{n}" for n in nodes))] + \
            [self.tmp_root / f"tmp-{n}" for n in nodes]


def layout(state_dir: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Layout:
    """The layout for `state_dir`, else $GEN_RECIPE_MINICLUSTER, else build/minicluster (absolute)."""
    environ = os.environ if environ is None else environ
    chosen = state_dir or environ.get(ENV_VAR) or DEFAULT_DIR
    return Layout(Path(chosen).expanduser().absolute())


MAX_NODES = 4


def ports(root: Path, nodes: tuple[str, ...] = NODES) -> dict[str, int]:
    """Ports of slurmctld, the slurmd of `nodes`, slurmdbd and MariaDB: fixed for one state directory, apart
    for two (below Linux's ephemeral range), so that clusters of different directories can run side by side."""
    base = 20000 + zlib.crc32(str(root).encode()) % 1500 * 8
    return {"slurmctld": base, **{n: base + 1 + i for i, n in enumerate(nodes[:MAX_NODES])},
            "slurmdbd": base + 6, "mariadb": base + 7}


def daemons(nodes: tuple[str, ...] = NODES, accounting: bool = False) -> tuple[str, ...]:
    """The daemons in start order (stop in reverse)."""
    return ("munged", *(("mariadbd", "slurmdbd") if accounting else ()), "slurmctld", *(f"slurmd-{n}" for n in nodes))


def slurm_conf(lay: Layout, user: str, shape: Shape) -> str:
    """slurm.conf for the cluster of `shape` under `lay` (pure). `%n` is the node name in slurmd's paths."""
    p, r = ports(lay.root, shape.node_names), lay.root
    accounting = ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
                  f"AccountingStoragePort={p['slurmdbd']}", "AccountingStorageEnforce=associations,limits,qos",
                  *(["AccountingStorageTRES=gres/gpu"] if shape.gres else [])] if shape.accounting else \
        ["AccountingStorageType=accounting_storage/none"]
    lines = [
        f"# Written by gen-recipe minicluster: site {shape.site}'s scheduler on this machine, everything under this directory.",
        f"ClusterName={shape.cluster}",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={p['slurmctld']}",
        f"SlurmUser={user}",
        f"SlurmdUser={user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={lay.socket}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # nodes declare the site's CPU count, more than this machine has
        "SlurmdParameters=config_overrides",
        *(["GresTypes=gpu"] if shape.gres else []),
        *(["JobSubmitPlugins=lua"] if shape.submit_rules else []),
        "SchedulerType=sched/backfill",
        # a queue of short jobs (a rehearsal): each starts as soon as the previous one ends, not seconds later
        "SchedulerParameters=batch_sched_delay=0,sched_interval=1,sched_min_interval=100000",
        "MpiDefault=none",
        "ReturnToService=2",
        "EnforcePartLimits=ALL",                         # a job that can never run is refused at once
        *accounting,
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MinJobAge=600",
        "KillWait=5",
        f"StateSaveLocation={r / 'state'}",
        f"SlurmdSpoolDir={r / 'spool-%n'}",
        # the PMIx plugin makes spmix_appdir_<uid>_<job>.<step> under TmpFS: one per node, or they clash;
        # Open MPI's session directory goes there, so a container must see it: under /tmp
        f"TmpFS={lay.tmp_root / 'tmp-%n'}",
        f"SlurmctldPidFile={lay.pidfile('slurmctld')}",
        f"SlurmdPidFile={r / 'run' / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={lay.log('slurmctld')}",
        f"SlurmdLogFile={r / 'log' / 'slurmd-%n.log'}",
        *shapes.node_lines(shape, p),
        *shapes.partition_lines(shape),
    ]
    return "\n".join(lines) + "\n"


def slurmdbd_conf(lay: Layout, user: str, shape: Shape) -> str:
    """slurmdbd.conf (pure): the database daemon of this cluster, storing into its own MariaDB on 127.0.0.1."""
    p = ports(lay.root, shape.node_names)
    return "\n".join([
        "# Written by gen-recipe minicluster: accounting for the site shapes of this cluster.",
        "AuthType=auth/munge", f"AuthInfo=socket={lay.socket}", "DbdHost=localhost", f"DbdPort={p['slurmdbd']}",
        f"SlurmUser={user}", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
        f"StoragePort={p['mariadb']}", "StorageUser=root", "StorageLoc=slurm_acct_db",
        f"PidFile={lay.pidfile('slurmdbd')}", f"LogFile={lay.log('slurmdbd')}"]) + "\n"


def conf_nodes(text: str) -> tuple[str, ...]:
    """The node names of a slurm.conf text."""
    return tuple(re.findall(r"^NodeName=(\S+)", text, re.M))


def slurm_env(state_dir: Path | str | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default os.environ) with SLURM_CONF pointing at the cluster: for sbatch, srun, squeue."""
    environ = dict(os.environ if environ is None else environ)
    return {**environ, "SLURM_CONF": str(layout(state_dir, environ).conf)}


def in_munge_namespace(lay: Layout, argv: list[str]) -> list[str]:
    """`argv` in a mount namespace of its own where this cluster's munge directory is /run/munge: Slurm's
    connections to slurmdbd authenticate through libmunge's default socket, whatever AuthInfo says."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mkdir -p /run/munge && mount --bind "$1" /run/munge && shift && exec "$@"', "sh", str(lay.socket.parent),
            *argv]


def rehearsal_env(state_dir: Path | str | None = None) -> dict[str, str]:
    """What a job of the cluster's shape needs beyond SLURM_CONF: the shape's modulefiles under Lmod, whose
    `module` a batch script's non-interactive bash gets through BASH_ENV (a site's login shell gives it), and
    the user variables the site's binds name, each a folder of its own (as the site's login sets them)."""
    lay = layout(state_dir)
    env = {"SLURM_CONF": str(lay.conf)}
    if lay.modules.is_dir():
        env.update(MODULEPATH=str(lay.modules), BASH_ENV=str(LMOD_INIT))
    if lay.site_env.is_dir():
        env.update({d.name: str(d) for d in sorted(lay.site_env.iterdir()) if d.is_dir()})
    return env


def start_argv(lay: Layout, daemon: str, accounting: bool = False) -> list[str]:
    """The command that starts `daemon` (it forks into the background and writes its pid file; mariadbd
    is started in the background by `_start`)."""
    if daemon == "munged":
        return ["munged", "--force", f"--socket={lay.socket}", f"--key-file={lay.key}",
                f"--pid-file={lay.pidfile('munged')}", f"--log-file={lay.log('munged')}",
                f"--seed-file={lay.root / 'munge' / 'munged.seed'}"]
    if daemon == "mariadbd":
        return ["mariadbd", "--no-defaults", f"--datadir={lay.root / 'db'}", "--user=root",
                f"--socket={lay.root / 'run' / 'mariadb.sock'}", f"--port={ports(lay.root)['mariadb']}",
                "--bind-address=127.0.0.1", "--skip-name-resolve", f"--pid-file={lay.pidfile('mariadbd')}",
                f"--log-error={lay.log('mariadbd')}", "--innodb-buffer-pool-size=32M", "--skip-log-bin"]
    if daemon == "slurmdbd":
        return in_munge_namespace(lay, ["slurmdbd"])
    if daemon == "slurmctld":
        argv = ["slurmctld", "-c", "-f", str(lay.conf)]     # -c: a fresh start forgets old jobs
        return in_munge_namespace(lay, argv) if accounting else argv
    if daemon.startswith("slurmd-"):
        # each node in its own mount namespace with its own /dev/shm, as on separate machines: shared
        # memory (Open MPI's segments, ch-run --join's semaphore, named by step) stays within a node; and, where the
        # shape has modules, their folder at Lmod's system module path (a job's login environment finds them)
        modules = f' && mount --bind {shlex.quote(str(lay.modules))} {SYSTEM_MODULES}' if lay.modules.is_dir() \
            and SYSTEM_MODULES.is_dir() else ""
        # and its job steps' PMIx server (slurmstepd) keeps job data in PMIx's hash store, not the shared-memory
        # dstore: on this loaded machine the dstore's lock setup crashed Open MPI 4.1's ranks at random in MPI_Init
        # (both ranks of one node, "Failing at address: (nil)"; Open MPI issue 7335, OpenPMIx issue 1114)
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                f'mount -t tmpfs -o mode=1777 shm-"$1" /dev/shm{modules} && shift && exec "$@"', "sh", daemon,
                "env", "PMIX_MCA_gds=hash", "slurmd", "-f", str(lay.conf), "-N", daemon.removeprefix("slurmd-")]
    raise ValueError(daemon)


# -- processes -----------------------------------------------------------------------------------

def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def pid_of(lay: Layout, daemon: str) -> int | None:
    """The pid of a running `daemon`, from its pid file; None when not running (or the pid is now
    another program's)."""
    try:
        pid = int(lay.pidfile(daemon).read_text().split()[0])
        program = Path(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()).name
    except (OSError, ValueError, IndexError):
        return None
    return pid if _alive(pid) and program == daemon.split("-")[0] else None


def _stepds(lay: Layout) -> list[int]:
    """slurmstepd processes of this cluster (their environment names its slurm.conf)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if not (proc / "cmdline").read_bytes().startswith(b"slurmstepd"):
                continue
            if f"SLURM_CONF={lay.conf}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _stop(*pids: int, grace: float = 10.0) -> None:
    """SIGTERM to every one of `pids` at once, then SIGKILL to those still alive after `grace` seconds."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# -- status, up, down ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Status:
    root: Path
    pids: dict[str, int | None]          # daemon -> pid (None: not running)
    nodes: dict[str, str]                # node -> Slurm state (empty when slurmctld does not answer)
    node_names: tuple[str, ...] = NODES
    shape: str = DEFAULT_SHAPE

    @property
    def up(self) -> bool:
        return all(self.pids.values()) and all(self.nodes.get(n) in READY_STATES for n in self.node_names)

    def text(self) -> str:
        p = ports(self.root, self.node_names)
        out = [f"shape      {self.shape}"]
        for d, pid in self.pids.items():
            node = d.removeprefix("slurmd-")
            extra = f" port {p[node]} {self.nodes.get(node, '?')}" if node in self.node_names else \
                f" port {p[d]}" if d in p else f" port {p['mariadb']}" if d == "mariadbd" else ""
            out.append(f"{d:<10} " + (f"running (pid {pid}){extra}" if pid else "stopped"))
        out.append(f"export SLURM_CONF={self.root / 'slurm.conf'}")
        if (self.root / "modules").is_dir():
            out.append(f"export MODULEPATH={self.root / 'modules'} BASH_ENV={LMOD_INIT}")
        site_env = Layout(self.root).site_env
        if site_env.is_dir():
            out += [f"export {d.name}={shlex.quote(str(d))}" for d in sorted(site_env.iterdir()) if d.is_dir()]
        return "\n".join(out)


def node_states(lay: Layout, timeout: float = 5.0) -> dict[str, str]:
    """node -> state as sinfo reports it ('idle', 'down*', ...); {} when slurmctld does not answer."""
    try:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=slurm_env(lay.root), capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if proc.returncode != 0:
        return {}
    return dict(ln.split(None, 1) for ln in proc.stdout.splitlines() if len(ln.split()) == 2)


def _written(lay: Layout) -> tuple[tuple[str, ...], bool, str]:
    """The nodes, whether accounting is on, and the shape of the cluster as its files say."""
    try:
        text = lay.conf.read_text()
    except OSError:
        return NODES, False, DEFAULT_SHAPE
    try:
        shape = lay.shape_file.read_text().strip() or DEFAULT_SHAPE
    except OSError:
        shape = DEFAULT_SHAPE
    return conf_nodes(text) or NODES, "accounting_storage/slurmdbd" in text, shape


def status(state_dir: Path | str | None = None) -> Status:
    lay = layout(state_dir)
    nodes, accounting, shape = _written(lay)
    pids = {d: pid_of(lay, d) for d in daemons(nodes, accounting)}
    return Status(lay.root, pids, node_states(lay) if pids["slurmctld"] else {}, nodes, shape)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"no log at {path}"
    return " | ".join(ln.strip() for ln in text[-lines:]) or f"{path} is empty"


def _user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def _missing(tools: tuple[str, ...]) -> list[str]:
    return [t for t in tools if not shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]


def missing_tools(shape: Shape | None = None) -> str | None:
    """Why the cluster (of `shape`) cannot run here, or None: `check_tools` as a reason (tests skip with it)."""
    try:
        check_tools(shape)
    except UsageError as exc:
        return str(exc)
    return None


def check_tools(shape: Shape | None = None) -> None:
    missing = _missing(TOOLS)
    if missing:
        raise UsageError(f"minicluster: {', '.join(missing)} not found (install the Debian packages: "
                          f"apt-get install {PACKAGES})")
    if shape is not None and shape.accounting and _missing(ACCOUNTING_TOOLS):
        raise UsageError(f"minicluster: shape {shape.site} enforces accounts and QOS, and "
                          f"{', '.join(_missing(ACCOUNTING_TOOLS))} is not here (apt-get install {ACCOUNTING_PACKAGES})")
    if shape is not None and shape.modules and not LMOD_INIT.is_file():
        raise UsageError(f"minicluster: shape {shape.site} loads modules, and Lmod is not here ({LMOD_INIT}; "
                          "apt-get install lmod)")
    if os.geteuid() != 0:
        raise UsageError("minicluster: slurmd must run as root to start job steps (run "
                          "`gen-recipe minicluster up` as root)")


def shape_named(name: str | None) -> Shape:
    """The shape of site `name` (a shipped site or a site file), default local-slurm's."""
    from generator.model import site as site_mod
    s = site_mod.load(name or DEFAULT_SHAPE)
    if s.host.scheduler != "slurm":
        raise UsageError(f"minicluster --shape {s.name}: site {s.name} runs {s.host.scheduler}, not Slurm "
                         "(the rehearsal cluster is Slurm; its scripts are checked against the documentation)")
    return shapes.shape_of(s, os.cpu_count() or 1)


def up(state_dir: Path | str | None = None, shape: Shape | None = None, timeout: float = 60.0) -> Status:
    """Start what is not running, on `shape`'s configuration (default local-slurm's); return once every node
    takes jobs. Idempotent; another shape than the running one restarts the controller and the nodes."""
    shape = shape or shape_named(None)
    check_tools(shape)
    lay = layout(state_dir)
    old_nodes, old_accounting, _ = _written(lay)
    lay.root.mkdir(parents=True, exist_ok=True)
    lay.root.chmod(0o755)
    _own_dir(lay.tmp_root)
    for d in lay.dirs(shape.node_names):
        d.mkdir(exist_ok=True)
    if not lay.key.exists():
        _run(["mungekey", "--create", f"--keyfile={lay.key}"], "mungekey", lay)
    user = _user()
    conf = slurm_conf(lay, user, shape)
    changed = not lay.conf.is_file() or lay.conf.read_text() != conf or _read(lay.shape_file) != shape.site + "\n"
    if changed:                      # the controller and the nodes start again on the new configuration
        _stop(*(pid for d in ("slurmctld", *(f"slurmd-{n}" for n in old_nodes)) if (pid := pid_of(lay, d))))
        (lay.root / "state" / "clustername").unlink(missing_ok=True)    # the controller starts afresh (-c) as the new cluster
    _write_shape_files(lay, user, shape)             # every time: the modules and bind sources of this very shape
    if changed:
        write_atomic(lay.conf, conf)
        write_atomic(lay.shape_file, shape.site + "\n")
    env = slurm_env(lay.root)
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
    for d in daemons(shape.node_names, shape.accounting):
        if pid_of(lay, d) is None:
            _start(lay, d, env, shape)
        if d == "slurmdbd" and (changed or not old_accounting):
            _account(lay, user, shape, env)
    _wait(lambda: all(node_states(lay).get(n) in READY_STATES for n in shape.node_names), timeout,
          "nodes not ready", lay.log("slurmctld"))
    return status(lay.root)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write_shape_files(lay: Layout, user: str, shape: Shape) -> None:
    """gres.conf and its device links, job_submit.lua, slurmdbd.conf, the bind sources, the modulefiles: what
    `shape` needs."""
    if shape.gres:
        lay.devices.mkdir(exist_ok=True)
        for i in range(max(n.gpus for n in shape.nodes)):
            link = lay.devices / f"gpu{i}"
            if not link.is_symlink():
                link.unlink(missing_ok=True)
                link.symlink_to("/dev/null")
        write_atomic(lay.root / "gres.conf", shapes.gres_conf(shape, str(lay.devices)))
    else:
        (lay.root / "gres.conf").unlink(missing_ok=True)
    if shape.submit_rules:
        write_atomic(lay.root / "job_submit.lua", shapes.job_submit_lua(shape))
    if shape.accounting:
        write_atomic(lay.root / "slurmdbd.conf", slurmdbd_conf(lay, user, shape), mode=0o600)
    for old in (lay.site_root, lay.site_env):
        if old.is_dir():
            shutil.rmtree(old)
    for name in shape.variables:
        (lay.site_env / name).mkdir(parents=True)
    for path, folder in [*((p, True) for p in shape.binds), *((p, False) for p in shape.libraries)]:
        target = lay.site_root / path.lstrip("/")
        (target if folder else target.parent).mkdir(parents=True, exist_ok=True)
        if not folder and not target.exists():
            target.touch()
    if lay.modules.is_dir():
        shutil.rmtree(lay.modules)
    for name in shape.modules:
        target = lay.modules / f"{name}.lua"
        if ".." in Path(name).parts or not target.resolve().is_relative_to(lay.modules.resolve()):
            raise CheckFailed(f"minicluster: module name {name!r} of site {shape.site} leaves {lay.modules}")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, shapes.modulefile(shape.site, name, str(lay.stubs)))


def _start(lay: Layout, daemon: str, env: Mapping[str, str], shape: Shape) -> None:
    if daemon == "mariadbd":
        if not (lay.root / "db" / "mysql").is_dir():
            _run(["mariadb-install-db", "--no-defaults", f"--datadir={lay.root / 'db'}", "--user=root",
                  "--auth-root-authentication-method=normal", "--skip-test-db"], "mariadb-install-db", lay)
        subprocess.Popen(start_argv(lay, daemon), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        port = ports(lay.root)["mariadb"]
        _wait(lambda: _answers(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "-u", "root",
                                "-e", "select 1"]), 30, "mariadbd did not answer", lay.log(daemon))
        return
    _run(start_argv(lay, daemon, shape.accounting), daemon, lay, env)
    _wait(lambda: pid_of(lay, daemon) is not None, 10, f"{daemon} did not start", lay.log(daemon))
    if daemon == "slurmdbd":
        _wait(lambda: _answers(in_munge_namespace(lay, ["sacctmgr", "-n", "list", "cluster"]), env), 30,
              "slurmdbd did not answer", lay.log(daemon))


def _answers(argv: list[str], env: Mapping[str, str] | None = None) -> bool:
    try:
        return subprocess.run(argv, env=env, capture_output=True, timeout=10, stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _account(lay: Layout, user: str, shape: Shape, env: Mapping[str, str]) -> None:
    """The shape's cluster, QOS and accounts in the database (`shape.accounting_commands`), all in one sacctmgr
    (its commands read from stdin); what exists stays ("Nothing new added")."""
    script = "".join(" ".join(cmd) + "\n" for cmd in shapes.accounting_commands(shape, user))
    proc = subprocess.run(in_munge_namespace(lay, ["sacctmgr", "-i"]), env=env, input=script, capture_output=True,
                          text=True, timeout=120)
    said = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines()
            if "error" in ln.lower() and "Nothing new added" not in ln and "already exists" not in ln]
    if proc.returncode not in (0, 1) or said:
        raise CheckFailed(f"minicluster: sacctmgr (the accounts and QOS of shape {shape.site}) failed (exit "
                          f"{proc.returncode}): {' | '.join(said[-2:]) or _tail(lay.log('slurmdbd'))}")


def _is_own_dir(path: Path) -> bool:
    """A directory (not a link to one) that this user owns."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def _own_dir(path: Path) -> None:
    """Make `path` (in a world-writable directory) ours: a directory, not a link, owned by us, mode 755."""
    try:
        path.mkdir(mode=0o755)
    except FileExistsError:
        pass
    if not _is_own_dir(path):
        raise CheckFailed(f"minicluster: {path} exists and is not a directory of ours (remove it, or start "
                          f"the cluster from another --dir)")
    path.chmod(0o755)


def _run(argv: list[str], name: str, lay: Layout, env: Mapping[str, str] | None = None) -> None:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        said = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise CheckFailed(f"minicluster: {name} failed (exit {proc.returncode}): {said or _tail(lay.log(name))}")


def _wait(ready, seconds: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise CheckFailed(f"minicluster: {what} after {seconds:g} s; {log}: {_tail(log)}")
        time.sleep(0.2)


def down(state_dir: Path | str | None = None) -> list[str]:
    """Cancel the cluster's jobs, stop its daemons and leftover step daemons; return what was stopped."""
    lay = layout(state_dir)
    nodes, accounting, _ = _written(lay)
    stopped = []
    if pid_of(lay, "slurmctld"):
        subprocess.run(["scancel", "--full", "--user", _user()], env=slurm_env(lay.root),
                       capture_output=True, timeout=30)
    for d in reversed(daemons(nodes, True)):             # the database too, whatever the last shape was
        pid = pid_of(lay, d)
        if pid:
            _stop(pid)
            stopped.append(d)
        lay.pidfile(d).unlink(missing_ok=True)
    for pid in _stepds(lay):
        _stop(pid, grace=2)
        stopped.append(f"slurmstepd {pid}")
    if _is_own_dir(lay.tmp_root):
        shutil.rmtree(lay.tmp_root, ignore_errors=True)  # steps' leftovers; `up` makes it again
    return stopped
