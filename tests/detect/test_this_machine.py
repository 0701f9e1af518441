"""`gen-recipe detect` for real on this kind of machine (sites/local.toml: Debian 12, Open MPI from
Debian, no GPU, Charliecloud + podman + udocker), run as a user would: the CLI in a subprocess
with the project's .venv/bin on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from generator.model import site as site_mod

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
PATH = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}"


def _local_kind_of_machine() -> str:
    """Why this machine is not the kind sites/local.toml describes ('' if it is)."""
    try:
        release = Path("/etc/os-release").read_text()
    except OSError:
        return "no /etc/os-release"
    if "ID=debian" not in release or 'VERSION_ID="12"' not in release:
        return "not Debian 12"
    missing = [c for c in ("mpirun", "ch-run", "podman", "udocker") if not shutil.which(c, path=PATH)]
    return f"{', '.join(missing)} not on PATH" if missing else ""


pytestmark = pytest.mark.skipif(bool(_local_kind_of_machine()),
                                reason=f"not the local kind of machine: {_local_kind_of_machine()}")


def gen_recipe(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "gen-recipe"), "detect", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, "PATH": PATH})


def test_detect_agrees_with_sites_local(tmp_path):
    r = gen_recipe(cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    detected, local = site_mod.parse(r.stdout, "<stdout>"), site_mod.load("local")
    assert (detected.mpi.flavour, str(detected.mpi.version), detected.mpi_abi) == \
        (local.mpi.flavour, str(local.mpi.version), local.mpi_abi)
    assert (detected.fabric.kind, detected.fabric.provider) == (local.fabric.kind, local.fabric.provider)
    assert (detected.gpu.vendor, detected.gpu.stack) == ("none", "none") == (local.gpu.vendor, local.gpu.stack)
    assert {rt.name: str(rt.version) for rt in detected.runtimes} == {rt.name: str(rt.version) for rt in local.runtimes}
    assert (detected.host.os, detected.host.os_version, detected.host.arch) == ("debian", "12", "x86_64")
    # every fact says how it was found
    assert 'flavour = "openmpi"                      # mpirun --version: mpirun (Open MPI) 4.1.4' in r.stdout
    assert "# not detected: internet — detect makes no network access" in r.stdout
    assert not list(tmp_path.iterdir()), "detect writes nothing without --out (not even into the working directory)"


def test_compare_local_exits_0(tmp_path):
    r = gen_recipe("--compare", "local", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Result: no mismatch that would break the container" in r.stdout


def test_out_then_compare_the_file_later(tmp_path):
    r = gen_recipe("--out", "mysite.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert site_mod.load(str(tmp_path / "mysite.toml")).name == "mysite"
    r = gen_recipe("--compare", "mysite.toml", cwd=tmp_path)
    assert r.returncode == 0 and "Result: no mismatch that would break the container; 0 notes" in r.stdout, r.stdout


def test_compare_with_the_wrong_openmpi_version_exits_1(tmp_path):
    wrong = tmp_path / "wrong.toml"
    wrong.write_text((REPO / "sites" / "local.toml").read_text().replace('version = "4.1.4"', 'version = "4.1.0"'))
    r = gen_recipe("--compare", str(wrong), cwd=tmp_path)
    assert r.returncode == 1
    assert (f"host MPI is openmpi 4.1.4, {wrong} says 4.1.0: the container's OpenMPI must match — update the TOML "
            "or rebuild") in r.stdout
    assert r.stderr == f"gen-recipe: {wrong} does not match this machine: mpi.version (see above; update the TOML or rebuild)\n"
