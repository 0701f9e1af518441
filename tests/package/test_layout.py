"""Every test folder is one pytest collects: a folder named like one of pytest's `norecursedirs`
(`build`, `dist`, `venv`, ...) is skipped without a word, and its tests never run."""

from __future__ import annotations

import fnmatch
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_folder_is_silently_skipped(pytestconfig):
    patterns = pytestconfig.getini("norecursedirs")
    hidden = [d.name for d in TESTS.iterdir() if d.is_dir() and any(fnmatch.fnmatch(d.name, p) for p in patterns)
              and any(d.rglob("test_*.py"))]
    assert not hidden, f"pytest does not collect tests/{hidden[0]}/ (norecursedirs {patterns}): rename it"
