"""Imports resolve the same way from a checkout and from the installed wheel: build the wheel, install it
into a fresh virtual environment, and run gen-recipe there, away from the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(argv, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, argv[:6]))}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    try:
        import setuptools  # noqa: F401  - the build backend, from this environment (no download)
    except ImportError:
        pytest.skip("setuptools is not installed in this environment")
    src = out / "src"       # a copy: setuptools builds in <source>/build, which must not mix with the checkout's
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", ".tox", "build", "*.egg-info",
                                                             "__pycache__", ".hypothesis", "tests", "suites"))
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, src], cwd=out)
    (found,) = out.glob("gen_recipe-*.whl")
    return found


def test_wheel_ships_the_packages_and_their_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ("generator/cli/main.py", "generator/images/oci.py", "generator/suite/stats.py", "recipes/pytorch.py",
                 "sites/frontier.toml", "workloads/registry.py", "workloads/forkserver.py", "generator/api.py",
                 "generator/templates/app.toml", "generator/templates/recipe.py", "generator/templates/main.py"):
        assert must in names, f"{must} is not in {wheel.name}"
    assert not any(n.startswith(("tests/", "suites/")) for n in names)


def test_installed_wheel_generates_away_from_the_checkout(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    run([sys.executable, "-m", "venv", env_dir])
    run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], cwd=tmp_path)
    gen = env_dir / "bin" / "gen-recipe"
    recipes = run([gen, "--list-recipes"], cwd=tmp_path).stdout.split()
    assert {"pytorch", "llm", "osu"} <= set(recipes)
    run([gen, "--site", "frontier", "--out", tmp_path / "out"], cwd=tmp_path)
    for name in ("pytorch.Dockerfile", "pytorch.def", "llm.Dockerfile", "osu.def"):
        text = (tmp_path / "out" / "frontier" / name).read_text()
        assert text == (REPO / "tests" / "golden" / "frontier" / name).read_text(), f"{name} differs from the checkout's"
    where = run([env_dir / "bin" / "python", "-c", "import generator, workloads; print(generator.__file__, workloads.__file__)"],
                cwd=tmp_path).stdout
    assert str(REPO) not in where, f"imported from the checkout: {where}"
    # a user's own recipe, from the installed templates (package data), away from the checkout
    run([gen, "new-recipe", "myapp"], cwd=tmp_path)
    run([gen, "--site", "frontier", "--recipe", "myapp/app.toml", "--out", tmp_path / "out"], cwd=tmp_path)
    assert "COPY app/src /opt/myapp" in (tmp_path / "out" / "frontier" / "myapp.Dockerfile").read_text()
