"""Controls that make the overhead verdicts worth trusting (MEASURING.md).

- A/A: the same machinery, bare vs bare and container vs container, must pass: no difference where
  there is none. With --aa-repeats N it is repeated and its 95% interval must cover 1.0 in at least
  90% of the repeats (18 of 20).
- Power: a container slowed by twice the site's tolerance (a runtime wrapper that stops and continues
  it) must fail; without the wrapper the same comparison is test_overhead.
"""

from __future__ import annotations

import pytest

from generator.stats import estimate, verdict
from suites import harness
from suites.conftest import need_runtime, run_options, tolerance
from suites.workloads import CPU, DEFAULT_PAIRS, GPU

WORKLOAD = "mnist"     # the cheapest to start: controls need many processes


def control_workload(site):
    return (GPU if site.gpu.stack != "none" else CPU)[WORKLOAD]


def container(suite, site, images, cpu_pin, wrapper=()):
    runtime = site.container.runtime
    need_runtime(suite, runtime)
    image = images.for_runtime("pytorch", runtime)
    return harness.container_side(site, runtime, image, run_options(suite, runtime, env=cpu_pin), wrapper=wrapper)


def run(benchmark, a: harness.Side, b: harness.Side, site, pairs: int, seed: int = 0):
    if benchmark is None:
        return harness.compare(a, b, control_workload(site), pairs, seed=seed)
    return benchmark.pedantic(harness.compare, args=(a, b, control_workload(site), pairs),
                              kwargs={"seed": seed}, rounds=1, iterations=1)


@pytest.mark.parametrize("kind", ["bare-bare", "container-container"])
def test_aa_control_passes(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, kind):
    tol = tolerance(suite, WORKLOAD)
    side = (lambda: harness.bare_side(site, bare_python("pytorch"), cpu_pin)) if kind == "bare-bare" else \
        (lambda: container(suite, site, images, cpu_pin))
    comp = run(benchmark, side(), side(), site, suite.rounds or DEFAULT_PAIRS)
    est = estimate(comp.pairs)
    first, second = kind.split("-")
    v = verdict(f"A/A {kind}", est, tol, sides=(f"{first} B", f"{second} A"))
    verdicts.append(v)
    benchmark.extra_info.update(site=site.name, workload=WORKLOAD, metric="throughput", kind=kind, ratio=est.ratio,
                                ci_low=est.low, ci_high=est.high, pairs=est.pairs, verdict=v.outcome,
                                half_width=est.half_width)
    assert v.outcome == "pass", v.message


def test_injected_slowdown_fails(benchmark, suite, site, images, bare_python, cpu_pin, verdicts):
    """Power: twice the allowed slowdown, injected into the container side, is caught."""
    tol = tolerance(suite, WORKLOAD)
    slowdown = min(0.9, -2 * tol.lower)
    side = container(suite, site, images, cpu_pin, wrapper=harness.throttle_argv(slowdown))
    comp = run(benchmark, harness.bare_side(site, bare_python("pytorch"), cpu_pin), side, site, suite.rounds or DEFAULT_PAIRS)
    est = estimate(comp.pairs)
    v = verdict(f"power test ({slowdown:.0%} injected)", est, tol)
    verdicts.append(v)
    benchmark.extra_info.update(site=site.name, workload=WORKLOAD, injected=slowdown, ratio=est.ratio,
                                ci_low=est.low, ci_high=est.high, pairs=est.pairs, verdict=v.outcome)
    assert v.outcome == "fail", f"an injected {slowdown:.0%} slowdown was not caught: {v.message}"


def test_aa_repeated_coverage(suite, site, bare_python, cpu_pin, record_property):
    """On demand (--aa-repeats 20): the A/A interval covers 1.0 in at least 90% of the repeats."""
    if not suite.aa_repeats:
        pytest.skip("slow: repeats the A/A control; enable with --aa-repeats 20")
    covered, results = 0, []
    for i in range(suite.aa_repeats):
        python = bare_python("pytorch")
        comp = run(None, harness.bare_side(site, python, cpu_pin), harness.bare_side(site, python, cpu_pin), site,
                   suite.rounds or DEFAULT_PAIRS, seed=i)
        est = estimate(comp.pairs, seed=i)
        covered += est.low <= 1.0 <= est.high
        results.append((round(est.ratio, 4), round(est.low, 4), round(est.high, 4)))
    record_property("aa_repeats", results)
    print(f"A/A coverage: {covered} of {suite.aa_repeats} intervals cover 1.0; {results}")
    assert covered >= 0.9 * suite.aa_repeats, f"only {covered} of {suite.aa_repeats} A/A intervals cover 1.0"
