"""Recorded outputs of the other sites' kinds of machines -> the detected facts, the TOML, and
agreement with the shipped site each kind is modelled on."""

from __future__ import annotations

import re

import pytest

from generator.model import site as site_mod
from generator.detect.machine import compare, looks_like, site_toml

from .conftest import KINDS, SITE_OF_KIND

EXPECTED = {
    "cray-cxi-rocm": {  # Frontier: cray-mpich from the module environment, Slingshot, 8 MI250X GCDs via rocm-smi
        "host.os": "sles", "host.os_version": "15.4", "host.arch": "x86_64", "host.cores_per_node": 64,
        "host.scheduler": "slurm", "host.launcher": "srun",
        "mpi.flavour": "cray-mpich", "mpi.version": "8.1.31", "mpi.abi": "mpich",
        "mpi.install_path": "/opt/cray/pe/mpich/8.1.31", "mpi.pmi": "pmi2",
        "mpi.modules": ("cray-mpich/8.1.31", "cray-mpich-abi/8.1.31"),
        "fabric.kind": "slingshot", "fabric.provider": "cxi", "fabric.libfabric_version": "1.15.2.0",
        "fabric.devices": ("/dev/cxi*",),
        "gpu.vendor": "amd", "gpu.stack": "rocm", "gpu.version": "6.2.4", "gpu.count_per_node": 8, "gpu.arch": "gfx90a",
        "gpu.model": "AMD INSTINCT MI250X", "runtimes": {"apptainer": "1.3.6"}},
    "cray-cxi-amdsmi": {  # LUMI-G: the same, with amd-smi instead of rocm-smi and SingularityCE
        "host.os_version": "15.5", "mpi.flavour": "cray-mpich", "mpi.version": "8.1.29", "mpi.pmi": "pmi2",
        "fabric.kind": "slingshot", "fabric.provider": "cxi",
        "gpu.stack": "rocm", "gpu.version": "6.2.2", "gpu.count_per_node": 8, "gpu.arch": "gfx90a",
        "gpu.model": "AMD Instinct MI250X", "runtimes": {"singularity": "4.1.3-150500.10.7"}},
    "cray-cxi-cuda-ce": {  # Alps: aarch64 GH200, CUDA toolkit 12.8 on a CUDA-13 driver, Enroot + Pyxis = "ce"
        "host.arch": "aarch64", "host.cores_per_node": 288, "mpi.flavour": "cray-mpich", "mpi.version": "8.1.30",
        "fabric.kind": "slingshot", "fabric.provider": "cxi", "fabric.libfabric_version": "1.22.0",
        "gpu.vendor": "nvidia", "gpu.stack": "cuda", "gpu.version": "12.8", "gpu.cuda_driver": "13.0",
        "gpu.arch": "sm_90", "gpu.count_per_node": 4, "gpu.driver": "580.65.06", "runtimes": {"ce": "2.13.0"}},
    "intel-psm2": {  # SuperMUC-NG: Intel MPI 2019 Update 12, Omni-Path, Slurm 21.08
        "host.cores_per_node": 48, "mpi.flavour": "intel-mpi", "mpi.version": "2019.12.320", "mpi.abi": "mpich",
        "mpi.install_path": "/lrz/sys/intel/impi2019u12/impi/2019.12.320", "mpi.pmi": "pmi2",
        "mpi.modules": ("intel-mpi/2019-intel",),
        "fabric.kind": "omnipath", "fabric.provider": "psm2", "fabric.providers": ("psm2", "tcp"),
        "fabric.libfabric_version": "1.11.0", "fabric.devices": ("/dev/hfi1_*",),
        "gpu.vendor": "none", "gpu.stack": "none", "runtimes": {"charliecloud": "0.26"}},
    "openmpi-ucx-cuda": {  # IFCA: Open MPI over UCX on InfiniBand, V100s, a driver without nvcc, udocker
        "host.os": "ubuntu", "host.os_version": "18.04", "mpi.flavour": "openmpi", "mpi.version": "4.1.5",
        "mpi.abi": "openmpi", "mpi.install_path": "/opt/openmpi/4.1.5", "mpi.pmi": "pmix",
        "fabric.kind": "infiniband", "fabric.provider": "ucx", "fabric.providers": ("ucx", "verbs", "tcp"),
        "fabric.ucx_version": "1.9.0", "gpu.vendor": "nvidia", "gpu.stack": "cuda", "gpu.version": "12.2",
        "gpu.driver": "535.104.05", "gpu.count_per_node": 4, "gpu.arch": "sm_70", "gpu.model": "V100-SXM2-32GB",
        "runtimes": {"udocker": "1.3.1"}},
}


def test_every_kind_has_expectations():
    assert sorted(EXPECTED) == KINDS == sorted(SITE_OF_KIND)


@pytest.mark.parametrize("kind", KINDS)
def test_detected_facts(kinds, kind):
    f = kinds[kind]
    for key, want in EXPECTED[kind].items():
        got = f.runtimes if key == "runtimes" else f.value(key)
        assert got == want, f"{kind}: {key} = {got!r} ({f.get(key).how if key != 'runtimes' else ''})"
    assert not f.warnings


@pytest.mark.parametrize("kind", KINDS)
def test_toml_loads_and_every_fact_says_how_it_was_found(kinds, kind):
    text = site_toml(kinds[kind], "mysite")
    site = site_mod.parse(text, f"{kind}.toml")
    assert site.mpi.flavour == kinds[kind].value("mpi.flavour")
    assert site.fabric.provider == kinds[kind].value("fabric.provider")
    assert {r.name: str(r.version) for r in site.runtimes} == kinds[kind].runtimes
    table = ""
    for line in text.splitlines():
        if line.startswith("["):
            table = line.split("]")[0].strip("[")
        elif table in ("host", "gpu", "mpi", "fabric") and re.match(r"\w+ = ", line) \
                and not line.startswith(("sources", "unverified")):
            assert " # " in line, f"{kind}: [{table}] {line!r} does not say how it was found"
    assert "# not detected: internet" in text


@pytest.mark.parametrize("kind", KINDS)
def test_kind_agrees_with_the_site_it_is_modelled_on(kinds, kind):
    declared = site_mod.load(SITE_OF_KIND[kind])
    assert looks_like(declared, kinds[kind])
    breaks = [d for d in compare(declared, kinds[kind]) if d.severity == "breaks"]
    if kind == "openmpi-ucx-cuda":  # IFCA's published stack: the host had moved on from 4.1.0
        assert [d.message for d in breaks] == [
            "host MPI is openmpi 4.1.5, sites/ifca.toml says 4.1.0: the container's OpenMPI must match "
            "— update the TOML or rebuild"]
    else:
        assert breaks == []


def test_intel_mpi_takes_the_exact_version_from_the_module_path(kinds):
    how = kinds["intel-psm2"].get("mpi.version").how
    assert how == "environment: I_MPI_ROOT=/lrz/sys/intel/impi2019u12/impi/2019.12.320"


def test_cuda_version_falls_back_to_the_driver_and_says_so(kinds):
    how = kinds["openmpi-ucx-cuda"].get("gpu.version").how
    assert "CUDA Version: 12.2" in how and "the newest CUDA the driver runs" in how and "nvcc --version: not found" in how


def test_enroot_without_pyxis_is_not_the_container_engine():
    from .conftest import detect_kind
    f = detect_kind("cray-cxi-cuda-ce", **{"srun --help": "Usage: srun [OPTIONS(0)...]\n  -A, --account=name\n"})
    assert not f.get("runtimes.ce").detected
    assert "no pyxis" in f.get("runtimes.ce").how and "enroot 2.13.0" in f.get("runtimes.ce").how
    text = site_toml(f)
    assert "# not detected: ce — srun --help: no --container-image or --environment option (no pyxis)" in text
    assert "PLACEHOLDER: no container runtime found" in text
    site_mod.parse(text, "x.toml")


def test_mpi4py_linked_against_another_mpi_is_a_warning():
    from .conftest import detect_kind
    f = detect_kind("cray-cxi-rocm", **{"python3 -c mpi4py":
                                        "MPI VERSION    : CRAY MPICH version 9.0.0.113 (ANL base 4.1.2)\nmpi4py 4.0.1\n"})
    assert f.value("mpi.version") == "8.1.31", "mpi4py never sets the host version when the environment does"
    assert f.warnings == ("python3's mpi4py is linked against cray-mpich 9.0.0.113, but the host MPI is cray-mpich "
                          "8.1.31: the bare-metal baseline and the container must use the same MPI",)
    assert "# WARNING: python3's mpi4py is linked against cray-mpich 9.0.0.113" in site_toml(f)
    f = detect_kind("openmpi-ucx-cuda", **{"python3 -c mpi4py": "MPICH Version:\t4.1.2\nmpi4py 3.1.4\n"})
    assert len(f.warnings) == 1 and "mpich 4.1.2, but the host MPI is openmpi 4.1.5" in f.warnings[0]
    f = detect_kind("intel-psm2", **{"python3 -c mpi4py": "MPICH Version:\t4.1.2\nmpi4py 3.1.4\n"})
    assert len(f.warnings) == 1 and "mpich 4.1.2, but the host MPI is intel-mpi 2019.12.320" in f.warnings[0]
    assert not detect_kind("cray-cxi-rocm", **{"mpichversion": "MPICH Version:    \t3.4a2\n"}).warnings, \
        "Cray's mpichversion prints the MPICH base version: not a contradiction"


def test_cray_mpich_seen_on_a_node_without_slingshot_devices_stays_loadable(tmp_path):
    from generator.detect.machine import detect

    from .conftest import environment, recorded
    f = detect(runner=recorded("cray-cxi-rocm"), root=tmp_path, env=environment("cray-cxi-rocm"))
    assert f.value("fabric.kind") == "ethernet" and f.value("mpi.flavour") == "cray-mpich"
    text = site_toml(f)
    site = site_mod.parse(text, "x.toml")
    assert site.fabric.kind == "slingshot" and "kind" in site.fabric.unverified


@pytest.mark.parametrize("kind", KINDS)
def test_detected_site_generates_every_recipe(kinds, kind):
    """The detected TOML is a working site file, not just a loadable one."""
    from generator.recipe import catalog, render
    from generator.recipe.context import FORMATS
    site = site_mod.parse(site_toml(kinds[kind], "mysite"), f"{kind}.toml")
    texts = render.render_all(site, catalog.names(), FORMATS)
    assert len(texts) == 2 * len(catalog.names())
