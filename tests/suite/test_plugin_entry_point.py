"""The suite's pytest plugin is registered by the `pytest11` entry point of an installed gen-recipe: a
user's own test directory, outside this repository, gets `--site` and the suite's fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

from generator.suite.plugin import confined, pinned_cpu

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


WORKER_TEST = '''
import os
from generator.suite.stats import Verdict

def test_one(verdicts, cpu_pin):
    verdicts.append(Verdict("pass", "one: within tolerance on " + os.environ.get("PYTEST_XDIST_WORKER", "-"), 0.0))
    print("PIN", os.environ.get("PYTEST_XDIST_WORKER"), cpu_pin.get("WORKLOADS_CPUS"))

def test_two(verdicts, cpu_pin):
    verdicts.append(Verdict("fail", "two: outside on " + os.environ.get("PYTEST_XDIST_WORKER", "-"), 0.3))
    verdicts.append(Verdict("inconclusive", "three: undecided", 0.1))
    print("PIN", os.environ.get("PYTEST_XDIST_WORKER"), cpu_pin.get("WORKLOADS_CPUS"))
'''


def test_under_xdist_every_workers_verdicts_reach_the_summary(tmp_path):
    """./scripts/test measures on two workers: the verdicts given in the workers are in the one summary table
    the controller prints, each once, and each worker measures on a CPU of its own (--dist each: both
    workers run both tests)."""
    (tmp_path / "test_w.py").write_text(WORKER_TEST)
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "each", "-p", "no:cacheprovider", "-rA",
                        "--site=local", "--on-site", "test_w.py"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    table = r.stdout.split("container overhead", 1)[1].splitlines()
    rows = sorted(" ".join(ln.split()) for ln in table if ln.split(" ", 1)[0] in ("PASS", "FAIL", "INCONCLUSIVE"))
    assert rows == ["FAIL two: outside on gw0", "FAIL two: outside on gw1", "INCONCLUSIVE three: undecided",
                    "INCONCLUSIVE three: undecided", "PASS one: within tolerance on gw0",
                    "PASS one: within tolerance on gw1"], r.stdout
    pins = {ln.split()[1]: ln.split()[2] for ln in r.stdout.splitlines() if ln.startswith("PIN ")}
    assert set(pins) == {"gw0", "gw1"}, r.stdout
    if len(os.sched_getaffinity(0)) > 1:
        assert pins["gw0"] != pins["gw1"], pins


def test_pinned_cpu_gives_each_worker_its_own():
    assert pinned_cpu([0, 1], "") == pinned_cpu([0, 1], "gw0") == {"WORKLOADS_CPUS": "1"}
    assert pinned_cpu([0, 1], "gw1") == {"WORKLOADS_CPUS": "0"}
    assert pinned_cpu([4, 5, 6], "gw3") == {"WORKLOADS_CPUS": "6"}            # more workers than CPUs: shared
    assert pinned_cpu([3], "gw1") == {}                                        # confined to one CPU: no pin
    assert confined({}) is None and callable(confined({"WORKLOADS_CPUS": "0"}))


UNFIT_TEST = '''
import pytest
from generator.suite.plugin import settle
from generator.suite.stats import Verdict

@pytest.mark.parametrize("outcome", ["pass", "unfit"])
def test_comparison(verdicts, outcome):
    v = Verdict(outcome, f"mnist ({outcome}): measured: UNFIT, no verdict: the sides waited unequally", 0)
    verdicts.append(v)
    settle(v)
    assert v.outcome == "pass", v.message
'''


def test_an_unfit_comparison_is_skipped_and_the_session_says_so(tmp_path):
    """An `unfit` verdict (generator.suite.fitness) is neither a pass nor a fail: its test is skipped with the
    figures, the summary counts it, and the session exits with 6 when nothing failed, on one worker or two."""
    (tmp_path / "test_u.py").write_text(UNFIT_TEST)
    for workers in ([], ["-n", "2"]):
        r = subprocess.run([sys.executable, "-m", "pytest", *workers, "-p", "no:cacheprovider", "-rs", "--site=local",
                            "--on-site", "test_u.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 6, r.stdout + r.stderr
        assert "1 passed, 1 skipped" in r.stdout and "SKIPPED" in r.stdout and "UNFIT, no verdict" in r.stdout
        assert "1 comparison(s) UNFIT: the machine was too busy to decide them" in r.stdout, r.stdout
    (tmp_path / "test_f.py").write_text("def test_f():\n    assert False\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--site=local", "--on-site",
                        "test_u.py", "test_f.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr          # a failure wins
