"""The probes `gen-recipe detect` runs: data, one row per command, file or variable set.

Every command is read-only, needs no root and no network. The probe key is what the TOML
comments show and what a recorded output is named after (runner.fixture_name).
"""

from __future__ import annotations

from generator.detect import parsers as p
from generator.detect.runner import Probe, read_env, read_file, read_glob, read_ib_ports
from generator.model.runtimes import DETECT_ORDER, PLATFORMS

# Print what MPI mpi4py is linked against without MPI_Init (which could hang outside a job).
MPI4PY_CODE = ("import mpi4py; mpi4py.rc.initialize = mpi4py.rc.finalize = False; "
               "from mpi4py import MPI; print(MPI.Get_library_version()); print('mpi4py', mpi4py.__version__)")

# Environment variables read (module environments and Cray/Intel programming environments).
ENV_VARS = ("CRAY_MPICH_DIR", "CRAY_MPICH_PREFIX", "CRAY_MPICH_ROOTDIR", "CRAY_MPICH_BASEDIR", "CRAY_MPICH_VERSION",
            "I_MPI_ROOT", "LOADEDMODULES", "LMOD_VERSION", "MODULESHOME", "ROCM_PATH", "DOCKER_HOST")

HOST = (
    Probe("/etc/os-release", p.os_release, read=read_file("/etc/os-release")),
    Probe("uname -m", p.uname_m, ("uname", "-m")),
    Probe("/proc/cpuinfo", p.cpuinfo, read=read_file("/proc/cpuinfo")),
    Probe("/proc/sys/kernel/hostname", p.hostname, read=read_file("/proc/sys/kernel/hostname")),
    Probe("environment", p.environment, read=read_env(*ENV_VARS)),
)
SCHEDULER = (
    Probe("srun --version", p.srun_version, ("srun", "--version")),
    Probe("srun --mpi=list", p.srun_mpi_list, ("srun", "--mpi=list")),
    Probe("srun --help", p.srun_help, ("srun", "--help")),
    Probe("qstat --version", p.qstat_version, ("qstat", "--version")),
    Probe("lsid", p.lsid, ("lsid",)),
)
# Order matters: the first flavour found is the host MPI; later ones only confirm it or warn.
MPI = (
    Probe("mpirun --version", p.mpirun_version, ("mpirun", "--version")),
    Probe("ompi_info", p.ompi_info, ("ompi_info",)),
    Probe("mpichversion", p.mpichversion, ("mpichversion",)),
    Probe("impi_info", p.impi_info, ("impi_info",)),
    Probe("ldconfig -p", p.ldconfig, ("ldconfig", "-p")),
    Probe("python3 -c mpi4py", p.mpi_library_version, ("python3", "-c", MPI4PY_CODE)),
)
FABRIC = (
    Probe("/sys/class/infiniband", p.ib_ports, read=read_ib_ports),
    Probe("/dev/cxi*", p.device_list("fabric.cxi_devices"), read=read_glob("/dev/cxi*")),
    Probe("/dev/hfi1_*", p.device_list("fabric.hfi_devices"), read=read_glob("/dev/hfi1_*")),
    Probe("fi_info -l", p.fi_info_list, ("fi_info", "-l")),
    Probe("fi_info --version", p.fi_info_version, ("fi_info", "--version")),
    Probe("ucx_info -v", p.ucx_info, ("ucx_info", "-v")),
)
GPU = (
    Probe("nvidia-smi --query-gpu", p.nvidia_query,
          ("nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader")),
    Probe("nvidia-smi", p.nvidia_smi, ("nvidia-smi",)),
    Probe("nvcc --version", p.nvcc_version, ("nvcc", "--version")),
    Probe("rocm-smi --showproductname", p.rocm_smi_product, ("rocm-smi", "--showproductname")),
    Probe("amd-smi static --asic", p.amd_smi_static, ("amd-smi", "static", "--asic")),
    Probe("amd-smi version", p.amd_smi_version, ("amd-smi", "version")),
    Probe("/opt/rocm/.info/version", p.rocm_version_file, read=read_file("/opt/rocm/.info/version")),
    Probe("/dev/nvidia*", p.device_list("gpu.nvidia_devices"), read=read_glob("/dev/nvidia[0-9]*")),
    Probe("/dev/kfd", p.device_list("gpu.amd_devices"), read=read_glob("/dev/kfd")),
)
# One version probe per runtime of the registry (its `Platform.probe`), then Docker's daemon socket.
RUNTIMES = tuple(Probe(r.probe.key, getattr(p, r.probe.parser) if r.probe.parser
                       else p.runtime_version(r.probe.clue or r.name, r.probe.version), r.probe.command)
                 for r in PLATFORMS.values()) + (
    Probe("docker.sock", p.device_list("runtimes.docker_daemon"),
          read=read_glob("/var/run/docker.sock", "/run/docker.sock")),
)
PROBES = HOST + SCHEDULER + MPI + FABRIC + GPU + RUNTIMES

# Container runtimes the schema knows, in the order `detect` prefers one as the default.
RUNTIME_ORDER = DETECT_ORDER
