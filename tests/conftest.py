"""Shared fixtures for the package's tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# ./scripts/test runs tests/ on two pytest-xdist workers. The tests under tests/images/ and the test cluster's
# (tests/dev/test_minicluster.py, test_slurmjob.py: the `local` pytorch image, the app images, one
# cluster) go to one worker together, in file order: one cluster, and builds one after another. The
# rehearsals (tests/dev/test_rehearsal.py) have a cluster of their own and go beside them. Every other test
# goes to whichever worker is free, including the few elsewhere that build (tests/workloads/test_llm_image.py,
# tests/lint's build checks): a build waits for the machine's build lock (oci.build_image), so shared steps still become shared layers. xdist's own
# `xdist_group` marks do not group under pytest 9: the scheduler below groups by path instead.
XDIST_GROUPS = ("tests/images/", "tests/dev/test_minicluster.py", "tests/dev/test_slurmjob.py")


@pytest.hookimpl(tryfirst=True, optionalhook=True)      # a pytest without xdist ignores it
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "load":          # another --dist asked for: xdist's own
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        """LoadScopeScheduling with one scope for the tests under XDIST_GROUPS and one per other test."""

        def _split_scope(self, nodeid: str) -> str:
            return "images" if nodeid.startswith(XDIST_GROUPS) else nodeid

    return Grouped(config, log)


class WorkerTime:
    """How long each xdist worker was busy (the sum of its tests' setup, call and teardown), printed at the
    end: with the --durations list, where a part's wall time goes (one group's worker, or both)."""

    def __init__(self) -> None:
        self.busy: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        node = getattr(report, "node", None)          # set by xdist's controller on each worker's report
        if node is not None:
            worker = node.gateway.id
            self.busy[worker] = self.busy.get(worker, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.busy:
            terminalreporter.write_line("busy per worker: " + ", ".join(
                f"{w} {s:.0f} s" for w, s in sorted(self.busy.items())))


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):   # xdist's controller
        config.pluginmanager.register(WorkerTime(), "gen-recipe-worker-time")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-long", action="store_true",
                     help="run the site-file fuzzer for 20,000 cases instead of CI's 2,000 (tests/model/test_fuzz.py)")


UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN", "") not in ("", "0")


@pytest.fixture(scope="session")
def golden():
    """check(path, text): the golden file at `path` holds exactly `text`; with UPDATE_GOLDEN=1 it is
    written first (review the diff: git diff tests/golden*)."""
    from generator import files

    def check(path: Path, text: str) -> None:
        if UPDATE_GOLDEN:
            files.write_atomic(path, text)
        assert path.is_file(), f"missing golden file {path} (UPDATE_GOLDEN=1 creates it)"
        assert text == path.read_text(encoding="utf-8"), f"{path} differs (UPDATE_GOLDEN=1 to accept, then review)"
    return check


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def local_base_image() -> str:
    """The `local` site's base image, made offline with mmdebstrap when missing (slow the first time)."""
    from generator.model import site
    from generator.images import base
    return base.ensure_base_image(site.load("local"))
