"""The facts that matter per site show up in the generated recipes (both formats)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from generator.recipe import render
from generator.model import site

FORMATS = ("docker", "apptainer")


def text(site_name: str, recipe: str = "pytorch", fmt: str = "docker") -> str:
    return render.recipe_text(site.load(site_name), recipe, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["frontier", "odo"])
def test_frontier_rocm_mpich_abi_cxi(name, fmt):
    t = text(name, fmt=fmt)
    assert re.search(r"^(FROM|From:) docker\.io/rocm/dev-ubuntu-22\.04:6\.2\.4", t, re.M), "ROCm base image"
    # MPICH 3.4.x, ch4:ofi, shared: ABI-compatible with cray-mpich 8.1.x (libmpi.so.12)
    assert "mpich-3.4.3.tar.gz" in t and "--with-device=ch4:ofi" in t and "--enable-shared" in t
    assert "--with-libfabric=/usr/local/libfabric" in t
    # libfabric built with the cxi provider on HPE's libcxi
    assert "libfabric-1.22.0.tar.bz2" in t and "--enable-cxi=/usr/local/cxi" in t
    assert "shs-libcxi/archive/refs/tags/release/shs-13.0.0.tar.gz" in t
    # RCCL over libfabric, torch for ROCm 6.2.4, mpi4py against the container MPICH
    assert "--with-rocm=/opt/rocm" in t and "aws-ofi-nccl-1.19.0" in t
    assert "--index-url https://download.pytorch.org/whl/rocm6.2.4 torch==2.6.0" in t
    assert "MPICC=/usr/local/mpich/bin/mpicc" in t and "--no-binary=mpi4py mpi4py==4.0.1" in t


@pytest.mark.parametrize("fmt", FORMATS)
def test_supermuc_intel_mpi_of_the_host_version_and_omnipath(fmt):
    s = site.load("supermuc")
    t = render.recipe_text(s, "pytorch", fmt)
    assert s.mpi.version == "2019.12.320"
    assert "intel-mpi-2019.12-320" in t, "Intel MPI package of the host's exact version"
    assert "--enable-psm2" in t and "--enable-opx" in t, "libfabric with the Omni-Path providers"
    assert "libpsm2-dev" in t and "libpsm2-2" in t, "libpsm2 in build and runtime stages"
    assert "I_MPI_OFI_LIBRARY_INTERNAL=0" in t, "Intel MPI uses the libfabric that has psm2/opx"
    assert "cxi" not in t and "ucx" not in t.lower()


@pytest.mark.parametrize("fmt", FORMATS)
def test_ifca_openmpi_410_with_ucx_on_cuda(fmt):
    t = text("ifca", fmt=fmt)
    assert re.search(r"^(FROM|From:) docker\.io/nvidia/cuda:12\.6\.3-devel-ubuntu22\.04", t, re.M)
    assert "openmpi-4.1.0.tar.bz2" in t and "--with-ucx=/usr/local/ucx" in t
    assert "ucx-1.9.0.tar.gz" in t and "--with-verbs" in t
    assert "libibverbs1" in t, "verbs runtime libraries in the runtime stage"
    assert "MPICC=/usr/local/openmpi/bin/mpicc" in t


@pytest.mark.parametrize("fmt", FORMATS)
def test_local_openmpi_pinned_to_the_debian_host(fmt):
    s = site.load("local")
    t = render.recipe_text(s, "pytorch", fmt)
    pin = s.software.distro_pins["openmpi-bin"]
    assert f"openmpi-bin={pin}" in t and f"libopenmpi3={pin}" in t
    assert "python3-mpi4py=" in t and "--system-site-packages" in t
    assert s.software.torch_wheel.split("/")[-1] in t, "the local CPU torch wheel, no download"
    assert "https://" not in t.split("Python environment")[1], "nothing downloaded for Python on local"


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="dpkg-query not found (not a Debian host)")
def test_local_pins_equal_this_hosts_packages():
    """The local site's Open MPI pins are the versions installed on this Debian machine."""
    s = site.load("local")
    for pkg, version in s.software.distro_pins.items():
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
        if r.returncode:
            pytest.fail(f"{pkg} is not installed here (scripts/debian-packages.txt installs it)")
        assert r.stdout == version, f"{pkg}: host has {r.stdout}, sites/local.toml pins {version}"


def test_alps_builds_for_aarch64_with_cscs_mpich():
    t = text("alps")
    assert "mpich-4.3.1.tar.gz" in t and "whl/cu128 torch==2.8.0" in t


@pytest.mark.parametrize("fmt", FORMATS)
def test_multistage_runtime_carries_only_what_runs(fmt):
    t = text("ifca", fmt=fmt)
    runtime = t.split("runtime\n", 1)[1] if fmt == "docker" else t.split("Stage: runtime", 1)[1]
    assert "build-essential" not in runtime and "./configure" not in runtime
    assert "/usr/local/knem" not in runtime, "KNEM headers are build-only"
    copies = "COPY --from=devel" if fmt == "docker" else "%files from devel"
    assert copies in runtime


def test_apptainer_multistage_syntax_and_version():
    t = text("frontier", fmt="apptainer")
    assert t.count("Stage: ") == 2 and "%files from devel" in t
    assert "%runscript" in t and "exec python3 -m workloads" in t


def test_docker_output_is_buildkit_and_ends_unprivileged():
    t = text("local")
    assert t.startswith("# syntax=docker/dockerfile:1\n")
    assert "RUN --mount=type=secret,id=ca --mount=type=bind,source=wheels,target=/wheels" in t
    assert t.rstrip().splitlines()[-2] == "USER 10001:10001"
