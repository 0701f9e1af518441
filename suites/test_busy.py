"""Verdicts on a busy machine: with a CPU hog on the CPU where both sides run, the adaptive design takes
more pairs and still decides — an A/A comparison passes (no false fail) and a container that costs
nothing passes. Beside neighbours on every CPU — busy loops as bare processes, then as containers of the
runtime measured (the load under which podman's comparisons once failed: docs/measuring.md) — every
runtime's comparison passes or is `unfit`, never fails. CI machines are busy; a verdict that needs an idle
machine is a flaky test."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys

import pytest

from generator.suite import result
from generator.suite import harness
from generator.suite.plugin import (SUITE, confined, mode_of, need_runtime, run_options, runtimes_under_test, settle, size,
                                    tolerance)

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
                                        extra={"look": v.look, **harness.load_record(comp)})])
    settle(v)
    assert v.outcome == "pass", v.message


# A busy loop that ends when its stdin closes (so a container ends with it, whatever the runtime), or after 20 min.
SPIN = ("import sys, threading, time\nstop = threading.Event()\n"
        "threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()\n"
        "end = time.monotonic() + 1200\nwhile not stop.is_set() and time.monotonic() < end:\n    pass\n")


@contextlib.contextmanager
def neighbours(argvs, envs):
    """One busy loop per CPU of this process, each pinned to its CPU (a container's may be moved by its runtime's
    cgroup), ended by closing its stdin."""
    cpus = sorted(os.sched_getaffinity(0))
    procs = []
    try:
        for i, cpu in enumerate(cpus):
            procs.append(subprocess.Popen(argvs[i % len(argvs)], env=envs[i % len(envs)], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                          preexec_fn=confined({"WORKLOADS_CPUS": str(cpu)})))
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()


def pytest_generate_tests(metafunc):
    if "neighbour_runtime" in metafunc.fixturenames:
        cases = [(r, kind) for r in runtimes_under_test(metafunc.config.stash[SUITE]) for kind in ("bare", "containers")]
        metafunc.parametrize("neighbour_runtime,kind", cases, ids=[f"{r}-beside-{k}" for r, k in cases])


# The case every run measures (the rest with --neighbours): the one where podman's comparisons once failed (a measured
# container in podman's shared parent cgroup beside other podman containers: docs/measuring.md)
ALWAYS = ("podman", "containers")


@pytest.mark.whole_machine          # loads every CPU: not beside another measurement
def test_no_false_verdict_beside_neighbours(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, neighbour_runtime,
                                            kind):
    """mnist bare vs container (pinned to one CPU) while every CPU runs a busy loop, as a bare process or as a
    container of the runtime measured, placed as that runtime places any container: pass, or unfit."""
    runtime = neighbour_runtime
    if not suite.neighbours and (runtime, kind) != ALWAYS:
        pytest.skip("on demand (--neighbours); by default only podman beside podman containers, where a false verdict was")
    need_runtime(suite, runtime)
    tol = tolerance(suite, WORKLOAD)
    image = images.for_runtime("pytorch", runtime)
    python = bare_python("pytorch")
    if kind == "bare":
        spin = [[python, "-c", SPIN]], [dict(os.environ)]
    else:
        loop = harness.container_run(site, runtime, image, ("python3", "-c", SPIN),
                                     dataclasses.replace(run_options(suite, runtime), cgroup_parent="", host_cgroupns=False))
        harness.run_setup(loop)
        spin = [list(loop.argv)], [dict(loop.env)]
    bare = harness.bare_side(site, python, mode_of(suite, runtime), cpu_pin)
    cont = harness.container_side(site, runtime, image, run_options(suite, runtime, env=cpu_pin))
    with neighbours(*spin) as procs:
        comp, v = harness.decide(benchmark, bare, cont, WORKLOAD, size(site, WORKLOAD),
                                 f"{WORKLOAD} ({runtime}) beside busy {kind} on every CPU", tol, rounds=suite.rounds)
        stopped = [p.returncode for p in procs if p.poll() is not None]
    assert not stopped, f"a neighbour ended early (exit {stopped}): the comparison ran beside less load than meant"
    verdicts.append(v)
    result.record(benchmark, [result.of(v.estimate, v, site=site.name, workload=WORKLOAD, runtime=f"{runtime}+{kind}-neighbours",
                                        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
                                        extra={"look": v.look, "neighbours": kind, "environment": dict(comp.environment),
                                               **harness.load_record(comp)})])
    settle(v)
    assert v.outcome == "pass", v.message
