"""Pure parsers: documented output formats of each tool -> clues; anything else -> nothing, never an error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.detect import parsers as p
from generator.detect.table import PROBES


def facts(clues) -> dict:
    return {c.key: c.value for c in clues}


@pytest.mark.parametrize("text, flavour, version", [
    ("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n", "openmpi", "4.1.4"),
    ("mpirun (Open MPI) 5.0.6\n\nReport bugs to https://www.open-mpi.org/community/help/\n", "openmpi", "5.0.6"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.9 Build 20230307 (id: d82b3071db)\n"
     "Copyright 2003-2023, Intel Corporation.\n", "intel-mpi", "2021.9"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.12 Build 20240213 (id: 4f55822)\n", "intel-mpi", "2021.12"),
    ("Intel(R) MPI Library for Linux* OS, Version 2019 Update 2 Build 20190123 (id: e2d820d49)\n"
     "Copyright 2003-2019, Intel Corporation.\n", "intel-mpi", "2019.2"),
    ("HYDRA build details:\n    Version:                                 4.1.2\n"
     "    Release Date:                            Wed Jun  7 15:22:45 CDT 2023\n", "mpich", "4.1.2"),
])
def test_mpirun_version(text, flavour, version):
    assert facts(p.mpirun_version(text)) == {"mpi.flavour": flavour, "mpi.version": version}


@pytest.mark.parametrize("text, flavour, version", [
    ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022", "openmpi", "4.1.4"),
    ("Open MPI v4.0.1, package: Spectrum MPI Distribution, ident: 4.0.1, repo rev: v4.0.1, Mar 26, 2019",
     "openmpi", "4.0.1"),
    ("MPI VERSION    : CRAY MPICH version 8.1.25.17 (ANL base 3.4a2)\nMPI BUILD INFO : Sun Feb 26 15:15 2023",
     "cray-mpich", "8.1.25.17"),
    ("Intel(R) MPI Library 2021.9 for Linux* OS\n", "intel-mpi", "2021.9"),
    ("Intel(R) MPI Library 2019 Update 7 for Linux* OS\n", "intel-mpi", "2019.7"),
    ("MPICH Version:\t4.1.2\nMPICH Release date:\tWed Jun  7 15:22:45 CDT 2023\nMPICH ABI:\t15:1:3\n", "mpich", "4.1.2"),
])
def test_mpi_library_version(text, flavour, version):
    assert facts(p.mpi_library_version(text + "\nmpi4py 4.0.1\n")) == {"mpi.flavour": flavour, "mpi.version": version}


def test_mpichversion_and_cray_base_version():
    text = ("MPICH Version:      4.3.2\nMPICH Release date: Mon Oct  6 11:14:20 AM CDT 2025\nMPICH ABI:          17:2:5\n"
            "MPICH Device:       ch4:ofi\nMPICH configure:    --prefix=/opt/mpich-4.3.2 --with-device=ch4:ofi\n")
    assert facts(p.mpichversion(text)) == {"mpi.flavour": "mpich", "mpi.version": "4.3.2",
                                           "mpi.install_path": "/opt/mpich-4.3.2"}
    assert facts(p.mpichversion("MPICH Version:    \t3.4a2\n"))["mpi.version"] == "3.4"  # Cray's ANL base


def test_ompi_info_version_prefix_and_components():
    text = ("                Open MPI: 4.1.4\n                  Prefix: /usr\n"
            "                 MCA pml: ucx (MCA v2.1.0, API v2.0.0, Component v4.1.4)\n"
            "                 MCA mtl: psm2 (MCA v2.1.0, API v2.0.0, Component v4.1.4)\n")
    got = facts(p.ompi_info(text))
    assert got["mpi.version"] == "4.1.4" and got["mpi.install_path"] == "/usr"
    assert got["mpi.ompi_components"] == ("pml:ucx", "mtl:psm2")


def test_ldconfig_abi_families():
    assert facts(p.ldconfig("\tlibmpi.so.12 (libc6,x86-64) => /usr/lib64/mpich/lib/libmpi.so.12\n")) == {"mpi.abi": "mpich"}
    assert facts(p.ldconfig("\tlibmpi.so.40 (libc6,AArch64) => /usr/lib/libmpi.so.40\n")) == {"mpi.abi": "openmpi"}
    assert p.ldconfig("\tlibmpich.so.12 (libc6,x86-64) => /usr/lib/libmpich.so.12\n") == []


def test_environment_module_variables():
    got = facts(p.environment("I_MPI_ROOT=/opt/intel/oneapi/mpi/2021.9.0\nLOADEDMODULES=gcc/12:intel-oneapi-mpi/2021.9.0\n"
                              "LMOD_VERSION=8.7.32\n"))
    assert got == {"mpi.flavour": "intel-mpi", "mpi.version": "2021.9.0", "mpi.install_path": "/opt/intel/oneapi/mpi/2021.9.0",
                   "host.modules": ("gcc/12", "intel-oneapi-mpi/2021.9.0"), "host.module_system": "Lmod 8.7.32"}
    latest = facts(p.environment("I_MPI_ROOT=/opt/intel/oneapi/mpi/latest\n"))
    assert latest == {"mpi.flavour": "intel-mpi", "mpi.install_path": "/opt/intel/oneapi/mpi/latest"}  # no version: none
    cray = facts(p.environment("CRAY_MPICH_DIR=/opt/cray/pe/mpich/8.1.28/ucx/cray/17.0\n"))
    assert cray == {"mpi.flavour": "cray-mpich", "mpi.version": "8.1.28", "mpi.install_path": "/opt/cray/pe/mpich/8.1.28"}


def test_srun_mpi_list_new_and_old_formats():
    new = "MPI plugin types are...\n\tnone\n\tcray_shasta\n\tpmi2\n\tpmix\nspecific pmix plugin versions available: pmix_v4\n"
    old = "srun: MPI types are...\nsrun: none\nsrun: pmi2\nsrun: pmix_v3\n"
    assert facts(p.srun_mpi_list(new)) == {"mpi.pmi_plugins": ("none", "cray_shasta", "pmi2", "pmix", "pmix_v4")}
    assert facts(p.srun_mpi_list(old)) == {"mpi.pmi_plugins": ("none", "pmi2", "pmix_v3")}
    assert p.srun_mpi_list("srun: error: Invalid MPI type 'list'\n") == []


@pytest.mark.parametrize("parse, text, scheduler, version", [
    (p.srun_version, "slurm 23.02.7\n", "slurm", "23.02.7"),
    (p.srun_version, "slurm-wlm 22.05.8\n", "slurm", "22.05.8"),
    (p.qstat_version, "pbs_version = 2022.1.1\n", "pbs", "2022.1.1"),
    (p.qstat_version, "Version: 6.1.3\nCommit: 9d59d2b\n", "torque", "6.1.3"),
    (p.lsid, "IBM Spectrum LSF Standard 10.1.0.13, Jan 04 2023\nCopyright International Business Machines Corp. 1992, 2016.\n",
     "lsf", "10.1.0.13"),
])
def test_schedulers(parse, text, scheduler, version):
    assert facts(parse(text)) == {"host.scheduler": scheduler, "host.scheduler_version": version}


def test_fabric_tools():
    fi = "psm2:\n    version: 1.7\npsm3:\n    version: 1101.0\nverbs;ofi_rxm:\n    version: 116.10\ntcp:\n    version: 116.10\n"
    assert facts(p.fi_info_list(fi)) == {"fabric.fi_providers": ("psm2", "psm3", "verbs", "tcp")}
    assert facts(p.fi_info_version("fi_info: 1.19.0amzn3.0\nlibfabric: 1.19.0amzn3.0\nlibfabric api: 1.19\n")) == \
        {"fabric.libfabric_version": "1.19.0"}
    new = "# Library version: 1.15.0\n# Library path: /lib64/libucs.so.0\n# API headers version: 1.15.0\n"
    old = "# UCT version=1.11.1 revision c58db6b\n# configured with: --prefix=/usr\n"
    assert facts(p.ucx_info(new)) == {"fabric.ucx_version": "1.15.0"}
    assert facts(p.ucx_info(old)) == {"fabric.ucx_version": "1.11.1"}
    ports = "/sys/class/infiniband/mlx5_0/ports/1/link_layer: InfiniBand\n/sys/class/infiniband/mlx5_1/ports/1/link_layer: Ethernet\n"
    assert facts(p.ib_ports(ports)) == {"fabric.ib_devices": ("mlx5_0:InfiniBand", "mlx5_1:Ethernet")}


def test_gpu_tools():
    q = "NVIDIA A100-SXM4-40GB, 535.104.05, 8.0\nNVIDIA A100-SXM4-40GB, 535.104.05, 8.0\n"
    assert facts(p.nvidia_query(q)) == {"gpu.vendor": "nvidia", "gpu.model": "A100-SXM4-40GB", "gpu.count_per_node": 2,
                                        "gpu.driver": "535.104.05", "gpu.arch": "sm_80"}
    assert p.nvidia_query('Field "compute_cap" is not a valid field to query.\n') == []
    assert facts(p.nvcc_version("Cuda compilation tools, release 12.6, V12.6.85\n")) == {"gpu.cuda_toolkit": "12.6"}
    old = "GPU[0]\t\t: Card series:\t\tAMD Instinct MI210\nGPU[1]\t\t: Card series:\t\tAMD Instinct MI210\n"
    assert facts(p.rocm_smi_product(old)) == {"gpu.vendor": "amd", "gpu.model": "AMD Instinct MI210", "gpu.count_per_node": 2}
    assert facts(p.amd_smi_version("AMDSMI Tool: 26.2.2+e1a6bc5663 | AMDSMI Library version: 26.2.2 | ROCm version: 7.2.1\n")) \
        == {"gpu.rocm_version": "7.2.1"}
    assert facts(p.rocm_version_file("6.2.4-139\n")) == {"gpu.rocm_version": "6.2.4"}


@pytest.mark.parametrize("key, text, expect", [
    ("apptainer --version", "apptainer version 1.3.6-1.el9\n", {"runtimes.apptainer": "1.3.6-1.el9"}),
    ("singularity --version", "singularity-ce version 4.1.1\n", {"runtimes.singularity": "4.1.1"}),
    ("singularity --version", "singularity version 3.8.7-1.el7\n", {"runtimes.singularity": "3.8.7-1.el7"}),
    ("singularity --version", "apptainer version 1.1.9\n", {"runtimes.apptainer": "1.1.9"}),  # compatibility link
    ("ch-run --version", "0.31\n", {"runtimes.charliecloud": "0.31"}),
    ("podman --version", "podman version 4.3.1\n", {"runtimes.podman": "4.3.1"}),
    ("podman-hpc --version", "podman-hpc, version 1.1.0\n", {"runtimes.podman-hpc": "1.1.0"}),
    ("podman-hpc --version", "podman version 4.9.4\n", {"runtimes.podman-hpc": ""}),  # podman's, not podman-hpc's
    ("sarus --version", "1.6.1\n", {"runtimes.sarus": "1.6.1"}),
    ("enroot version", "3.4.1\n", {"runtimes.enroot": "3.4.1"}),
    ("udocker --version", "version: 1.3.17\ntarball: https://example/udocker-englib-1.2.11.tar.gz\n",
     {"runtimes.udocker": "1.3.17"}),
    ("docker --version", "Docker version 28.2.2, build e6534b4\n", {"runtimes.docker_client": "28.2.2"}),
    ("docker --version", "Emulate Docker CLI using podman.\npodman version 4.3.1\n", {}),
    ("srun --help", "Usage: srun [OPTIONS(0)...]\n      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n",
     {"runtimes.pyxis": "--container-image"}),
    ("srun --help", "Usage: srun [OPTIONS(0)...]\n  -A, --account=name\n", {"runtimes.pyxis": ""}),
])
def test_runtime_versions(key, text, expect):
    parse = next(probe.parse for probe in PROBES if probe.key == key)
    assert facts(parse(text)) == expect


@pytest.mark.parametrize("probe", PROBES, ids=[pr.key for pr in PROBES])
@pytest.mark.parametrize("text", ["", "\n\n", "command not found", "Segmentation fault (core dumped)\n",
                                  "\x00\x01\x02\xff\ufffd garbage ☃ " * 50, "Error: unknown flag: --version\n"])
def test_garbage_gives_no_clues(probe, text):
    assert probe.parse(text) == []


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PROBES), st.text())
def test_parsers_never_raise(probe, text):
    for clue in probe.parse(text):
        assert clue.key and clue.value not in (None, ())
