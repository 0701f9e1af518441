"""Launcher environment -> rank / world size / local rank, and torch.distributed set-up.

Works under torchrun, srun (Slurm), mpirun (Open MPI, MPICH, Intel MPI, MVAPICH, Cray PALS),
with mpi4py as the fallback. Standard library only at import time.
"""

import os
import re
import socket
import tempfile
from dataclasses import dataclass

# (launcher, rank variable, size variable, local-rank variables). Order matters: an mpirun
# started inside a Slurm allocation inherits SLURM_PROCID from the batch step, so the MPI
# launchers' own variables win over Slurm's; torchrun's explicit RANK wins over everything.
LAUNCHER_ENV = (
    ("torchrun", "RANK", "WORLD_SIZE", ("LOCAL_RANK",)),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_RANK",)),
    ("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", ("MV2_COMM_WORLD_LOCAL_RANK",)),
    ("pmi", "PMI_RANK", "PMI_SIZE", ("MPI_LOCALRANKID", "PALS_LOCAL_RANKID", "PMI_LOCAL_RANK")),
    ("slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", ("SLURM_LOCALID",)),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", ("SLURM_LOCALID",)),
)
DEFAULT_PORT = 29500


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    launcher: str = "none"
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_PORT
    backend: str = ""


def _mpi_comm():
    try:
        from mpi4py import MPI
    except Exception:
        return None
    return MPI.COMM_WORLD


def from_env(environ=None):
    """Rank, world size, local rank and launcher name from the launcher's environment.
    Returns None if no launcher variables are set."""
    env = os.environ if environ is None else environ
    for launcher, rank_var, size_var, local_vars in LAUNCHER_ENV:
        if rank_var in env and size_var in env:
            rank, size = int(env[rank_var]), int(env[size_var])
            local = next((int(env[v]) for v in local_vars if v in env), None)
            return DistInfo(rank=rank, world_size=size,
                            local_rank=rank if local is None else local, launcher=launcher)
    return None


def first_slurm_host(nodelist):
    """'nid[001-004,007],login1' -> 'nid001' (enough of Slurm's hostlist syntax for rank 0)."""
    m = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist or "")
    if not m:
        return None
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix
    return prefix + re.split(r"[-,]", ranges)[0]


def detect(environ=None):
    """DistInfo for this process: launcher env first, then mpi4py, then a single process."""
    env = os.environ if environ is None else environ
    info = from_env(env)
    comm = None
    if info is None:
        comm = _mpi_comm()
        if comm is not None and comm.Get_size() > 1:
            info = DistInfo(rank=comm.Get_rank(), world_size=comm.Get_size(), launcher="mpi4py")
            info.local_rank = comm.Split_type(_mpi().COMM_TYPE_SHARED).Get_rank()
        else:
            info = DistInfo()
    if "MASTER_ADDR" in env:
        info.master_addr = env["MASTER_ADDR"]
        info.master_port = int(env.get("MASTER_PORT", DEFAULT_PORT))
        return info
    info.master_port = int(env.get("MASTER_PORT", DEFAULT_PORT))
    if info.world_size == 1:
        return info
    if info.launcher != "torchrun":
        comm = comm or _mpi_comm()
        if comm is not None and comm.Get_size() == info.world_size:
            hosts = comm.allgather(socket.gethostname())
            info.master_addr = "127.0.0.1" if len(set(hosts)) == 1 else hosts[0]
            return info
        host = first_slurm_host(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"))
        if info.launcher == "slurm" and host and int(env.get("SLURM_NNODES", "1")) > 1:
            info.master_addr = host
    return info


def _mpi():
    from mpi4py import MPI
    return MPI


def init(torch, device_request):
    """Detect the launcher, pick the device (cuda:local_rank on GPUs) and call
    init_process_group (nccl -- RCCL on ROCm -- on GPUs, gloo on CPU).
    Returns (DistInfo, torch.device)."""
    from workloads.common import resolve_device
    info = detect()
    device = resolve_device(torch, device_request)
    if device.type == "cuda":
        device = torch.device("cuda", info.local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        info.backend = "nccl"
        os.environ.update(nccl_debug_env(os.environ, os.getpid()))
    else:
        info.backend = "gloo"
    if not torch.distributed.is_initialized():
        import datetime
        torch.distributed.init_process_group(
            info.backend, init_method=f"tcp://{info.master_addr}:{info.master_port}",
            rank=info.rank, world_size=info.world_size,
            timeout=datetime.timedelta(seconds=int(os.environ.get("WORKLOADS_DIST_TIMEOUT", "600"))))
    return info, device


def broadcast(torch, obj):
    """Rank 0's picklable obj on every rank."""
    if not torch.distributed.is_initialized() or torch.distributed.get_world_size() == 1:
        return obj
    box = [obj]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def finish(torch):
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


# -- which network the collectives use ---------------------------------------------------------------
# NCCL (and RCCL) say it at communicator set-up with NCCL_DEBUG=INFO: "NCCL INFO Using network Socket"
# (TCP sockets), "... Using network IB", or the plugin's name ("AWS Libfabric", "Libfabric") when the
# aws-ofi plugin carries them over libfabric ("NET/OFI Selected provider is cxi").

USING_NETWORK = re.compile(r"NCCL INFO Using network (\S[^\n]*?)\s*$", re.M)
OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([A-Za-z0-9_;+-]+)")
SOCKET_NETWORKS = ("Socket",)


def nccl_debug_env(environ, pid):
    """What makes NCCL write its set-up lines to a file of this process: nothing when the user chose
    NCCL_DEBUG (their NCCL_DEBUG_FILE, if any, is read)."""
    if environ.get("NCCL_DEBUG"):
        return {}
    return {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
            "NCCL_DEBUG_FILE": os.path.join(tempfile.gettempdir(), f"workloads-nccl-{pid}.log")}


def parse_nccl_log(text):
    """{"network", "on_fabric", "provider", "evidence"} from NCCL_DEBUG=INFO output; network None when
    NCCL did not say (no INFO lines)."""
    found = list(USING_NETWORK.finditer(text or ""))
    if not found:
        return {"network": None, "on_fabric": None, "provider": None,
                "evidence": "no 'NCCL INFO Using network' line (NCCL_DEBUG=INFO not in effect?)"}
    last = found[-1]
    network = last.group(1)
    provider = OFI_PROVIDER.search(text)
    line = text[text.rfind("\n", 0, last.start()) + 1:last.end()].strip()
    return {"network": network, "on_fabric": network not in SOCKET_NETWORKS,
            "provider": provider.group(1) if provider else None, "evidence": line[-200:]}


def collectives(torch):
    """The network torch.distributed's collectives use in this process, or None when not distributed."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return None
    return collectives_of(str(torch.distributed.get_backend()), os.environ)


def collectives_of(backend, env):
    """gloo always runs over TCP; for NCCL/RCCL: the set-up lines NCCL wrote (see nccl_debug_env)."""
    if backend == "gloo":
        iface = env.get("GLOO_SOCKET_IFNAME", "")
        return {"backend": "gloo", "network": "tcp", "on_fabric": False, "provider": None,
                "evidence": f"gloo runs over TCP sockets ({'GLOO_SOCKET_IFNAME=' + iface if iface else 'default interface'})"}
    text, path = "", env.get("NCCL_DEBUG_FILE", "")
    if path and "%" not in path:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
    return {"backend": backend, **parse_nccl_log(text)}
