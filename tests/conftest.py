"""Shared fixtures for the package's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def local_base_image() -> str:
    """The `local` site's base image, made offline with mmdebstrap when missing (slow the first time)."""
    from generator import build, site
    return build.ensure_base_image(site.load("local"))
