"""compare(declared, detected) and looks_like(site, facts): what breaks the container, what is a
note, and that facts which were not detected are "not checked", never mismatches."""

from __future__ import annotations

import dataclasses

import pytest

from generator.model import site as site_mod
from generator.detect.machine import Difference, compare, facts_of_site, looks_like

from .conftest import detect_kind


def by_key(diffs):
    return {d.key: d for d in diffs}


def breaks(diffs):
    return sorted(d.key for d in diffs if d.severity == "breaks")


def declared(name: str, **tables) -> site_mod.Site:
    """A shipped site with some facts replaced: declared('ifca', mpi={'version': '4.1.5'})."""
    s = site_mod.load(name)
    for table, values in tables.items():
        s = dataclasses.replace(s, **{table: dataclasses.replace(getattr(s, table), **values)})
    return s


def test_wrong_openmpi_version_breaks_with_the_fix_in_the_message():
    diffs = compare(site_mod.load("ifca"), detect_kind("openmpi-ucx-cuda"))
    d = by_key(diffs)["mpi.version"]
    assert d == Difference("mpi.version", "4.1.0", "4.1.5", "breaks",
                           "host MPI is openmpi 4.1.5, sites/ifca.toml says 4.1.0: the container's OpenMPI must match "
                           "— update the TOML or rebuild")
    assert breaks(diffs) == ["mpi.version"] and diffs[0] is d, "breaks come first"


def test_matching_site_has_no_break_and_versions_match_by_prefix():
    s = declared("ifca", mpi=dict(version=site_mod.Version("4.1")))   # '4.1' agrees with '4.1.5'
    assert breaks(compare(s, detect_kind("openmpi-ucx-cuda"))) == []
    s = declared("frontier", mpi=dict(version=site_mod.Version("8.1.31.3")))
    assert breaks(compare(s, detect_kind("cray-cxi-rocm"))) == []


def test_mpich_family_version_mismatch_says_what_depends_on_it():
    d = by_key(compare(site_mod.load("lumi"), detect_kind("cray-cxi-rocm")))["mpi.version"]
    assert d.severity == "breaks" and d.message.startswith("host MPI is cray-mpich 8.1.31, sites/lumi.toml says 8.1.29: "
                                                           "the bind paths, modules and the container's MPI")


def test_flavour_and_abi_mismatch():
    d = by_key(compare(site_mod.load("supermuc"), detect_kind("openmpi-ucx-cuda")))["mpi.flavour"]
    assert d.severity == "breaks" and "host MPI is openmpi 4.1.5, sites/supermuc.toml says intel-mpi" in d.message
    assert "ABIs are incompatible" in d.message
    d = by_key(compare(site_mod.load("frontier"), detect_kind("intel-psm2")))["mpi.flavour"]
    assert d.severity == "breaks" and "ABIs" not in d.message  # intel-mpi and cray-mpich share the MPICH ABI


def test_fabric_provider_gpu_stack_and_arch_breaks():
    diffs = by_key(compare(site_mod.load("frontier"), detect_kind("cray-cxi-cuda-ce")))
    assert diffs["host.arch"].severity == "breaks" and "x86_64 do not run here" in diffs["host.arch"].message
    assert diffs["gpu.stack"].severity == "breaks" and "this node runs cuda 12.8" in diffs["gpu.stack"].message
    diffs = by_key(compare(site_mod.load("supermuc"), detect_kind("cray-cxi-rocm")))
    assert diffs["fabric.provider"].severity == "breaks"
    assert diffs["fabric.provider"].message.startswith("host fabric is slingshot (provider cxi), sites/supermuc.toml "
                                                       "says omnipath (psm2)")
    d = by_key(compare(site_mod.load("frontier"), detect_kind("intel-psm2")))["gpu.stack"]
    assert d.severity == "breaks" and "this node has no GPU" in d.message and "compute node" in d.message


def test_declared_tcp_on_a_fast_network_is_a_note():
    s = declared("ifca", fabric=dict(kind="ethernet", provider="tcp"))
    d = by_key(compare(s, detect_kind("openmpi-ucx-cuda")))["fabric.kind"]
    assert d.severity == "note" and "not use the fast network" in d.message


@pytest.mark.parametrize("driver, want, severity", [("11.4", "12.6", "breaks"), ("12.2", "12.6", "note"),
                                                     ("12.8", "12.6", None)])
def test_cuda_driver_rule(driver, want, severity):
    smi = f"| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: {driver}     |\n"
    facts = detect_kind("openmpi-ucx-cuda", **{"nvidia-smi": smi})
    s = declared("ifca", gpu=dict(version=site_mod.Version(want)))
    got = by_key(compare(s, facts)).get("gpu.version")
    assert (got.severity if got else None) == severity


@pytest.mark.parametrize("rocm, severity", [("5.7.1-98", "breaks"), ("6.1.3-122", "note"), ("6.2.0-10", None)])
def test_rocm_major_breaks_minor_is_a_note(tmp_path, rocm, severity):
    facts = detect_kind("cray-cxi-amdsmi", **{"amd-smi version": f"AMDSMI Tool: 1 | AMDSMI Library version: 1 | "
                                                                 f"ROCm version: {rocm.split('-')[0]}\n"})
    s = declared("lumi", gpu=dict(version=site_mod.Version("6.2.2")))      # a ROCm 6.2 host
    got = by_key(compare(s, facts)).get("gpu.version")
    assert (got.severity if got else None) == severity


def test_pmi_that_srun_does_not_offer_breaks():
    facts = detect_kind("cray-cxi-rocm", **{"srun --mpi=list": "MPI plugin types are...\n\tnone\n\tcray_shasta\n"})
    d = by_key(compare(site_mod.load("lumi"), facts))["mpi.pmi"]
    assert d.severity == "breaks" and "srun --mpi=pmi2 would fail" in d.message


def test_undetected_facts_are_not_checked_never_mismatches():
    facts = detect_kind("openmpi-ucx-cuda", **{k: None for k in ("mpirun --version", "ompi_info", "ldconfig -p",
                                                                 "python3 -c mpi4py", "ucx_info -v", "nvidia-smi",
                                                                 "nvidia-smi --query-gpu")})
    diffs = compare(site_mod.load("ifca"), facts)
    assert breaks(diffs) == []
    unchecked = {d.key: d for d in diffs if not d.checked}
    assert {"mpi.flavour", "fabric.provider", "gpu.version"} <= set(unchecked)
    assert unchecked["mpi.flavour"].message.startswith("not checked: mpi.flavour (sites/ifca.toml says openmpi; "
                                                       "no MPI found (")
    assert unchecked["mpi.flavour"].severity == "note" and unchecked["mpi.flavour"].detected is None
    assert "ompi_info: not found" in unchecked["mpi.flavour"].message


def test_runtime_notes():
    diffs = by_key(compare(site_mod.load("ifca"), detect_kind("intel-psm2")))
    assert diffs["runtimes.udocker"].severity == "note"
    assert "udocker 1.3.1 (the site's default runtime) is not available" in diffs["runtimes.udocker"].message
    assert diffs["runtimes.charliecloud"].message == "this machine also has charliecloud 0.26 (not in sites/ifca.toml)"
    diffs = by_key(compare(declared("lumi"), detect_kind("cray-cxi-amdsmi",
                                                          **{"singularity --version": "singularity-ce version 4.2.1\n"})))
    assert diffs["runtimes.singularity"].severity == "note" and "(unverified there)" in diffs["runtimes.singularity"].message


def test_modules_not_loaded_are_a_note():
    s = declared("frontier", host=dict(modules=("PrgEnv-gnu", "cpe/24.07")))
    d = by_key(compare(s, detect_kind("cray-cxi-rocm")))["host.modules"]
    assert d.severity == "note" and d.message.startswith("not loaded now: cpe/24.07")


def test_site_against_site():
    assert compare(site_mod.load("local"), site_mod.load("local")) == []
    diffs = by_key(compare(site_mod.load("frontier"), site_mod.load("lumi")))
    # LUMI lists its MPI version as unverified: a declared-but-unverified fact is not evidence
    assert not diffs["mpi.version"].checked and "unverified in sites/lumi.toml" in diffs["mpi.version"].message
    assert diffs["gpu.version"].severity == "note"  # rocm 6.2.4 vs 6.2.2
    assert facts_of_site(site_mod.load("lumi")).value("fabric.provider") == "cxi"


def test_looks_like():
    frontier_like = detect_kind("cray-cxi-rocm")
    assert looks_like(site_mod.load("frontier"), frontier_like)
    assert looks_like(site_mod.load("lumi"), frontier_like)          # same kind of machine: compare tells them apart
    assert not looks_like(site_mod.load("alps"), frontier_like)      # aarch64
    assert not looks_like(site_mod.load("supermuc"), frontier_like)  # intel-mpi
    assert not looks_like(site_mod.load("local"), frontier_like)     # openmpi, debian
    assert looks_like(site_mod.load("ifca"), detect_kind("openmpi-ucx-cuda"))
    assert looks_like(site_mod.load("local"), site_mod.load("local"))


def test_looks_like_ignores_undetected_facts(tmp_path):
    from generator.detect.machine import detect
    nothing = detect(runner={}, root=tmp_path, env={})
    assert not looks_like(site_mod.load("local"), nothing), "no evidence at all is not a match"
    only_arch = detect(runner={"uname -m": "x86_64\n"}, root=tmp_path, env={})
    assert looks_like(site_mod.load("frontier"), only_arch) and not looks_like(site_mod.load("alps"), only_arch)
