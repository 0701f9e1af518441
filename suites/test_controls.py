"""Controls that make the overhead verdicts worth trusting (docs/measuring.md).

- A/A: the same machinery, bare vs bare and container vs container, must pass: no difference where
  there is none. With --aa-repeats N it is repeated and its 95% interval must cover 1.0 in at least
  90% of the repeats (18 of 20).
- Power: a container slowed by twice the site's tolerance (a runtime wrapper that stops and continues
  it) must fail; without the wrapper the same comparison is test_overhead.
"""

from __future__ import annotations

import pytest

from generator.suite import result
from generator.suite.stats import estimate
from generator.suite import harness
from generator.suite.plugin import DEFAULT_PAIRS, mode_of, settle, need_runtime, run_options, size, tolerance

WORKLOAD = "mnist"     # the cheapest to start: controls need many processes


def container(suite, site, images, cpu_pin, wrapper=()):
    runtime = site.container.runtime
    need_runtime(suite, runtime)
    image = images.for_runtime("pytorch", runtime)
    return harness.container_side(site, runtime, image, run_options(suite, runtime, env=cpu_pin), wrapper=wrapper)


def bare(suite, site, bare_python, cpu_pin):
    return harness.bare_side(site, bare_python("pytorch"), mode_of(suite, site.container.runtime), cpu_pin)


def run(benchmark, a: harness.Side, b: harness.Side, site, pairs: int, seed: int = 0):
    if benchmark is None:
        return harness.compare(a, b, WORKLOAD, size(site, WORKLOAD), pairs, seed=seed)
    return benchmark.pedantic(harness.compare, args=(a, b, WORKLOAD, size(site, WORKLOAD), pairs),
                              kwargs={"seed": seed}, rounds=1, iterations=1)


def decide(benchmark, suite, site, a: harness.Side, b: harness.Side, label: str, tol, sides=("container", "bare metal")):
    return harness.decide(benchmark, a, b, WORKLOAD, size(site, WORKLOAD), label, tol, rounds=suite.rounds, sides=sides)


@pytest.mark.parametrize("kind", ["bare-bare", "container-container"])
def test_aa_control_passes(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, kind):
    tol = tolerance(suite, WORKLOAD)
    side = (lambda: bare(suite, site, bare_python, cpu_pin)) if kind == "bare-bare" else \
        (lambda: container(suite, site, images, cpu_pin))
    first, second = kind.split("-")
    comp, v = decide(benchmark, suite, site, side(), side(), f"A/A {kind}", tol, sides=(f"{first} B", f"{second} A"))
    verdicts.append(v)
    result.record(benchmark, [result.of(v.estimate, v, site=site.name, workload=WORKLOAD, runtime=kind,
                                        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                        extra={"half_width": v.estimate.half_width, "look": v.look,
                                               **harness.load_record(comp)})])
    settle(v)
    assert v.outcome == "pass", v.message


def test_injected_slowdown_fails(benchmark, suite, site, images, bare_python, cpu_pin, verdicts):
    """Power: twice the allowed slowdown, injected into the container side, is caught."""
    tol = tolerance(suite, WORKLOAD)
    slowdown = min(0.9, -2 * tol.lower)
    side = container(suite, site, images, cpu_pin, wrapper=harness.throttle_argv(slowdown))
    comp, v = decide(benchmark, suite, site, bare(suite, site, bare_python, cpu_pin), side,
                  f"power test ({slowdown:.0%} injected)", tol)
    verdicts.append(v)
    result.record(benchmark, [result.of(v.estimate, v, site=site.name, workload=WORKLOAD, runtime="power",
                                        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                        extra={"injected": slowdown, "look": v.look, **harness.load_record(comp)})])
    settle(v)
    assert v.outcome == "fail", f"an injected {slowdown:.0%} slowdown was not caught: {v.message}"


def test_aa_repeated_coverage(suite, site, bare_python, cpu_pin, record_property):
    """On demand (--aa-repeats 20): the A/A interval covers 1.0 in at least 90% of the repeats."""
    if not suite.aa_repeats:
        pytest.skip("slow: repeats the A/A control; enable with --aa-repeats 20")
    covered, results = 0, []
    for i in range(suite.aa_repeats):
        comp = run(None, bare(suite, site, bare_python, cpu_pin), bare(suite, site, bare_python, cpu_pin), site,
                   suite.rounds or DEFAULT_PAIRS, seed=i)
        est = estimate(comp.pairs, seed=i)
        covered += est.low <= 1.0 <= est.high
        results.append((round(est.ratio, 4), round(est.low, 4), round(est.high, 4)))
    record_property("aa_repeats", results)
    print(f"A/A coverage: {covered} of {suite.aa_repeats} intervals cover 1.0; {results}")
    assert covered >= 0.9 * suite.aa_repeats, f"only {covered} of {suite.aa_repeats} A/A intervals cover 1.0"
