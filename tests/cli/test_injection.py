"""Hostile site files cannot run anything: every string field of every shipped site is set to shell
payloads through the loader; what the loader accepts is rendered into every launch script (each
runtime × mode, and the bare twin), which is then executed with stub commands for the launcher, the
module system and the runtimes — no payload may run. In the Dockerfiles and definitions no payload may
appear outside a comment or a quoted word."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from generator.run import launch
from generator.recipe import render
from generator.model import site as site_mod
from generator.errors import SiteError
from tests.helpers import account, all_sites
from tests.model.test_fuzz import paths, toml_text

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
STUBS = ("srun", "mpirun", "mpiexec", "aprun", "module", "apptainer", "singularity", "ch-run", "ch-fromhost", "ch-convert",
         "udocker", "podman", "podman-hpc", "docker", "sarus", "python3")
PAYLOADS = ("$(touch {m})", "`touch {m}`", "\"; touch {m}; \"", "'; touch {m}; '", "${{IFS}}$(touch {m})",
            "x\ntouch {m}", "EOF\ntouch {m}\nEOF")


def poisoned(name: str, payload: str) -> tuple[site_mod.Site, int, int]:
    """The site with every string field the loader accepts set to `payload`; (site, accepted, refused)."""
    path = REPO / "sites" / f"{name}.toml"
    doc = tomllib.loads(path.read_text())
    accepted = refused = 0
    for where, value in list(paths(doc)):
        if not isinstance(value, str) or where[-1] in ("name", "flavour", "runtime", "mpi_mode", "kind", "provider",
                                                        "vendor", "stack", "scheduler", "launcher", "arch"):
            continue
        trial = tomllib.loads(toml_text(doc))
        parent = trial
        for k in where[:-1]:
            parent = parent[k]
        parent[where[-1]] = payload
        try:
            site_mod.parse(toml_text(trial), str(path))
        except SiteError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            refused += 1
            continue
        doc, accepted = trial, accepted + 1
    return site_mod.parse(toml_text(doc), str(path)), accepted, refused


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("stubs") / "bin"        # bin/: a host MPI prefix's too (mpi.setup = "prefix")
    folder.mkdir()
    for name in STUBS:
        (folder / name).write_text("#!/bin/sh\nexit 0\n")
        (folder / name).chmod(stat.S_IRWXU)
    return folder


@pytest.mark.parametrize("name", all_sites())
def test_no_payload_runs_from_launch_scripts_or_hides_in_recipes(name, stubs, tmp_path):
    refused_total = 0
    image = tmp_path / "img.sif"                # a file-image site's script checks it first (sha256sum --check)
    image.write_text("image\n")
    (tmp_path / "img.sif.sha256").write_text(f"{hashlib.sha256(b'image' + bytes([10])).hexdigest()}  img.sif\n")
    for i, template in enumerate(PAYLOADS):
        marker = tmp_path / f"pwned-{i}"
        payload = template.format(m=marker)
        site, accepted, refused = poisoned(name, payload)
        refused_total += refused
        if site.mpi.setup == "prefix":           # the scripts put install_path/bin first: the stubs stand in there too
            site = dataclasses.replace(site, mpi=dataclasses.replace(site.mpi, install_path=str(stubs.parent)))
        for rt in site.runtimes:
            for mode in rt.mpi_modes:
                if mode == "bind" and site.mpi.flavour == "none":
                    continue
                for bare in (False, True):
                    job = launch.Job(recipe="pytorch", workload="mnist", nodes=1, mode=mode, runtime=rt.name,
                                     bare=bare, image="img.sif", workloads_dir=str(tmp_path),
                                     account=account(site))
                    script = tmp_path / "job.sh"
                    script.write_text(launch.script(site, job))
                    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path), "PBS_O_WORKDIR": str(tmp_path),
                           "LS_SUBCWD": str(tmp_path), "USER": "nobody"}
                    r = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                                       timeout=60)
                    assert not marker.exists(), f"{payload!r} ran from {rt.name}/{mode}/bare={bare}:\n{script.read_text()}"
                    assert r.returncode == 0, r.stderr[-2000:]
        for recipe in ("pytorch", "llm"):
            for fmt in ("docker", "apptainer"):
                for line in render.recipe_text(site, recipe, fmt).splitlines():
                    if f"touch {marker}" in line and not line.lstrip().startswith("#"):
                        assert shlex.quote(payload) in line, f"{payload!r} unquoted in {recipe}.{fmt}: {line}"
    assert refused_total > 0, "the loader refused no payload: its patterns are not checked"
    assert os.listdir(tmp_path) and not list(tmp_path.glob("pwned-*"))
