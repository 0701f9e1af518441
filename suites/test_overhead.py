"""Container overhead per workload and runtime: bare vs container, paired processes, a tolerance verdict.

Every comparison is recorded with pytest-benchmark (run with --benchmark-enable --benchmark-json=FILE
to keep the raw series; `gen-recipe report FILE` turns them into a table and plots).
"""

from __future__ import annotations

import pytest

from generator.suite import result
from generator.suite import harness
from generator.suite.plugin import SUITE, need_runtime, settle, run_options, runtimes_under_test, size, tolerance
from workloads.registry import STEADY, WORKLOADS as REGISTRY


def pytest_generate_tests(metafunc):
    if {"workload", "runtime"} <= set(metafunc.fixturenames):
        options = metafunc.config.stash[SUITE]
        cases = [(w, r) for r in runtimes_under_test(options) for w in options.workloads if w in STEADY]
        metafunc.parametrize("workload,runtime", cases, ids=[f"{w}-{r}" for w, r in cases])


def test_overhead(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, workload, runtime):
    need_runtime(suite, runtime)
    tol = tolerance(suite, workload)
    w = size(site, workload)
    recipe = REGISTRY[workload].recipe
    image = images.for_runtime(recipe, runtime)
    opts = run_options(suite, runtime, env=cpu_pin)
    try:
        bare = harness.bare_side(site, bare_python(recipe), opts.mode, cpu_pin)
        cont = harness.container_side(site, runtime, image, opts)
        comp, v = harness.decide(benchmark, bare, cont, workload, w, f"{workload} ({runtime})", tol,
                                 rounds=suite.rounds)
    except harness.CannotRunHere as exc:
        pytest.skip(f"{workload} cannot run here: {str(exc).splitlines()[-1][:200]}")
    except harness.Unlike as exc:
        pytest.fail(str(exc), pytrace=False)
    result.record(benchmark, [result.of_pairs(
        v, comp.pairs, site=site.name, workload=workload, runtime=runtime, mode=opts.mode, metric="throughput",
        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
        extra={"image": image, "image_digests": images.digests(recipe), "look": v.look, "environment": dict(comp.environment),
               "bare_chunks": comp.series.get("a", []), "container_chunks": comp.series.get("b", []),
               "ready_s": [list(r) for r in comp.ready_s], **harness.load_record(comp)})])
    verdicts.append(v)
    settle(v)
    assert v.outcome == "pass", v.message
