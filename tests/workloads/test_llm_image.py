"""The llm image of `local` and its bare twin, made as the portability suite makes them, run the same stack.

./scripts/test runs this file in its parallel part (on whichever worker is free; its build takes the
machine's build lock in turn with the `pytorch` image's, usually after it, and shares its layers): the
image, its Charliecloud directory, its udocker container and its bare twin are then what `pytest suites/`
reuses (content-hashed tags and names), instead of making them in the part that runs alone.
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from generator.images import base, convert, oci
from generator.model import site as site_mod
from generator.run import runtimes
from generator.suite import harness
from workloads.registry import WORKLOADS

TOOLS = ("podman", "ch-run", "mmdebstrap")


@pytest.fixture(scope="module")
def local():
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not found (needed to build and run the llm image; scripts/debian-packages.txt)")
    return site_mod.load("local")


def test_llm_image_and_its_bare_twin_run_the_same_stack(local, monkeypatch):
    """One pair of the suite's llm comparison, ch-run against the twin: the like-for-like guard finds both
    sides the same (torch build, transformers, Python, threads), and both produce tokens."""
    monkeypatch.setenv("USER", os.environ.get("USER") or "root")       # ch-run refuses to start without it
    base.ensure_base_image(local)
    ref = oci.build_image(local, "llm").ref
    images = {r: convert.runtime_image(local, ref, r) for r in ("charliecloud", "udocker")}    # the suite's forms
    python = harness.bare_python(local, "llm")
    opts = runtimes.Options(mode="hybrid", gpus=0, env={"WORKLOADS_CPUS": "0"}, allow_root=os.geteuid() == 0,
                            interactive=True)
    bare = harness.bare_side(local, python, opts.mode, {"WORKLOADS_CPUS": "0"})
    cont = harness.container_side(local, "charliecloud", images["charliecloud"], opts)
    comp = harness.compare(bare, cont, "llm", dataclasses.replace(WORKLOADS["llm"].cpu, chunks=1, steps=1), 1)
    assert len(comp.pairs) == 1
    pair = comp.pairs[0]
    assert pair.bare.speed() > 0 and pair.container.speed() > 0
