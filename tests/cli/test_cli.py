"""gen-recipe's generate front: outputs, --check, --explain, listings, determinism, atomic writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from generator import __version__
from generator.model import site
from generator.cli.new_site import template

from tests.helpers import all_sites, run_cli


def test_default_site_is_local_and_writes_all_recipes_and_formats(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run_cli()
    assert r.code == 0, r.err
    files = sorted(p.relative_to(tmp_path / "build").as_posix() for p in (tmp_path / "build").rglob("*") if p.is_file())
    assert files == [f"local/{r}{e}" for r in ("llm", "osu", "pytorch") for e in (".Dockerfile", ".def")]
    header = (tmp_path / "build/local/pytorch.Dockerfile").read_text().splitlines()[1]
    assert f"gen-recipe {__version__}" in header and "'local'" in header and "'pytorch'" in header


def test_recipe_and_format_selection(tmp_path):
    r = run_cli("--site", "frontier", "--recipe", "osu", "--format", "apptainer", "--out", str(tmp_path))
    assert r.code == 0
    assert [p.name for p in (tmp_path / "frontier").iterdir()] == ["osu.def"]
    assert r.out.strip() == str(tmp_path / "frontier" / "osu.def")


def test_output_is_byte_identical_across_runs_and_processes(tmp_path):
    for out in ("a", "b"):
        subprocess.run([sys.executable, "-m", "generator.cli.main", "--site", "lumi", "--out", str(tmp_path / out), "-q"],
                       check=True)
    for p in (tmp_path / "a").rglob("*.*"):
        assert p.read_bytes() == (tmp_path / "b" / p.relative_to(tmp_path / "a")).read_bytes()


def test_rewrite_reports_unchanged_and_leaves_no_temp_files(tmp_path):
    run_cli("--site", "ifca", "--out", str(tmp_path))
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    r = run_cli("--site", "ifca", "--out", str(tmp_path))
    assert r.out.count("(unchanged)") == 6
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_check_exit_codes(tmp_path):
    out = str(tmp_path)
    assert run_cli("--site", "alps", "--check", "--out", out).code == 1          # nothing there yet
    assert run_cli("--site", "alps", "--out", out, "-q").code == 0
    ok = run_cli("--site", "alps", "--check", "--out", out)
    assert ok.code == 0 and "6 files up to date" in ok.out
    target = tmp_path / "alps" / "osu.def"
    target.write_text(target.read_text() + "# edited\n")
    bad = run_cli("--site", "alps", "--check", "--out", out)
    assert bad.code == 1 and f"{target} (differs)" in bad.err and len(bad.err.splitlines()) == 1
    assert target.read_text().endswith("# edited\n"), "--check writes nothing"


def test_check_against_committed_golden_files(repo_root):
    for name in all_sites():
        r = run_cli("--site", name, "--check", "--out", str(repo_root / "tests" / "golden"), "-q")
        assert r.code == 0, r.err


def test_explain_names_facts_and_sources(tmp_path):
    r = run_cli("--site", "frontier", "--explain", "--out", str(tmp_path))
    assert r.code == 0 and not list(tmp_path.iterdir()), "--explain writes nothing"
    assert "container MPI: MPICH 3.4.3" in r.out
    assert 'mpi.flavour = "cray-mpich"  [F1, F2, F3]' in r.out
    assert "software.libcxi" in r.out and "(unverified)" in r.out
    assert "[F2] olcf_containers_examples" in r.out


def test_lists():
    sites = run_cli("--list-sites")
    assert sites.code == 0 and len(sites.out.splitlines()) == len(all_sites())
    assert "(alias: supermuc-ng)" in sites.out
    recipes = run_cli("--list-recipes")
    assert [line.split()[0] for line in recipes.out.splitlines()] == ["llm", "osu", "pytorch"]


def test_new_site_template_is_valid_and_generates(tmp_path):
    out = tmp_path / "mysite.toml"
    r = run_cli("new-site", "mysite", "--out", str(out))
    assert r.code == 0 and out.is_file()
    assert site.load(str(out)).name == "mysite"
    assert run_cli("--site", str(out), "--out", str(tmp_path / "build"), "-q").code == 0
    again = run_cli("new-site", "mysite", "--out", str(out))
    assert again.code == 2 and "exists (use --force" in again.err
    assert run_cli("new-site", "My Site").code == 2
    assert template("x").count("# ") > 30, "the template explains its keys"


def test_console_script_runs_without_traceback(tmp_path):
    exe = Path(sys.executable).parent / "gen-recipe"
    r = subprocess.run([str(exe), "--site", "nowhere"], capture_output=True, text=True,
                       env={**os.environ, "PATH": str(exe.parent) + os.pathsep + os.environ["PATH"]})
    assert r.returncode == 2 and r.stderr.startswith("gen-recipe: unknown site") and "Traceback" not in r.stderr


def test_every_package_ships_in_the_wheel(repo_root):
    """Every package folder of the distribution is found by pyproject's package discovery."""
    import sys

    from setuptools import find_packages
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    config = tomllib.loads((repo_root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    listed = set(find_packages(str(repo_root), include=config["include"]))
    found = {".".join(p.parent.relative_to(repo_root).parts)
             for top in ("generator", "recipes", "sites", "workloads") for p in (repo_root / top).rglob("__init__.py")}
    assert found <= listed, f"not found by [tool.setuptools.packages.find]: {sorted(found - listed)}"
