"""A group-sequential comparison: add pairs until the interval decides, without looking too often.

A fixed number of pairs either wastes time (the answer was clear after 9) or gives up
("inconclusive") where a few more pairs would decide. Here the harness adds pairs in batches and
*looks* after each batch that `Design` schedules (by default at 6, 9, …, 36 pairs: one fresh
fork-server batch of 3 pairs between looks); it stops at the first look whose interval decides. Looking
repeatedly at a 95% interval would decide wrongly more often than 5% (every look is a new chance to
cross a bound by luck), so each look reads a wider interval: the per-look levels come from an
alpha-spending function ("Discrete sequential boundaries for clinical trials", Lan & DeMets 1983),
and the boundaries from the joint distribution of the looks by recursive numerical integration
("Repeated significance tests on accumulating data", Armitage, McPherson & Rowe 1969; the algorithm of
chapter 19 of "Group Sequential Methods with Applications to Clinical Trials", Jennison & Turnbull 2000).

The default spending is Pocock-type (about the same level at every look: z ≈ 2.5 instead of 1.96)
rather than O'Brien–Fleming-type (z ≈ 5.4 at 6 pairs, 3.7 at 12, 2.1 at 36): most comparisons here are
clear, and a clear one should stop early. On the recorded mnist A/A data (tests/suite/data) an A/A
comparison against the local tolerance stopped after 6.8 pairs on average with Pocock-type spending
and 12.5 with O'Brien–Fleming-type (12 fixed before); O'Brien–Fleming-type decides more of the
near-bound cases by 36 pairs (`Design(spending="obrien-fleming")`).

Each tail gets 2.5%, spent over the looks; the intervals are then 95% *repeated* confidence intervals
(Jennison & Turnbull, "Interim analyses: the repeated confidence interval approach", 1989): all of
them together cover the true ratio with ≥ 95% probability. Hence the wrong verdicts on the slow side stay
rare however many looks were taken: a ratio inside the tolerance fails only if an interval misses it on the
far side (≤ 2.5%), a ratio slower than allowed passes only if an interval misses it on the near side
(≤ 2.5%). The faster bound is a plausibility check on the estimate, not on the interval (`stats.outcome`):
it has no such error control — a container exactly on it passes most of the time (mnist 83% against the
local bound of 1.5, resampled), and fails once the whole interval is beyond it. Measured
by resampling recorded A/A data (tests/suite/test_sequential.py), on the bound itself: mnist 0.6% and
1.5%, MPI latency with per-process medians 3.2% each way (its few skewed pairs strain the t
approximation; a single look at 12 pairs gives 2.6-2.9%).

The interval at a look is on the log scale: exp(mean log pair ratio ± q·SE), so never below 0, with
SE = sd(pair log ratios)/√n and q the look's normal boundary c carried to Student's t with n-1 degrees
of freedom at the same tail probability (the significance-level approach to group-sequential t-tests,
Jennison & Turnbull 2000, §3.8). At c = 1.96 this is the pairs-level bootstrap's expanded percentile
interval (stats.py, Hesterberg 2015) in closed form: the bootstrap's tails cannot be read as far out as
an early look needs, and the closed form needs no resampling. The chunks are not resampled a second time: a
pair's ratio already carries its chunks' noise, and resampling both levels counts it twice (Davison &
Hinkley 1997, "Bootstrap Methods and their Application", §3.8) — on the recorded mnist A/A data the
two-level interval is 1.29x as wide, and the design then needs about a third more pairs to decide.

How a harness uses it (one fresh fork-server batch of `design.step` pairs at a time; `budget_s` is
the comparison's time budget):

    design, pairs, start = Design(), [], time.monotonic()
    while True:
        pairs += run_batch(design.step)                  # fresh servers, `step` new pairs
        elapsed = time.monotonic() - start
        out_of_time = elapsed * (len(pairs) + design.step) / len(pairs) > budget_s   # next batch won't fit
        if design.is_look(len(pairs)) or out_of_time:
            v = look(name, pairs, tol, design, final=out_of_time)
            if v.outcome != "continue":                  # pass, fail, or inconclusive at the last look
                break

`final=True` makes this look the last one: it spends all the error rate left (Lan & DeMets allow this
when the reason to stop is not the data — a time budget). A look at `design.max_pairs` is always final.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

from generator.model.site import Tolerance
from generator.suite.stats import CONFIDENCE, Estimate, Pair, Process, Verdict, describe_interval, fast_note, more_pairs, outcome, t_quantile

SPENDING = ("obrien-fleming", "pocock")
_N = NormalDist()


@dataclass(frozen=True)
class Design:
    """Looks after `first`, `first + step`, … pairs, up to `max_pairs`; `confidence` is the repeated
    intervals' joint level, its two tails spent over the looks by `spending` ("pocock" or
    "obrien-fleming", the Lan–DeMets types). `step` should be the harness's batch: the pairs of one
    fresh pair of fork servers."""

    first: int = 6
    step: int = 3
    max_pairs: int = 36
    confidence: float = CONFIDENCE
    spending: str = "pocock"

    def __post_init__(self) -> None:
        if not 3 <= self.first <= self.max_pairs or self.step < 1:
            raise ValueError(f"a design needs 3 <= first <= max_pairs and step >= 1: {self}")
        if self.spending not in SPENDING:
            raise ValueError(f"spending {self.spending!r}: use one of {', '.join(SPENDING)}")

    def looks(self) -> tuple[int, ...]:
        """The numbers of pairs at which the design looks (the last is max_pairs)."""
        sizes = list(range(self.first, self.max_pairs, self.step))
        return (*sizes, self.max_pairs)

    def is_look(self, pairs: int) -> bool:
        return pairs in self.looks()

    def index(self, pairs: int) -> int:
        """The 1-based look at `pairs` pairs."""
        if not self.is_look(pairs):
            raise ValueError(f"{pairs} pairs is not a look of {self} (looks at {self.looks()})")
        return self.looks().index(pairs) + 1


def spent(t: float, alpha: float, spending: str) -> float:
    """One tail's error rate spent by information fraction t (Lan & DeMets 1983): O'Brien–Fleming-type
    2 - 2Φ(z(α/2)/√t), or Pocock-type α·ln(1 + (e-1)t)."""
    t = min(max(t, 0.0), 1.0)
    if t == 0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    return 2 * (1 - _N.cdf(_N.inv_cdf(1 - alpha / 2) / math.sqrt(t)))


def _pdf(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


GRID = 161          # points per look of the numerical integration (odd: Simpson's rule)
_SPAN = 8.0         # the grid reaches this many standard deviations below the mean


def _simpson(lo: float, hi: float) -> tuple[list[float], list[float]]:
    h = (hi - lo) / (GRID - 1)
    xs = [lo + i * h for i in range(GRID)]
    ws = [h / 3 * (1 if i in (0, GRID - 1) else 4 if i % 2 else 2) for i in range(GRID)]
    return xs, ws


def _crossing(b: float, xs: list[float], mass: list[float], sd: float) -> float:
    """The probability that a path still going crosses b by the next look (increment sd)."""
    return sum(m * (1 - _N.cdf((b - x) / sd)) for x, m in zip(xs, mass))


@lru_cache(maxsize=256)
def boundaries(fractions: tuple[float, ...], alpha: float, spending: str, final: bool = False) -> tuple[float, ...]:
    """One-sided critical values c_1…c_K (standard normal scale) for looks at information `fractions`,
    crossing with probability spent(t_k) - spent(t_(k-1)) at look k under no difference; with `final`
    the last look spends all that is left of `alpha`. A look with nothing to spend gets +inf.

    The sum S_k of a look is N(0, t_k) with independent increments; the density of S_k on the paths that
    have not crossed yet is carried from look to look on a grid (Armitage, McPherson & Rowe 1969)."""
    cums = [spent(t, alpha, spending) for t in fractions]
    if final:
        cums[-1] = alpha
    out: list[float] = []
    xs, mass = [0.0], [1.0]       # where the paths still going are (density × Simpson weight); S_0 = 0
    before, t_before = 0.0, 0.0
    for t, cum in zip(fractions, cums):
        target, sd = cum - before, math.sqrt(t - t_before)
        if target <= 1e-15:
            b = math.inf
        else:
            lo, hi = -_SPAN * math.sqrt(t), _SPAN * math.sqrt(t)
            for _ in range(60):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _crossing(mid, xs, mass, sd) > target else (lo, mid)
            b = (lo + hi) / 2
        out.append(b / math.sqrt(t))
        new_xs, ws = _simpson(-_SPAN * math.sqrt(t), min(b, _SPAN * math.sqrt(t)))
        mass = [w * sum(m * _pdf((x - u) / sd) for u, m in zip(xs, mass)) / sd for x, w in zip(new_xs, ws)]
        xs, before, t_before = new_xs, cum, t
    return tuple(out)


def interval(pairs: Sequence[Pair], c: float, level: float = CONFIDENCE) -> Estimate:
    """exp(mean log ratio ± q·SE), SE = sd(log ratios)/√n, q = Student's t(n-1) quantile at the tail
    probability of the normal critical value c (Student's t interval on the log ratios at c = 1.96)."""
    n = len(pairs)
    if n < 2:
        raise ValueError("need at least 2 pairs of processes for an interval")
    logs = [math.log(p.ratio) for p in pairs]
    mean = sum(logs) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1) / n)
    tail = 1 - _N.cdf(c)
    q = math.inf if tail <= 0 else t_quantile(1 - tail, n - 1)
    if se == 0:
        low = high = math.exp(mean)
    elif math.isinf(q):
        low, high = 0.0, math.inf
    else:
        low, high = math.exp(mean - q * se), math.exp(mean + q * se)
    return Estimate(ratio=math.exp(mean), low=low, high=high, pairs=n, level=level)


def look(name: str, pairs: Sequence[Pair], tol: Tolerance, design: Design = Design(), *, final: bool = False,
         sides: tuple[str, str] = ("container", "bare metal")) -> Verdict:
    """The verdict at the look after len(pairs) pairs, one of `design.looks()` (or, with `final`, any
    number from 2 up: the time ran out there): "pass"/"fail" as soon as the look's interval decides,
    "continue" while looks remain, "inconclusive" at the last look (max_pairs, or `final`). The
    message says how many pairs it took:

        cnn (charliecloud): container 7.2% slower than bare metal (95% CI 5.9–8.4%, allowed 5.0%,
        18 pairs, decided at look 3)
    """
    n = len(pairs)
    fractions = tuple(size / design.max_pairs for size in design.looks())
    alpha = (1 - design.confidence) / 2
    last = final or n == design.max_pairs
    if final and 2 <= n < design.max_pairs:     # stopped early (at a look or not): spend the rest here
        before = tuple(f for f in fractions if f < n / design.max_pairs)
        k = len(before) + 1
        c = boundaries((*before, n / design.max_pairs), alpha, design.spending, True)[-1]
    else:                                       # a look's boundary depends only on the looks so far
        k = design.index(n)
        c = boundaries(fractions, alpha, design.spending)[k - 1]
    est = interval(pairs, c, level=1 - 2 * (1 - _N.cdf(c)))
    result = outcome(est, tol)
    if result != "inconclusive":
        what = describe_interval(name, est, tol, sides, f"{n} pairs, decided at look {k}")
        return Verdict(result, what + (fast_note(est, tol) if result == "pass" else ""), 0, n, k, est)
    if not last:
        what = describe_interval(name, est, tol, sides, f"{n} pairs, undecided at look {k}")
        return Verdict("continue", what, 0, n, k, est)
    what = describe_interval(name, est, tol, sides, f"{n} pairs, undecided after {k} look{'s' if k > 1 else ''}")
    more = more_pairs(est, tol)
    why = ("the estimate sits on the tolerance, more pairs cannot decide" if more == 0 else
           f"inconclusive, about {more} more pairs would decide (a larger budget or max_pairs)")
    return Verdict("inconclusive", f"{what}: {why}", more, n, k, est)


@dataclass(frozen=True)
class Characteristics:
    """How a design behaves on resampled data: the share of runs ending in each verdict, and pairs used."""

    runs: int
    passed: float
    failed: float
    inconclusive: float
    mean_pairs: float


def simulate(batches: Sequence[Sequence[Pair]], tol: Tolerance, design: Design = Design(), *, scale: float = 1.0,
             runs: int = 1000, seed: int = 0) -> Characteristics:
    """Run the sequential comparison `runs` times on batches of recorded A/A pairs drawn with replacement
    (a batch = the pairs of one fork-server pair, which share part of their servers' speed). The
    second side is first centred (divided by the pairs' geometric-mean ratio, so that the population
    drawn from has no difference) and then made `scale` times as fast (0.7: a 30% slowdown)."""
    logs = [math.log(p.ratio) for batch in batches for p in batch]
    centre = math.exp(sum(logs) / len(logs))
    scaled = [[Pair(p.bare, _scaled(p.container, scale / centre)) for p in batch] for batch in batches]
    rng = random.Random(seed)
    counts = {"pass": 0, "fail": 0, "inconclusive": 0}
    used = 0
    for _ in range(runs):
        pairs: list[Pair] = []
        while True:
            pairs = (pairs + list(rng.choice(scaled)))[:design.max_pairs]
            if not design.is_look(len(pairs)):
                continue
            v = look("simulated", pairs, tol, design)
            if v.outcome != "continue":
                break
        counts[v.outcome] += 1
        used += len(pairs)
    return Characteristics(runs, counts["pass"] / runs, counts["fail"] / runs, counts["inconclusive"] / runs,
                           used / runs)


def _scaled(p: Process, scale: float) -> Process:
    """The process made `scale` times as fast."""
    return p if scale == 1.0 else Process(p.work, tuple(s / scale for s in p.seconds), p.median)
