"""Helpers for the detect tests: recorded probe outputs per kind of machine, and the CLI in-process.

tests/fixtures/detect/<kind>/ holds one plain-text file per probe command (named by
generator.detect.runner.fixture_name: 'fi_info -l' -> fi_info_-l.txt), `environment.txt` with
the module environment (NAME=value lines) and `root/`, the machine's /etc, /proc, /sys, /dev and
/opt files. A command without a file is "not found" on that machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.detect.machine import detect
from generator.detect.runner import fixture_name
from generator.detect.table import PROBES
from tests.helpers import Result, run_cli  # noqa: F401 - one CLI runner for all tests

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "detect"
KINDS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
# Which shipped site each recorded kind of machine is modelled on.
SITE_OF_KIND = {"cray-cxi-rocm": "frontier", "cray-cxi-amdsmi": "lumi", "cray-cxi-cuda-ce": "alps",
                "intel-psm2": "supermuc", "openmpi-ucx-cuda": "ifca"}


def recorded(kind: str) -> dict[str, str]:
    d = FIXTURES / kind
    return {p.key: (d / fixture_name(p.key)).read_text() for p in PROBES
            if p.argv and (d / fixture_name(p.key)).is_file()}


def environment(kind: str) -> dict[str, str]:
    text = (FIXTURES / kind / "environment.txt").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def detect_kind(kind: str, **overrides):
    """detect() on a recorded machine; `overrides` replace recorded outputs (None removes one)."""
    outputs = {**recorded(kind), **overrides}
    return detect(runner={k: v for k, v in outputs.items() if v is not None},
                  root=FIXTURES / kind / "root", env=environment(kind))


@pytest.fixture(scope="session")
def kinds():
    return {kind: detect_kind(kind) for kind in KINDS}



