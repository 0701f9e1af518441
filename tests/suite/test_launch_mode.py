"""--launch and --sbatch-arg of the suite: the default mode, the checks made before anything runs, and
the skip reasons where no scheduler is there to run the jobs."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import pytest

from generator.model import site as site_mod
from generator.suite.plugin import account_problem, launch_mode
from tests.suite.test_other_sites import REPO, suite


class Usage(Exception):
    pass


def usage(message):
    raise Usage(message)


def with_host(name: str, **host) -> site_mod.Site:
    s = site_mod.load(name)
    return dataclasses.replace(s, host=dataclasses.replace(s.host, **host))


def test_the_default_is_the_scheduler_outside_an_allocation_and_direct_inside():
    slurm, local = site_mod.load("local-slurm"), site_mod.load("local")
    assert launch_mode(slurm, None, [], usage, environ={}) == ("scheduler", ())      # the partition: the site's policy
    assert launch_mode(slurm, None, [], usage, environ={"SLURM_JOB_ID": "7"})[0] == "direct"
    assert launch_mode(slurm, "scheduler", [], usage, environ={"SLURM_JOB_ID": "7"})[0] == "scheduler"
    assert launch_mode(local, None, [], usage, environ={}) == ("direct", ())
    assert launch_mode(site_mod.load("hlrs"), None, [], usage, environ={})[0] == "scheduler"   # torque: skips, says why


def test_options_are_checked_before_anything_runs():
    slurm = site_mod.load("local-slurm")
    with pytest.raises(Usage, match="has no scheduler"):
        launch_mode(site_mod.load("local"), "scheduler", [], usage, environ={})
    with pytest.raises(Usage, match=r"--sbatch-arg: .*is not --name or --name=value"):
        launch_mode(slurm, None, ["--account=a;touch /tmp/x"], usage, environ={})
    with pytest.raises(Usage, match=r"--time=soon: give a time"):
        launch_mode(slurm, None, ["--time=soon"], usage, environ={})
    needs = dataclasses.replace(slurm, scheduler=dataclasses.replace(slurm.scheduler, account="required"))
    assert re.search(r"runs no job without an account .*--sbatch-arg=--account=PROJECT",
                     account_problem(needs, "scheduler", ()))
    given = ("--account=proj1", "--partition=long", "--time=00:20:00")
    assert launch_mode(needs, None, list(given), usage, environ={}) == ("scheduler", given)
    assert account_problem(needs, "scheduler", given) is None and account_problem(needs, "direct", ()) is None
    leonardo = account_problem(site_mod.load("leonardo"), "scheduler", ())
    assert "(Project Account)" in leonardo and 'scheduler.account = "required" in sites/leonardo.toml' in leonardo


def test_on_the_site_a_missing_account_stops_pytest_in_one_line(tmp_path):
    text = (REPO / "sites" / "local-slurm.toml").read_text().replace(
        'sources = ["M1"]\n\n[gpu]', 'account = "required"\nsources = ["M1"]\n\n[gpu]')
    (tmp_path / "acct.toml").write_text(text.replace('name = "local-slurm"', 'name = "acct"'))
    r = suite(f"--site={tmp_path / 'acct.toml'}", "--on-site", "--launch=scheduler", path="suites/test_static.py")
    assert r.returncode == 4 and "runs no job without an account" in r.stderr, r.stdout[-2000:] + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_bad_options_stop_pytest_in_one_line():
    r = suite("--site=local", "--launch=scheduler", path="suites/test_static.py")
    assert r.returncode == 4 and "has no scheduler" in r.stderr and "Traceback" not in r.stderr + r.stdout
    r = suite("--site=local-slurm", "--sbatch-arg=--account=$(id)", path="suites/test_static.py")
    assert r.returncode == 4 and "--sbatch-arg:" in r.stderr and "Traceback" not in r.stderr + r.stdout


def test_without_a_controller_the_scheduler_tests_skip_saying_how_to_start_one(tmp_path):
    env = {**os.environ, "SLURM_CONF": str(tmp_path / "no-such-slurm.conf")}
    env.pop("SLURM_JOB_ID", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/test_scheduler.py", "--site=local-slurm", "-q", "-rs",
                        "-p", "no:cacheprovider", "--workloads", "mnist,mpi"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out[-2000:]
    reasons = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert reasons and all("no Slurm controller answers here (SLURM_CONF=" in ln and "which is not a file" in ln and "gen-recipe minicluster up" in ln
                           for ln in reasons), "\n".join(reasons)
    assert re.search(r"\d+ skipped", out.splitlines()[-1])


def test_torque_sites_skip_saying_their_scripts_are_checked_statically():
    r = suite("--site=hlrs", "--on-site", "--launch=scheduler", path="suites/test_scheduler.py")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-2000:]
    reasons = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert reasons and all("site hlrs uses torque" in ln and "checked statically" in ln for ln in reasons), out[-2000:]
