"""Run a two-node Slurm cluster on this machine: slurmctld, two slurmd (n1, n2) and munged.

    gen-recipe minicluster up|down|status [--dir DIR]

Everything lives under one state directory (default `build/minicluster/`, or $GEN_RECIPE_MINICLUSTER):
slurm.conf, the munge key and socket, pid files, logs, the controller's state and each node's spool.
Use it with `export SLURM_CONF=DIR/slurm.conf` (printed by `up` and `status`); the `local-slurm` site
describes it. `up` and `down` are idempotent. Both slurmd run on 127.0.0.1 with their own ports; each
has its own TmpFS (`tmp-n1/`, `tmp-n2/`), where the PMIx plugin puts the per-step directories
(`srun --mpi=pmix` across both nodes needs them apart). The TmpFS directories are under /tmp
(`/tmp/gen-recipe-minicluster-<hash of the state directory>/`), because containers (ch-run) share the
machine's /tmp and Open MPI keeps its session directory in the step's directory there.

For tests:  up(path) -> Status,  down(path) -> list of stopped daemons,  status(path) -> Status,
slurm_env(path) -> the environment for sbatch/srun. The config text comes from pure functions.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from generator.errors import CheckFailed, UsageError
from generator.files import write_atomic

NODES = ("n1", "n2")
ENV_VAR = "GEN_RECIPE_MINICLUSTER"
DEFAULT_DIR = Path("build") / "minicluster"
TMP = Path("/tmp")
TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "scontrol", "unshare", "mount")
PACKAGES = "slurm-wlm slurm-wlm-basic-plugins munge"
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
        return self.root / "munge" / "munge.socket"

    def pidfile(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    def log(self, daemon: str) -> Path:
        return self.root / "log" / f"{daemon}.log"

    @property
    def tmp_root(self) -> Path:
        """The nodes' TmpFS directories go here: under /tmp, which containers share."""
        return TMP / f"gen-recipe-minicluster-{zlib.crc32(str(self.root).encode()):08x}"

    def dirs(self) -> list[Path]:
        return [self.root / d for d in ("munge", "run", "log", "state", *(f"spool-{n}" for n in NODES))] + \
            [self.tmp_root / f"tmp-{n}" for n in NODES]


def layout(state_dir: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Layout:
    """The layout for `state_dir`, else $GEN_RECIPE_MINICLUSTER, else build/minicluster (absolute)."""
    environ = os.environ if environ is None else environ
    chosen = state_dir or environ.get(ENV_VAR) or DEFAULT_DIR
    return Layout(Path(chosen).expanduser().absolute())


def ports(root: Path) -> dict[str, int]:
    """Ports of slurmctld and the two slurmd: fixed for one state directory, apart for two (below
    Linux's ephemeral range), so that clusters of different directories can run side by side."""
    base = 20000 + zlib.crc32(str(root).encode()) % 4000 * 3
    return {"slurmctld": base, **{n: base + 1 + i for i, n in enumerate(NODES)}}


def daemons() -> tuple[str, ...]:
    """The daemons in start order (stop in reverse)."""
    return ("munged", "slurmctld", *(f"slurmd-{n}" for n in NODES))


def slurm_conf(lay: Layout, user: str, cpus: int) -> str:
    """slurm.conf for the cluster under `lay` (pure). `%n` is the node name in slurmd's paths."""
    p, r = ports(lay.root), lay.root
    lines = [
        "# Written by gen-recipe minicluster: two slurmd on this machine, everything under this directory.",
        "ClusterName=minicluster",
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
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        "EnforcePartLimits=ALL",                         # a job that can never run is refused at once
        "AccountingStorageType=accounting_storage/none",
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
        *(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p[n]} CPUs={cpus} State=UNKNOWN"
          for n in NODES),
        f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def slurm_env(state_dir: Path | str | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default os.environ) with SLURM_CONF pointing at the cluster: for sbatch, srun, squeue."""
    environ = dict(os.environ if environ is None else environ)
    return {**environ, "SLURM_CONF": str(layout(state_dir, environ).conf)}


def start_argv(lay: Layout, daemon: str) -> list[str]:
    """The command that starts `daemon` (it forks into the background and writes its pid file)."""
    if daemon == "munged":
        return ["munged", "--force", f"--socket={lay.socket}", f"--key-file={lay.key}",
                f"--pid-file={lay.pidfile('munged')}", f"--log-file={lay.log('munged')}",
                f"--seed-file={lay.root / 'munge' / 'munged.seed'}"]
    if daemon == "slurmctld":
        return ["slurmctld", "-c", "-f", str(lay.conf)]     # -c: a fresh start forgets old jobs
    if daemon.startswith("slurmd-"):
        # each node in its own mount namespace with its own /dev/shm, as on separate machines: shared
        # memory (Open MPI's segments, ch-run --join's semaphore, named by step) stays within a node
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                'mount -t tmpfs -o mode=1777 shm-"$1" /dev/shm && shift && exec "$@"', "sh", daemon,
                "slurmd", "-f", str(lay.conf), "-N", daemon.removeprefix("slurmd-")]
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


def _stop(pid: int, grace: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
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

    @property
    def up(self) -> bool:
        return all(self.pids.values()) and all(self.nodes.get(n) in READY_STATES for n in NODES)

    def text(self) -> str:
        p = ports(self.root)
        out = []
        for d in daemons():
            pid = self.pids[d]
            node = d.removeprefix("slurmd-")
            extra = f" port {p[node]} {self.nodes.get(node, '?')}" if node in NODES else \
                f" port {p[d]}" if d in p else ""
            out.append(f"{d:<10} " + (f"running (pid {pid}){extra}" if pid else "stopped"))
        out.append(f"export SLURM_CONF={self.root / 'slurm.conf'}")
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


def status(state_dir: Path | str | None = None) -> Status:
    lay = layout(state_dir)
    pids = {d: pid_of(lay, d) for d in daemons()}
    return Status(lay.root, pids, node_states(lay) if pids["slurmctld"] else {})


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"no log at {path}"
    return " | ".join(ln.strip() for ln in text[-lines:]) or f"{path} is empty"


def _user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def check_tools() -> None:
    missing = [t for t in TOOLS if not shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
    if missing:
        raise UsageError(f"minicluster: {', '.join(missing)} not found (install the Debian packages: "
                          f"apt-get install {PACKAGES})")
    if os.geteuid() != 0:
        raise UsageError("minicluster: slurmd must run as root to start job steps (run "
                          "`gen-recipe minicluster up` as root)")


def up(state_dir: Path | str | None = None, timeout: float = 60.0) -> Status:
    """Start what is not running; return once both nodes take jobs. Idempotent."""
    check_tools()
    lay = layout(state_dir)
    lay.root.mkdir(parents=True, exist_ok=True)
    lay.root.chmod(0o755)
    _own_dir(lay.tmp_root)
    for d in lay.dirs():
        d.mkdir(exist_ok=True)
    if not lay.key.exists():
        _run(["mungekey", "--create", f"--keyfile={lay.key}"], "mungekey", lay)
    conf = slurm_conf(lay, _user(), os.cpu_count() or 1)
    if not lay.conf.is_file() or lay.conf.read_text() != conf:
        write_atomic(lay.conf, conf)
    env = slurm_env(lay.root)
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
    for d in daemons():
        if pid_of(lay, d) is None:
            _run(start_argv(lay, d), d, lay, env)
            _wait(lambda d=d: pid_of(lay, d) is not None, 10, f"{d} did not start", lay.log(d))
    _wait(lambda: all(node_states(lay).get(n) in READY_STATES for n in NODES), timeout,
          "nodes not ready", lay.log("slurmctld"))
    return status(lay.root)


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
    stopped = []
    if pid_of(lay, "slurmctld"):
        subprocess.run(["scancel", "--full", "--user", _user()], env=slurm_env(lay.root),
                       capture_output=True, timeout=30)
    for d in reversed(daemons()):
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



