"""Shared fixtures for the package's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-long", action="store_true",
                     help="run the site-file fuzzer for 20,000 cases instead of CI's 2,000 (tests/core/test_fuzz.py)")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def local_base_image() -> str:
    """The `local` site's base image, made offline with mmdebstrap when missing (slow the first time)."""
    from generator import site
    from generator.images import base
    return base.ensure_base_image(site.load("local"))
