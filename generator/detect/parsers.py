"""Pure parsers: the text one probe printed (or read) -> clues. No I/O, no state.

Each parser returns [] for text it does not understand; formats follow the tools' documented
output (examples under tests/fixtures/detect/).
"""

from __future__ import annotations

import re

from generator.model.site import Version
from generator.detect.runner import Clue

ARCHES = ("x86_64", "aarch64", "ppc64le")
LIBMPI_ABI = {"12": "mpich", "40": "openmpi", "20": "openmpi"}  # libmpi.so.N soname -> ABI family


def version(text: str) -> str | None:
    """A schema Version out of a tool's version word: 'v4.1.4' -> '4.1.4', '1.19.0amzn3.0' -> '1.19.0'."""
    text = text.strip().lstrip("vV")
    if Version.PATTERN.match(text):
        return text
    m = re.match(r"[0-9]+(?:\.[0-9]+){0,3}", text)
    return m.group() if m else None


def _search(pattern: str, text: str, flags: int = 0) -> re.Match | None:
    return re.search(pattern, text, flags | re.MULTILINE)


def _line(text: str, m: re.Match) -> str:
    """The whole output line a match sits on."""
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start:end if end >= 0 else None].strip()


def _clue(key: str, value, text: str, m: re.Match) -> list[Clue]:
    return [Clue(key, value, _line(text, m))] if value not in (None, "", ()) else []


# -- host -------------------------------------------------------------------------------

def os_release(text: str) -> list[Clue]:
    out = []
    for key, field in (("host.os", "ID"), ("host.os_version", "VERSION_ID"), ("host.os_like", "ID_LIKE"),
                       ("host.os_name", "PRETTY_NAME")):
        m = _search(rf"^{field}=\"?([^\"\n]*)\"?\s*$", text)
        if m:
            out += _clue(key, m.group(1).strip(), text, m)
    return out if any(c.key == "host.os" for c in out) else []


def uname_m(text: str) -> list[Clue]:
    m = _search(r"^\s*(\S+)\s*$", text)
    arch = {"arm64": "aarch64"}.get(m.group(1), m.group(1)) if m else None
    return _clue("host.arch", arch, text, m) if arch in ARCHES else []


def cpuinfo(text: str) -> list[Clue]:
    out = []
    m = _search(r"^(?:model name|cpu model|Model)\s*:\s*(.+)$", text)
    if m:
        out += _clue("host.cpu", m.group(1).strip(), text, m)
    sockets = set(re.findall(r"^physical id\s*:\s*([0-9]+)", text, re.MULTILINE))
    per = _search(r"^cpu cores\s*:\s*([0-9]+)", text)
    n = len(re.findall(r"^processor\s*:", text, re.MULTILINE))
    if sockets and per:  # physical cores (x86): sockets x 'cpu cores'; SMT siblings do not count
        cores = len(sockets) * int(per.group(1))
        out.append(Clue("host.cores_per_node", cores, f"{len(sockets)} socket(s) x cpu cores: {per.group(1)} "
                        f"({n} logical CPUs)"))
    elif n:
        out.append(Clue("host.cores_per_node", n, f"{n} 'processor' entries"))
    return out


def hostname(text: str) -> list[Clue]:
    m = _search(r"^\s*([A-Za-z0-9][A-Za-z0-9.-]*)\s*$", text)
    return _clue("host.hostname", m.group(1) if m else None, text, m) if m else []


# -- scheduler and launcher -------------------------------------------------------------

def srun_version(text: str) -> list[Clue]:
    m = _search(r"^slurm(?:-wlm)?\s+([0-9]\S*)", text)
    return _clue("host.scheduler", "slurm", text, m) + _clue("host.scheduler_version", m.group(1), text, m) if m else []


def srun_mpi_list(text: str) -> list[Clue]:
    """`srun --mpi=list`: 'MPI plugin types are...' (new) or 'srun: MPI types are...' (old), one a line."""
    if not _search(r"MPI (?:plugin )?types are", text):
        return []
    names = []
    for raw in text.splitlines():
        word = re.sub(r"^srun:\s*", "", raw).strip()
        m = re.match(r"specific pmix plugin versions available:\s*(.+)", word)
        if m:
            names += [w.strip() for w in m.group(1).split(",")]
        elif re.fullmatch(r"[a-z][a-z0-9_]*", word):
            names.append(word)
    names = tuple(dict.fromkeys(names))
    return [Clue("mpi.pmi_plugins", names, "plugins: " + ", ".join(names))] if names else []


def srun_help(text: str) -> list[Clue]:
    """Pyxis adds --container-image to srun; the CSCS container engine adds --environment (EDF).
    Value: the option found, or "" when srun's help shows neither."""
    m = _search(r"--container-image|--environment[=\s]", text)
    if m:
        return [Clue("runtimes.pyxis", m.group().strip("= "), _line(text, m))]
    return [Clue("runtimes.pyxis", "", "no --container-image or --environment option (no pyxis)")] \
        if _search(r"^Usage: srun", text) else []


def qstat_version(text: str) -> list[Clue]:
    m = _search(r"pbs_version\s*=\s*(\S+)", text)
    if m:
        return _clue("host.scheduler", "pbs", text, m) + _clue("host.scheduler_version", m.group(1), text, m)
    m = _search(r"^Version:\s*([0-9]\S*)", text)  # Torque
    return _clue("host.scheduler", "torque", text, m) + _clue("host.scheduler_version", m.group(1), text, m) if m else []


def lsid(text: str) -> list[Clue]:
    m = _search(r"(?:IBM Spectrum|Platform) LSF[^0-9]*?([0-9][0-9.]*)", text)
    return _clue("host.scheduler", "lsf", text, m) + _clue("host.scheduler_version", m.group(1), text, m) if m else []


# -- MPI --------------------------------------------------------------------------------

def _mpi(flavour: str, ver: str | None, text: str, m: re.Match) -> list[Clue]:
    return _clue("mpi.flavour", flavour, text, m) + _clue("mpi.version", version(ver or ""), text, m)


def _intel_version(year: str, rest: str | None, update: str | None) -> str:
    return year + (rest or "") + (f".{update}" if update else "")


def mpirun_version(text: str) -> list[Clue]:
    """Open MPI: 'mpirun (Open MPI) 4.1.4'; Intel MPI: '... OS, Version 2021.9 Build ...' or
    'Version 2019 Update 12 Build ...'; MPICH (Hydra): 'HYDRA build details: / Version: 4.1.2'."""
    m = _search(r"\(Open MPI\)\s+(\S+)", text)
    if m:
        return _mpi("openmpi", m.group(1), text, m)
    m = _search(r"Intel\(R\) MPI Library.*?Version ([0-9]{4})((?:\.[0-9]+)*)(?: Update ([0-9]+))?", text)
    if m:
        return _mpi("intel-mpi", _intel_version(*m.groups()), text, m)
    if "HYDRA build details" in text:
        m = _search(r"^\s*Version:\s*(\S+)", text)
        return _mpi("mpich", m.group(1), text, m) if m else []
    return []


def ompi_info(text: str) -> list[Clue]:
    m = _search(r"^\s*Open MPI:\s*(\S+)", text)
    if not m:
        return []
    out = _mpi("openmpi", m.group(1), text, m)
    p = _search(r"^\s*Prefix:\s*(\S+)", text)
    if p:
        out += _clue("mpi.install_path", p.group(1), text, p)
    comps = tuple(dict.fromkeys(f"{a}:{b}" for a, b in re.findall(r"MCA (pml|mtl|btl): (\w+)", text)))
    if comps:
        out.append(Clue("mpi.ompi_components", comps, "MCA " + ", ".join(comps)))
    return out


def mpichversion(text: str) -> list[Clue]:
    m = _search(r"^MPICH Version:\s*(\S+)", text)
    if not m:
        return []
    out = _mpi("mpich", m.group(1), text, m)
    p = _search(r"--prefix=(\S+)", text)
    if p:
        out += _clue("mpi.install_path", p.group(1).strip("'\""), text, p)
    return out


def impi_info(text: str) -> list[Clue]:
    """impi_info lists Intel MPI's I_MPI_* variables; it carries no version."""
    m = _search(r"\bI_MPI_\w+", text)
    return _clue("mpi.flavour", "intel-mpi", text, m) if m else []


def mpi_library_version(text: str) -> list[Clue]:
    """MPI_Get_library_version() as printed by mpi4py (see MPI4PY_CODE in table.py)."""
    m = _search(r"CRAY MPICH version (\S+)", text)
    if m:
        return _mpi("cray-mpich", m.group(1), text, m)
    m = _search(r"Open MPI v([0-9]\S*?),", text)
    if m:
        return _mpi("openmpi", m.group(1), text, m)
    m = _search(r"Intel\(R\) MPI Library ([0-9]{4})((?:\.[0-9]+)*)(?: Update ([0-9]+))?", text)
    if m:
        return _mpi("intel-mpi", _intel_version(*m.groups()), text, m)
    m = _search(r"^(?:MPICH|MVAPICH2?) Version:\s*(\S+)", text)
    return _mpi("mpich", m.group(1), text, m) if m else []


def ldconfig(text: str) -> list[Clue]:
    """`ldconfig -p`: libmpi.so.12 = MPICH ABI, libmpi.so.40 = Open MPI ABI; libmpi_cray = Cray MPICH."""
    out = []
    m = _search(r"^\s*libmpi(?:_cray)?\.so\.([0-9]+)\s.*=>\s*(\S+)", text)
    if m and m.group(1) in LIBMPI_ABI:
        out += _clue("mpi.abi", LIBMPI_ABI[m.group(1)], text, m)
    m = _search(r"^\s*libfabric\.so\.1\s.*=>\s*(\S+)", text)
    if m:
        out += _clue("fabric.libfabric_lib", m.group(1), text, m)
    return out


CRAY_MPICH_PATH = r"(/\S*?/mpich/([0-9]+\.[0-9]+\.[0-9]+[0-9.]*))"
INTEL_MPI_PATH = r"(\S*?(?:mpi|impi)/(20[0-9][0-9](?:\.[0-9]+)+))"


def environment(text: str) -> list[Clue]:
    """NAME=value lines of the variables in table.ENV_VARS (module environment)."""
    out = []
    for m in re.finditer(r"^CRAY_MPICH_(?:DIR|PREFIX|ROOTDIR|BASEDIR)=" + CRAY_MPICH_PATH, text, re.MULTILINE):
        out += _mpi("cray-mpich", m.group(2), text, m) + _clue("mpi.install_path", m.group(1), text, m)
        break
    m = _search(r"^CRAY_MPICH_VERSION=(\S+)", text)
    if m:
        out += _mpi("cray-mpich", m.group(1), text, m)
    m = _search(r"^I_MPI_ROOT=" + INTEL_MPI_PATH, text)
    if m:
        out += _mpi("intel-mpi", m.group(2), text, m) + _clue("mpi.install_path", m.group(1), text, m)
    elif (m := _search(r"^I_MPI_ROOT=(\S+)", text)):
        out += _clue("mpi.flavour", "intel-mpi", text, m) + _clue("mpi.install_path", m.group(1), text, m)
    m = _search(r"^LOADEDMODULES=(.+)$", text)
    if m:
        out += _clue("host.modules", tuple(x for x in m.group(1).split(":") if x), text, m)
    m = _search(r"^LMOD_VERSION=(\S+)", text)
    if m:
        out += _clue("host.module_system", f"Lmod {m.group(1)}", text, m)
    elif (m := _search(r"^MODULESHOME=(\S+)", text)):
        out += _clue("host.module_system", f"environment modules ({m.group(1)})", text, m)
    m = _search(r"^ROCM_PATH=(\S+)", text)
    if m:
        out += _clue("gpu.rocm_path", m.group(1), text, m)
    m = _search(r"^DOCKER_HOST=(\S+)", text)
    if m:
        out += _clue("runtimes.docker_daemon", m.group(1), text, m)
    return out


# -- fabric -----------------------------------------------------------------------------

def fi_info_list(text: str) -> list[Clue]:
    """`fi_info -l`: 'name:' lines, each followed by an indented 'version: N'."""
    names = tuple(dict.fromkeys(n.split(";")[0] for n in re.findall(r"^([a-z][\w;]*):\s*$", text, re.MULTILINE)))
    return [Clue("fabric.fi_providers", names, "providers: " + ", ".join(names))] if names else []


def fi_info_version(text: str) -> list[Clue]:
    m = _search(r"^libfabric:\s*(\S+)", text)
    return _clue("fabric.libfabric_version", version(m.group(1)), text, m) if m else []


def ucx_info(text: str) -> list[Clue]:
    """'# Library version: 1.15.0' (UCX >= 1.13) or '# UCT version=1.11.1 revision ...' (older)."""
    m = _search(r"#\s*(?:Library version:|UCT version=|Version)\s*([0-9]\S*)", text)
    return _clue("fabric.ucx_version", version(m.group(1)), text, m) if m else []


def device_list(key: str):
    """Parser for a glob reader: the matching paths."""
    def parse(text: str) -> list[Clue]:
        paths = tuple(ln.strip() for ln in text.splitlines() if re.fullmatch(r"/\S+", ln.strip()))
        return [Clue(key, paths, ", ".join(paths[:4]) + (" ..." if len(paths) > 4 else ""))] if paths else []
    return parse


def ib_ports(text: str) -> list[Clue]:
    """'/sys/class/infiniband/mlx5_0/ports/1/link_layer: InfiniBand' lines -> 'mlx5_0:InfiniBand'."""
    devs = []
    for m in re.finditer(r"^/sys/class/infiniband/([^/\s]+)\S*:\s*(\S*)", text, re.MULTILINE):
        devs.append(f"{m.group(1)}:{m.group(2) or 'unknown'}")
    devs = tuple(dict.fromkeys(devs))
    return [Clue("fabric.ib_devices", devs, ", ".join(devs))] if devs else []


# -- GPUs -------------------------------------------------------------------------------

def nvidia_query(text: str) -> list[Clue]:
    """`nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader`."""
    rows = [[f.strip() for f in ln.split(",")] for ln in text.splitlines() if ln.count(",") == 2]
    rows = [r for r in rows if re.fullmatch(r"[0-9]+\.[0-9]+", r[2])]
    if not rows:
        return []
    name, driver, cap = rows[0]
    line = ", ".join(rows[0])
    model = re.sub(r"^(?:NVIDIA\s+)?(?:Tesla\s+)?", "", name)
    return [Clue("gpu.vendor", "nvidia", line), Clue("gpu.model", model, line),
            Clue("gpu.count_per_node", len(rows), f"{len(rows)} GPU line(s)"), Clue("gpu.driver", driver, line),
            Clue("gpu.arch", "sm_" + cap.replace(".", ""), line)]


def nvidia_smi(text: str) -> list[Clue]:
    """Plain `nvidia-smi` header: 'Driver Version: 535.104.05   CUDA Version: 12.2'."""
    out = []
    for key, pattern in (("gpu.driver", r"Driver Version:\s*(\S+)"), ("gpu.cuda_driver", r"CUDA Version:\s*([0-9]+\.[0-9]+)")):
        m = _search(pattern, text)
        if m:  # without the table's box characters
            out.append(Clue(key, m.group(1), re.sub(r"\s*\|\s*", " ", _line(text, m)).strip()))
    return out


def nvcc_version(text: str) -> list[Clue]:
    m = _search(r"release ([0-9]+\.[0-9]+)", text)
    return _clue("gpu.cuda_toolkit", m.group(1), text, m) if m else []


def rocm_smi_product(text: str) -> list[Clue]:
    """`rocm-smi --showproductname`: 'GPU[0] : Card series: AMD Instinct MI250X' ... 'GFX Version: gfx90a'."""
    series = re.findall(r"^GPU\[([0-9]+)\]\s*:\s*Card [Ss]eries:\s*(.+?)\s*$", text, re.MULTILINE)
    if not series:
        return []
    m = _search(r"Card [Ss]eries:\s*(.+?)\s*$", text)
    out = [Clue("gpu.vendor", "amd", _line(text, m))] + _clue("gpu.model", m.group(1), text, m)
    out.append(Clue("gpu.count_per_node", len({i for i, _ in series}), f"{len(series)} 'Card series' lines"))
    g = _search(r"GFX Version:\s*(gfx\w+)", text)
    return out + (_clue("gpu.arch", g.group(1), text, g) if g else [])


def amd_smi_static(text: str) -> list[Clue]:
    """`amd-smi static --asic`: 'GPU: 0' blocks with 'MARKET_NAME:' and 'TARGET_GRAPHICS_VERSION:'."""
    gpus = re.findall(r"^GPU:\s*([0-9]+)", text, re.MULTILINE)
    m = _search(r"MARKET_NAME:\s*(.+?)\s*$", text)
    if not gpus or not m:
        return []
    out = [Clue("gpu.vendor", "amd", _line(text, m))] + _clue("gpu.model", m.group(1), text, m)
    out.append(Clue("gpu.count_per_node", len(set(gpus)), f"{len(set(gpus))} 'GPU:' blocks"))
    g = _search(r"TARGET_GRAPHICS_VERSION:\s*(gfx\w+)", text)
    return out + (_clue("gpu.arch", g.group(1), text, g) if g else [])


def amd_smi_version(text: str) -> list[Clue]:
    m = _search(r"ROCm version:\s*([0-9][0-9.]*)", text)
    return _clue("gpu.rocm_version", version(m.group(1)), text, m) if m else []


def rocm_version_file(text: str) -> list[Clue]:
    """/opt/rocm/.info/version: '6.2.4-139' -> 6.2.4."""
    m = _search(r"^\s*([0-9]+\.[0-9]+(?:\.[0-9]+)?)", text)
    return _clue("gpu.rocm_version", m.group(1), text, m) if m else []


# -- container runtimes -----------------------------------------------------------------

def runtime_version(name: str, pattern: str):
    """Parser for '<tool> --version': the first group of `pattern` is the version."""
    def parse(text: str) -> list[Clue]:
        m = _search(pattern, text)
        return _clue(f"runtimes.{name}", version(m.group(1)), text, m) if m else []
    return parse


def singularity_version(text: str) -> list[Clue]:
    """'singularity-ce version 4.1.3-...', 'singularity version 3.8.7' or, for Apptainer's
    compatibility link, 'apptainer version 1.3.6' (then it is Apptainer)."""
    m = _search(r"^(apptainer|singularity(?:-ce)?) version (\S+)", text)
    if not m:
        return []
    name = "apptainer" if m.group(1) == "apptainer" else "singularity"
    return _clue(f"runtimes.{name}", version(m.group(2)), text, m)


def podman_hpc_version(text: str) -> list[Clue]:
    """podman-hpc has no version option of its own: '--version' may reach podman; then only
    its presence is known."""
    m = _search(r"podman-hpc,? version (\S+)", text)
    if m:
        return _clue("runtimes.podman-hpc", version(m.group(1)), text, m)
    m = _search(r"podman version (\S+)", text)
    return [Clue("runtimes.podman-hpc", "", _line(text, m))] if m else []


def docker_version(text: str) -> list[Clue]:
    """'Docker version 28.2.2, build e6534b4'; podman-docker's emulation is podman, not Docker."""
    if "podman" in text.lower():
        return []
    m = _search(r"Docker version (\S+?),?\s", text + " ")
    return _clue("runtimes.docker_client", version(m.group(1)), text, m) if m else []
