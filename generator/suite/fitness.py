"""Is the machine fit to decide a comparison? A verdict measured while other work took the CPU is `unfit`.

A paired design cancels load that hits both sides alike: the chunks of a pair take turns (ABBA), so a
neighbour that takes half the CPU slows both sides by about the same factor, and the interval grows
instead of moving. It cannot cancel load that hits one side more than the other, and on a machine that
is busy enough no tolerance is met by chance alone. Each chunk of a fork-server comparison therefore
reports how long its thread was runnable but waiting for a CPU (the kernel's
/proc/thread-self/schedstat, `workloads.common.waited_s`), and the harness records the hypervisor's
steal over each pair (/proc/stat). From those:

- each side's *wait share*: the time it waited over the time it wanted a CPU (waited + ran), over all pairs;
- the *wait bias*: (1 - container share) / (1 - bare share), the speed ratio the waits alone make;
- the verdict is `unfit` (no pass, no fail; never signed into a certificate) when the machine was
  busy for both sides (each waited at least QUIET of its time, or the hypervisor stole that much) and
  the bias moves the ratio by more than BIAS_SHARE of the tolerance; or when a side waited more than
  BUSY_FACTOR times the allowed slowdown of its time (capped at BUSY_CAP), or the hypervisor stole that
  much: at that load a difference the size of the tolerance cannot be told from the machine.

Ranks that busy-poll each other (MPI: `generator.suite.mpi`, each launch's ranks summed, no steal read) are judged
the same way over the launches, plus one rule: both sides' ranks waited at least POLLING_BUSY of their time (a
ping-pong whose peer is off its CPU measures the scheduler's time slice, however equal the waits).

A side that waits while the other does not, on a quiet machine, is not the machine: the container's
own processes (a runtime helper on the same CPU) or its scheduling context took the time, which is
the container's cost, so the verdict stands. A SIGSTOP'd process does not wait (it is not runnable):
the suite's injected slowdown (throttle.py) is a cost, never `unfit`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from generator.model.site import Tolerance
from generator.suite.stats import Verdict

QUIET = 0.02        # a side that waited less than this share of its time had the CPU to itself
BIAS_SHARE = 0.5    # the waits may move the ratio by at most this share of the allowed slowdown
BUSY_FACTOR = 5     # a side may wait up to this many times the allowed slowdown of its time ...
BUSY_CAP = 0.75     # ... but never more than this share (it ran a quarter of the time)
POLLING_BUSY = 0.10  # ranks that busy-poll (MPI): both sides waited this share of their time, the machine was busy


@dataclass(frozen=True)
class Load:
    """What the machine took from one comparison: each side's share of its measured time spent waiting
    for a CPU, and the hypervisor's steal over the pairs (share of all CPU time); None where unknown."""

    bare: float | None
    container: float | None
    steal: float | None = None

    @property
    def bias(self) -> float | None:
        """The container/bare speed ratio the waits alone would make (1.0: they cancel)."""
        if self.bare is None or self.container is None:
            return None
        return (1 - min(self.container, 0.99)) / (1 - min(self.bare, 0.99))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def share(waited: Sequence[float | None], ran: Sequence[float | None]) -> float | None:
    """The share of the time a side wanted a CPU that it spent waiting for one (its chunks' waits and times on a
    CPU; time stopped by a signal, as the power test's throttle does, is in neither); None when a chunk did not say."""
    if not waited or any(w is None for w in (*waited, *ran)) or sum(waited) + sum(ran) <= 0:
        return None
    return sum(waited) / (sum(waited) + sum(ran))


def steal_share(before: Sequence[int] | None, after: Sequence[int] | None) -> float | None:
    """The hypervisor's share of all CPU time between two readings of /proc/stat's `cpu` line (`cpu_times`)."""
    if not before or not after or len(before) < 8 or len(after) < 8:
        return None
    total = sum(after[:8]) - sum(before[:8])        # user nice system idle iowait irq softirq steal
    return (after[7] - before[7]) / total if total > 0 else None


def cpu_times(text: str | None = None) -> tuple[int, ...] | None:
    """The machine's `cpu` line of /proc/stat as numbers (USER_HZ ticks), or None when unreadable."""
    if text is None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                text = f.read()
        except OSError:
            return None
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "cpu":
            try:
                return tuple(int(w) for w in words[1:])
            except ValueError:
                return None
    return None


def allowed_slowdown(tol: Tolerance) -> float:
    """The relative slowdown the tolerance allows below its reference (0.15 for 15% slower)."""
    return max(1e-6, -tol.lower / tol.reference) if tol.reference > 0 else 1e-6


def busy_limit(tol: Tolerance) -> float:
    """The wait share (or steal) above which the machine is too busy for this tolerance."""
    return min(BUSY_CAP, BUSY_FACTOR * allowed_slowdown(tol))


def problem(load: Load, tol: Tolerance, polling: bool = False) -> str | None:
    """Why the machine was unfit for this comparison, with the figures, or None. `polling`: the measured threads
    busy-poll each other (MPI ranks): a rank off its CPU delays its peer by a scheduler time slice, so other work
    on the CPUs decides the figure, whatever the tolerance."""
    limit = busy_limit(tol)
    known = [(name, s) for name, s in (("bare metal", load.bare), ("the container", load.container)) if s is not None]
    if polling and len(known) == 2 and min(s for _, s in known) >= POLLING_BUSY:
        return (f"both sides' ranks waited for a CPU {POLLING_BUSY:.0%} of their time or more (container "
                f"{load.container:.0%}, bare metal {load.bare:.0%}): ranks that poll each other need a CPU each")
    for name, s in known:
        if s > limit:
            return (f"{name} waited for a CPU {s:.0%} of its time (at most {limit:.0%} for a "
                    f"{allowed_slowdown(tol):.0%} tolerance)")
    if load.steal is not None and load.steal > limit:
        return f"the hypervisor took {load.steal:.0%} of the CPU time (at most {limit:.0%} for this tolerance)"
    bias = load.bias
    busy = (len(known) == 2 and min(s for _, s in known) >= QUIET) or (load.steal or 0.0) >= QUIET
    if bias is not None and busy and abs(math.log(bias)) > BIAS_SHARE * abs(math.log(1 - min(allowed_slowdown(tol), 0.99))):
        return (f"the sides waited for a CPU unequally (container {load.container:.0%}, bare metal {load.bare:.0%} of "
                f"their time: alone worth a {describe_bias(bias)}, more than {BIAS_SHARE:.0%} of the "
                f"{allowed_slowdown(tol):.0%} allowed)")
    return None


def describe_bias(bias: float) -> str:
    return f"{(1 - bias):.1%} slowdown" if bias <= 1 else f"{(bias - 1):.1%} speed-up"


def judge(v: Verdict, load: Load, tol: Tolerance, polling: bool = False) -> Verdict:
    """`v` as it stands, or — when the machine was unfit (`problem`) — an `unfit` verdict that keeps the
    estimate and says what was measured and why it decides nothing."""
    why = problem(load, tol, polling)
    if why is None or v.outcome == "continue":
        return v
    advice = "a CPU per rank, nothing else running" if polling else "or one CPU per comparison"
    return dataclasses.replace(v, outcome="unfit", message=f"{v.message}: UNFIT, no verdict: {why}; rerun on a quieter "
                               f"machine ({advice}: docs/measuring.md)")
