"""The machine-fitness check (generator.suite.fitness): the kernel's wait figure is real, and the rules that turn
a comparison measured on a busy machine into `unfit` instead of a pass or a fail."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from generator.model.site import Tolerance
from generator.suite import fitness
from generator.suite.stats import Estimate, Verdict

TOL = Tolerance(reference=1.0, lower=-0.15, upper=0.5, unit="ratio")       # local's: 15% slower allowed
TIGHT = Tolerance(reference=1.0, lower=-0.05, upper=0.5, unit="ratio")

# One second of pure-Python work in a process pinned to one CPU; prints the share of its wall time it waited.
WORK = ("import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nfrom workloads.common import waited_s\n"
        "(r0, w0), t0 = waited_s(), time.perf_counter()\nwhile time.perf_counter() - t0 < 1.0:\n    pass\n"
        "r1, w1 = waited_s()\nprint((w1 - w0) / ((w1 - w0) + (r1 - r0)))")


def test_a_process_sharing_its_cpu_with_a_busy_loop_waits_about_half_its_time():
    """The figure comes from the kernel (/proc/thread-self/schedstat): beside a busy loop pinned to the same CPU,
    a process spends a large share of its wall time runnable but not running (CFS gives each about half)."""
    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("this kernel keeps no schedstat")
    cpu = max(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"],
                           start_new_session=True)
    try:
        out = subprocess.run([sys.executable, "-c", WORK, str(cpu)], capture_output=True, text=True, check=True,
                             start_new_session=True)
    finally:
        hog.kill()
        hog.wait()
    share = float(out.stdout)
    assert 0.25 <= share <= 1.0, f"waited {share:.0%} of its time beside a busy loop on CPU {cpu}"


def test_equal_load_on_both_sides_keeps_the_verdict():
    """A neighbour that takes half the CPU from both sides alike: the pairs cancel it, the verdict stands."""
    assert fitness.problem(fitness.Load(bare=0.48, container=0.50, steal=0.0), TOL) is None


def test_unequal_waits_on_a_busy_machine_are_unfit():
    """Both sides waited (the machine was busy) and the container side much more: the ratio says more about the
    machine than about the image (podman's containers under a shared parent cgroup beside other containers)."""
    why = fitness.problem(fitness.Load(bare=0.05, container=0.30), TOL)
    assert why and "unequally" in why and "container 30%, bare metal 5%" in why and "26.3% slowdown" in why


def test_waits_of_the_container_alone_on_a_quiet_machine_are_its_cost():
    """The bare side had its CPU (waited < QUIET): whatever kept the container's side waiting is the container's
    (a runtime helper on its CPU), so a fail stays a fail."""
    assert fitness.problem(fitness.Load(bare=0.001, container=0.30), TOL) is None


def test_too_busy_for_the_tolerance_asked():
    """15% allowed: a side may wait up to 75% of its time; 5% allowed: 25%."""
    assert fitness.busy_limit(TOL) == pytest.approx(0.75)
    assert fitness.busy_limit(TIGHT) == pytest.approx(0.25)
    assert fitness.problem(fitness.Load(bare=0.5, container=0.5), TOL) is None
    why = fitness.problem(fitness.Load(bare=0.5, container=0.5), TIGHT)
    assert why == "bare metal waited for a CPU 50% of its time (at most 25% for a 5% tolerance)"
    assert "hypervisor took 30%" in fitness.problem(fitness.Load(bare=0.0, container=0.0, steal=0.3), TIGHT)


def test_unknown_waits_decide_nothing():
    assert fitness.problem(fitness.Load(bare=None, container=None, steal=None), TOL) is None
    assert fitness.share([0.1, None], [1.0, 1.0]) is None
    assert fitness.share([0.1, 0.3], [0.4, 0.2]) == pytest.approx(0.4)       # 0.4 waited of 1.0 wanted


def test_steal_from_proc_stat():
    before = fitness.cpu_times("cpu  100 0 100 700 0 0 0 100 0 0\ncpu0 1 2 3\n")
    after = fitness.cpu_times("cpu  200 0 200 1400 0 0 0 200 0 0\n")
    assert fitness.steal_share(before, after) == pytest.approx(0.1)
    assert fitness.cpu_times("intr 1 2\n") is None and fitness.steal_share(None, after) is None
    assert len(fitness.cpu_times()) >= 8      # this machine's


def test_an_unfit_verdict_keeps_the_estimate_and_says_why():
    est = Estimate(ratio=0.7, low=0.6, high=0.8, pairs=9)
    failed = Verdict("fail", "mnist (podman): container 30.0% slower than bare metal (...)", 0, 9, 2, est)
    v = fitness.judge(failed, fitness.Load(bare=0.2, container=0.5), TOL)
    assert v.outcome == "unfit" and v.estimate == est and v.pairs == 9
    assert v.message.startswith(failed.message + ": UNFIT, no verdict: the sides waited for a CPU unequally")
    assert not v.decided
    going = Verdict("continue", "...", 0, 6, 1, est)
    assert fitness.judge(going, fitness.Load(bare=0.2, container=0.5), TOL) is going
    assert fitness.judge(failed, fitness.Load(bare=0.0, container=0.0), TOL) is failed


def test_an_unfit_result_is_never_signed():
    from generator.certify.verdict import measured
    from generator.suite.result import Result
    rows = [Result(site="local", workload="mnist", runtime="podman", ratio=0.7, low=0.6, high=0.8, pairs=9,
                   verdict=outcome, extra={"image": "localhost/x:1"}) for outcome in ("pass", "unfit")]
    assert [r.verdict for r in measured(rows)] == ["pass"]


def test_mpi_launches_that_waited_unequally_on_a_busy_machine_are_unfit():
    """An MPI comparison: each launch reports its ranks' summed CPU and wait seconds; over the launches the
    container's ranks waited 60% of their time and bare metal's 10%: alone worth a 56% slowdown, more than half
    the 75% local allows for latency, so the verdict is unfit, not a fail."""
    from generator.suite import mpi
    bare = [{"ran_s": 0.9, "waited_s": 0.1}] * 8
    cont = [{"ran_s": 0.4, "waited_s": 0.6}] * 8
    load = mpi.load(bare, cont)
    assert (round(load.bare, 2), round(load.container, 2)) == (0.1, 0.6)
    latency = Tolerance(reference=1.0, lower=-0.75, upper=1.0, unit="ratio")
    failed = Verdict("fail", "mpi_latency (podman): fail", 0, 8, 1, Estimate(ratio=0.2, low=0.15, high=0.25, pairs=8))
    assert fitness.judge(failed, load, latency).outcome == "unfit"
    assert fitness.judge(failed, mpi.load(bare, bare), latency).outcome == "fail"      # equal waits: it stands
    assert mpi.load([{}] * 8, cont).bare is None                                       # an older workload: unknown


def test_ranks_that_poll_each_other_on_a_busy_machine_are_unfit_even_when_their_waits_match():
    """Beside a busy loop on one of two CPUs, both sides' ranks wait about a third of their time: the waits cancel in
    the bias, yet a ping-pong whose peer is off its CPU measures the scheduler's time slice. MPI (polling) is unfit
    there; a fork-server comparison with the same waits keeps its verdict; a quiet machine keeps both."""
    latency = Tolerance(reference=1.0, lower=-0.75, upper=1.0, unit="ratio")
    busy = fitness.Load(bare=0.31, container=0.34)
    why = fitness.problem(busy, latency, polling=True)
    assert why and "10% of their time or more (container 34%, bare metal 31%)" in why and "a CPU each" in why
    failed = Verdict("fail", "mpi_latency (podman): fail", 0, 8, 1, Estimate(ratio=0.2, low=0.15, high=0.25, pairs=8))
    assert "(a CPU per rank, nothing else running: docs/measuring.md)" in fitness.judge(failed, busy, latency, polling=True).message
    assert fitness.problem(busy, latency) is None
    assert fitness.problem(fitness.Load(bare=0.01, container=0.03), latency, polling=True) is None
    assert fitness.problem(fitness.Load(bare=0.0, container=0.4), latency, polling=True) is None   # the container's own
