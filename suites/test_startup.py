"""Start-up cost: a cold process to its first finished step, bare vs container, reported apart from
steady-state throughput (a container adds its own start: namespaces, mounts, image unpacking)."""

from __future__ import annotations

import random
import statistics
import subprocess
import time


from generator.suite import result
from generator.suite.stats import Pair, Process, Verdict, estimate, verdict
from generator.suite import harness
from generator.suite.plugin import SUITE, confined, need_runtime, run_options, runtimes_under_test

ARGS = ("--threads", "1", "--batch-size", "8", "--limit-samples", "256", "--steps", "1", "--warmup", "0")
RUNS = 4


def pytest_generate_tests(metafunc):
    if "runtime" in metafunc.fixturenames:
        metafunc.parametrize("runtime", list(runtimes_under_test(metafunc.config.stash[SUITE])))


def wall(argv, env, preexec_fn=None) -> float:
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, preexec_fn=preexec_fn)
    assert r.returncode == 0, f"{' '.join(argv[:6])} ...: exit {r.returncode}\n{r.stderr[-1000:]}"
    return time.perf_counter() - t


def test_startup(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, runtime):
    need_runtime(suite, runtime)
    image = images.for_runtime("pytorch", runtime)
    opts = run_options(suite, runtime)
    side = harness.container_run(site, runtime, image, ("python3", "-m", "workloads.mnist", *ARGS), opts)
    harness.run_setup(side)
    cont = (side.argv, dict(side.env))
    bare = ((bare_python("pytorch"), "-m", "workloads.mnist", *ARGS), harness.bare_env(site, opts.mode))
    rng = random.Random(0)

    def measure():
        out = []
        for _ in range(suite.rounds or RUNS):
            order = [bare, cont]
            rng.shuffle(order)
            times = {id(side): wall(*side, confined(cpu_pin)) for side in order}   # both on one CPU
            out.append((times[id(bare)], times[id(cont)]))
        return out

    times = benchmark.pedantic(measure, rounds=1, iterations=1)
    extra = statistics.median(c - b for b, c in times)
    tol = suite.site.tolerances.get("startup")
    message = (f"startup ({runtime}): container adds {extra:+.2f} s to a cold start "
               f"(bare median {statistics.median(b for b, _ in times):.2f} s, {len(times)}+{len(times)} processes)")
    est = estimate([Pair(Process((1.0,), (b,)), Process((1.0,), (c,))) for b, c in times])
    v = verdict(f"startup ({runtime})", est, tol) if tol else Verdict("info", message, 0)
    verdicts.append(v)
    result.record(benchmark, [result.of(
        est, v, site=site.name, workload="mnist", runtime=runtime, mode=opts.mode, metric="startup_s",
        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit) if tol else None,
        bare=tuple(b for b, _ in times), container=tuple(c for _, c in times), extra={"median_extra_s": extra})])
    assert v.outcome in ("pass", "info"), v.message
