"""The suite's pytest plugin is registered by the `pytest11` entry point of an installed gen-recipe: a
user's own test directory, outside this repository, gets `--site` and the suite's fixtures."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

USER_TEST = '''
def test_my_site(site, suite):
    assert site.name == "frontier" and suite.site is site
    print("MY-SITE", site.name, site.mpi.flavour)
'''


def test_entry_point_names_the_plugin_module():
    eps = [ep for ep in metadata.entry_points(group="pytest11") if ep.value == "generator.suite.plugin"]
    assert [ep.name for ep in eps] == ["generator.suite.plugin"]      # the module's name: registered once


def test_a_users_own_suite_gets_site_and_the_fixtures(tmp_path):
    (tmp_path / "test_mine.py").write_text(USER_TEST)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--site=frontier",
                        "test_mine.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MY-SITE frontier cray-mpich" in r.stdout and "1 passed" in r.stdout


def test_without_site_a_foreign_session_is_left_alone(tmp_path):
    (tmp_path / "test_other.py").write_text("def test_x():\n    assert True\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_other.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "1 passed" in r.stdout and "gen-recipe" not in r.stdout, r.stdout + r.stderr


def test_a_foreign_session_keeps_its_order(tmp_path):
    """The suite runs its machine and static checks first; another project's test_static.py stays where it is."""
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "test_static.py").write_text("def test_s():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_a.py", "test_static.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.index("test_a.py::test_a") < r.stdout.index("test_static.py::test_s")
