"""The site model: every shipped site loads, its facts are typed, and derived facts hold."""

from __future__ import annotations

import dataclasses

import pytest

from generator.model import site as site_mod
from generator.errors import UsageError
from generator.model.site import Site, Version

from tests.helpers import all_sites

EXPECTED = {"frontier", "odo", "supermuc", "galileo", "ifca", "forhlr2", "hlrs", "lumi", "perlmutter", "alps",
            "leonardo", "local", "local-slurm", "local-bind", "local-bind-slurm"}


def test_every_required_site_ships():
    assert set(all_sites()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_site_loads_frozen_and_sourced(name):
    s = site_mod.load(name)
    assert isinstance(s, Site) and s.name == name
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "x"  # type: ignore[misc]
    assert s.sources, "every site names the documents its facts come from"
    # every fact table that states facts cites at least one source
    for table in (s.host, s.mpi, s.fabric, s.container):
        assert table.sources, f"{name}: {type(table).__name__} has no sources"
    assert s.base is s.images[s.gpu.stack]
    assert s.runtime().name == s.container.runtime
    if s.mpi.flavour != "none":
        assert isinstance(s.mpi.version, Version)


def test_alias_and_path(tmp_path, repo_root):
    assert site_mod.load("supermuc-ng") == site_mod.load("supermuc")
    copy = tmp_path / "mine.toml"
    copy.write_text((repo_root / "sites" / "ifca.toml").read_text())
    mine = site_mod.load(str(copy))
    assert mine.mpi.version == "4.1.0" and mine.path == str(copy)


def test_local_is_the_default_and_matches_this_kind_of_machine():
    s = site_mod.load("local")
    assert (s.host.os, s.host.os_version, s.host.arch) == ("debian", "12", "x86_64")
    assert (s.gpu.stack, s.mpi.flavour, s.mpi_abi) == ("none", "openmpi", "openmpi")
    assert {r.name for r in s.runtimes} >= {"charliecloud", "podman"}


@pytest.mark.parametrize("name,facts", [
    ("frontier", {"mpi.flavour": "cray-mpich", "fabric.provider": "cxi", "gpu.stack": "rocm",
                  "container.mpi_mode": "bind", "runtime": "apptainer"}),
    ("supermuc", {"mpi.flavour": "intel-mpi", "fabric.kind": "omnipath", "fabric.provider": "psm2",
                  "gpu.stack": "none", "runtime": "charliecloud"}),
    ("ifca", {"mpi.flavour": "openmpi", "mpi.version": "4.1.0", "fabric.provider": "ucx", "gpu.stack": "cuda",
              "runtime": "udocker"}),
    ("alps", {"host.arch": "aarch64", "runtime": "ce", "fabric.provider": "cxi"}),
    ("perlmutter", {"runtime": "podman-hpc", "gpu.vendor": "nvidia"}),
    ("lumi", {"runtime": "singularity", "gpu.vendor": "amd"}),
])
def test_sites_carry_the_documented_facts(name, facts):
    s = site_mod.load(name)
    for key, want in facts.items():
        if key == "runtime":
            assert s.container.runtime == want
            continue
        table, field = key.split(".")
        assert getattr(getattr(s, table), field) == want, key


def test_version_parts():
    v = Version("8.1.31")
    assert v.parts == (8, 1, 31) and v.series() == "8.1"
    assert Version("4.1.4-3+b1").parts == (4, 1, 4)


def test_runtime_lookup_error_names_the_choices():
    with pytest.raises(UsageError, match="did you mean 'apptainer'"):
        site_mod.load("frontier").runtime("apptainr")
