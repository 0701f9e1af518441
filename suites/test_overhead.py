"""Container overhead per workload and runtime: bare vs container, paired processes, a tolerance verdict.

Every comparison is recorded with pytest-benchmark (run with --benchmark-enable --benchmark-json=FILE
to keep the raw series; `gen-recipe report FILE` turns them into a table and plots).
"""

from __future__ import annotations

import pytest

from generator.stats import estimate, verdict
from suites import harness
from suites.conftest import RECIPE_OF, need_runtime, run_options, runtimes_under_test, tolerance
from suites.workloads import CPU, DEFAULT_PAIRS, GPU
from suites.options import SUITE

STEADY = ("cnn", "gan3d", "resnet", "mnist", "llm")


def pytest_generate_tests(metafunc):
    if {"workload", "runtime"} <= set(metafunc.fixturenames):
        options = metafunc.config.stash[SUITE]
        cases = [(w, r) for r in runtimes_under_test(options) for w in options.workloads if w in STEADY]
        metafunc.parametrize("workload,runtime", cases, ids=[f"{w}-{r}" for w, r in cases])


def sizes(site):
    return GPU if site.gpu.stack != "none" else CPU


def record(benchmark, site, runtime, image, mode, workload, metric, comp, est, v, tol) -> None:
    benchmark.extra_info.update({
        "site": site.name, "runtime": runtime, "image": image, "mode": mode, "workload": workload,
        "metric": metric, "ratio": est.ratio, "ci_low": est.low, "ci_high": est.high, "pairs": est.pairs,
        "verdict": v.outcome, "message": v.message, "tolerance": [tol.reference, tol.lower, tol.upper, tol.unit],
        "bare_speed": [p.bare.speed() for p in comp.pairs], "container_speed": [p.container.speed() for p in comp.pairs],
        "bare_chunks": comp.series.get("a", []), "container_chunks": comp.series.get("b", []),
        "ready_s": [list(r) for r in comp.ready_s],
    })


def test_overhead(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, workload, runtime):
    need_runtime(suite, runtime)
    tol = tolerance(suite, workload)
    w = sizes(site)[workload]
    image = images.for_runtime(RECIPE_OF[workload], runtime)
    opts = run_options(suite, runtime, env=cpu_pin)
    pairs = suite.rounds or DEFAULT_PAIRS
    try:
        bare = harness.bare_side(site, bare_python(RECIPE_OF[workload]), cpu_pin)
        cont = harness.container_side(site, runtime, image, opts)
        comp = benchmark.pedantic(harness.compare, args=(bare, cont, w, pairs), rounds=1, iterations=1)
    except harness.CannotRunHere as exc:
        pytest.skip(f"{workload} cannot run here: {str(exc).splitlines()[-1][:200]}")
    est = estimate(comp.pairs)
    v = verdict(f"{workload} ({runtime})", est, tol)
    record(benchmark, site, runtime, image, opts.mode, workload, "throughput", comp, est, v, tol)
    verdicts.append(v)
    assert v.outcome == "pass", v.message
