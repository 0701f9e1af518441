"""`pytest suites/ --site=S` on a machine that is not S: the static checks pass, everything that would
build, pull or run the site's image or bare twin skips with one reason, and nothing prints a traceback.
With --on-site, a site whose image cannot be built fails with one line naming the step, the fix and the log."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from generator.model import site as site_mod
from tests.helpers import all_sites

REPO = Path(__file__).resolve().parents[2]
# Sites that are this machine (the local suite measures them; a local Slurm cluster site too).
HERE = ("local", "local-slurm", "local-bind", "local-bind-slurm")   # local-bind: with its host MPI installed


def suite(*args: str, path: str = "suites/", timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", path, "-q", "-rs", "-p", "no:cacheprovider", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", [s for s in all_sites() if s not in HERE])
def test_another_site_runs_static_checks_and_skips_the_rest(name):
    r = suite(f"--site={name}")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "Traceback" not in out and "Error" not in out.split("short test summary")[0][-2000:], out[-3000:]
    summary = out.splitlines()[-1]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    skipped = int(re.search(r"(\d+) skipped", summary).group(1))
    assert passed >= 6 and skipped >= 5, summary            # static checks ran; measurements skipped
    reasons = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    off_site = f"this machine is not {name} ("
    measuring = [line for line in reasons if "test_static.py" not in line and "test_rehearsal.py" not in line]
    assert measuring and all(off_site in line for line in measuring), "\n".join(reasons)
    assert any("test_rehearsal.py" in line and "--site=SITE --rehearse" in line for line in reasons)  # how to rehearse
    assert "static checks only — run on" in measuring[0] and "--image/--on-site" in measuring[0]


def test_on_site_with_an_image_that_cannot_be_built_fails_in_one_line(tmp_path):
    local = (REPO / "sites" / "local.toml").read_text()
    broken = local.replace('devel = "localhost/debian:bookworm"', 'devel = "localhost/gen-recipe-test/ubuntu:22.04"') \
                  .replace('distro = "debian"', 'distro = "ubuntu"').replace('distro_version = "12"', 'distro_version = "22.04"') \
                  .replace('name = "local"', 'name = "brokenbase"')
    path = tmp_path / "brokenbase.toml"
    path.write_text(broken)
    site_mod.load(str(path))    # a valid site file: only its image cannot be made here
    r = suite(f"--site={path}", "--on-site", "--runtime", "charliecloud", "--workloads", "mnist",
              path="suites/test_overhead.py")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    assert "Traceback" not in out and "During handling" not in out, out[-3000:]
    failure = [line for line in out.splitlines() if line.startswith("building the pytorch image for site brokenbase failed")]
    assert len(failure) == 1, out[-3000:]
    assert "(log: " in failure[0] and "pass a prebuilt --image" in failure[0] and "only Debian base images" in failure[0]
