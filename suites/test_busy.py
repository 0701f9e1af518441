"""Verdicts on a busy machine: with a CPU hog on the CPU where both sides run, the adaptive design takes
more pairs and still decides — an A/A comparison passes (no false fail) and a container that costs
nothing passes. CI machines are busy; a verdict that needs an idle machine is a flaky test."""

from __future__ import annotations

import subprocess
import sys

import pytest

from generator.suite import result
from generator.suite import harness
from generator.suite.plugin import confined, mode_of, need_runtime, run_options, size, tolerance

WORKLOAD = "mnist"


@pytest.fixture
def cpu_hog(cpu_pin):
    """A busy loop on the CPU the fork servers are pinned to (or anywhere, on one CPU)."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=confined(cpu_pin))
    yield hog
    hog.kill()
    hog.wait()


@pytest.mark.parametrize("kind", ["bare-bare", "bare-container"])
def test_verdict_decides_under_a_cpu_hog(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, cpu_hog, kind):
    tol = tolerance(suite, WORKLOAD)
    runtime = site.container.runtime
    bare = harness.bare_side(site, bare_python("pytorch"), mode_of(suite, runtime), cpu_pin)
    if kind == "bare-bare":
        other = harness.bare_side(site, bare_python("pytorch"), mode_of(suite, runtime), cpu_pin)
    else:
        need_runtime(suite, runtime)
        other = harness.container_side(site, runtime, images.for_runtime("pytorch", runtime),
                                       run_options(suite, runtime, env=cpu_pin))
    comp, v = harness.decide(benchmark, bare, other, WORKLOAD, size(site, WORKLOAD),
                             f"{kind} under a CPU hog ({runtime})", tol, rounds=suite.rounds)
    assert cpu_hog.poll() is None, "the hog stopped early"
    verdicts.append(v)
    result.record(benchmark, [result.of(v.estimate, v, site=site.name, workload=WORKLOAD, runtime=f"{kind}+hog",
                                        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                        extra={"look": v.look})])
    assert v.outcome == "pass", v.message
