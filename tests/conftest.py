"""Shared fixtures for the package's tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
