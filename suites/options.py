"""The suite's validated options, shared by the top-level conftest.py and the suite's fixtures."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

WORKLOADS = ("cnn", "gan3d", "resnet", "mnist", "llm", "mpi")
MODES = ("bind", "hybrid")


@dataclass(frozen=True, kw_only=True)
class SuiteOptions:
    site: object                       # generator.site.Site
    runtimes: tuple[str, ...]          # empty: every runtime of the site the suite knows how to drive
    rounds: int | None                 # process pairs per comparison (None: the suite's default)
    workloads: tuple[str, ...]
    tolerance: float | None            # allowed slowdown as a fraction, overriding the site's
    image: str | None
    mode: str | None
    aa_repeats: int


SUITE = pytest.StashKey[SuiteOptions]()
