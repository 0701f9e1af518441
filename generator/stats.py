"""Container-vs-bare statistics with processes as the replicates.

On these machines each process gets its own lasting speed (sd ≈ 9% between identical processes,
see MEASURING.md), so many steps of one process are not independent samples. The unit here is the
*pair*: one bare process and one container process started next to each other, their work interleaved
in short chunks. Each process's speed is its work over its time; a pair's ratio is container speed over
bare speed; the estimate is the geometric mean of the pair ratios, and its 95% interval comes from a
hierarchical bootstrap: resample pairs, then within each resampled process resample its chunks.

With a dozen pairs a plain percentile interval is too narrow (it uses the normal quantile where the
spread of a mean of n is Student's t with n-1 degrees of freedom, and the bootstrap variance is short
by (n-1)/n); the interval is the *expanded percentile* one ("What Teachers Should Know About the
Bootstrap", Hesterberg 2015): the bootstrap quantiles at Φ(-√(n/(n-1))·t(n-1, 0.975)) and its mirror,
about 1.1% and 98.9% for 12 pairs.

"Speed" is higher-is-better everywhere: throughput as is, times and latencies inverted, so one
tolerance rule fits all metrics: ratio = container speed / bare speed, 1.0 = no overhead, 0.93 = the
container is 7% slower.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from .site import Tolerance

BOOTSTRAP = 4000
CONFIDENCE = 0.95


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (upper tail, p > 0.5) by the Cornish-Fisher expansion of the normal one
    (Abramowitz & Stegun 26.7.5); within 0.2% of exact for df >= 3."""
    z = NormalDist().inv_cdf(p)
    terms = ((z ** 3 + z) / 4,
             (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(term / df ** (k + 1) for k, term in enumerate(terms))


def expanded_alpha(n: int, confidence: float = CONFIDENCE) -> float:
    """The lower tail probability at which the expanded percentile interval reads the bootstrap."""
    t = t_quantile(1 - (1 - confidence) / 2, n - 1)
    return NormalDist().cdf(-math.sqrt(n / (n - 1)) * t)


@dataclass(frozen=True)
class Process:
    """One process's chunks: work done (samples, tokens, 1 for a timed call) and seconds each took."""

    work: tuple[float, ...]
    seconds: tuple[float, ...]

    def speed(self, idx: Sequence[int] | None = None) -> float:
        idx = range(len(self.work)) if idx is None else idx
        return sum(self.work[i] for i in idx) / sum(self.seconds[i] for i in idx)


@dataclass(frozen=True)
class Pair:
    bare: Process
    container: Process

    @property
    def ratio(self) -> float:
        return self.container.speed() / self.bare.speed()


@dataclass(frozen=True)
class Estimate:
    ratio: float          # geometric mean of the pair ratios
    low: float            # 95% interval
    high: float
    pairs: int

    @property
    def half_width(self) -> float:
        """Half the interval's width, relative to the estimate."""
        return (self.high - self.low) / 2 / self.ratio


def estimate(pairs: Sequence[Pair], *, seed: int = 0, resamples: int = BOOTSTRAP) -> Estimate:
    """Geometric-mean ratio and its hierarchical-bootstrap interval (expanded percentile)."""
    if len(pairs) < 2:
        raise ValueError("need at least 2 pairs of processes for an interval")
    logs = [math.log(p.ratio) for p in pairs]
    point = math.exp(sum(logs) / len(logs))
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        total = 0.0
        for _ in pairs:
            p = pairs[rng.randrange(len(pairs))]
            b = [rng.randrange(len(p.bare.work)) for _ in p.bare.work]
            c = [rng.randrange(len(p.container.work)) for _ in p.container.work]
            total += math.log(p.container.speed(c) / p.bare.speed(b))
        stats.append(total / len(pairs))
    stats.sort()
    alpha = expanded_alpha(len(pairs))
    low = math.exp(stats[int(alpha * resamples)])
    high = math.exp(stats[min(resamples - 1, int((1 - alpha) * resamples))])
    return Estimate(ratio=point, low=low, high=high, pairs=len(pairs))


@dataclass(frozen=True)
class Verdict:
    outcome: str          # "pass" | "fail" | "inconclusive"
    message: str
    more_pairs: int       # for inconclusive: about how many more pairs would decide (0 otherwise)


def _pct(ratio: float) -> float:
    """Slowdown in percent: 0.93 → 7.0 (7% slower); 1.05 → -5.0 (5% faster)."""
    return (1 - ratio) * 100


def describe(ratio: float) -> str:
    slow = _pct(ratio)
    return f"{slow:.1f}% slower than" if slow >= 0 else f"{-slow:.1f}% faster than"


def verdict(name: str, est: Estimate, tol: Tolerance, *, sides: tuple[str, str] = ("container", "bare metal")) -> Verdict:
    """Pass when the whole interval lies inside [reference+lower, reference+upper], fail when it lies
    wholly outside, inconclusive otherwise — with about how many more pairs would decide.

    Message: "cnn: container 7.2% slower than bare metal (95% CI 5.9–8.4%, allowed 5.0%, 12+12 processes)"
    (interval and allowance in percent slower; a faster container shows negative percentages).
    """
    lo_ok, hi_ok = tol.reference + tol.lower, tol.reference + tol.upper
    allowed = f"allowed {-tol.lower * 100:.1f}%"
    if est.ratio > tol.reference:
        allowed += f" slower, {tol.upper * 100:.1f}% faster"
    what = (f"{name}: {sides[0]} {describe(est.ratio)} {sides[1]} (95% CI {_pct(est.high):.1f}–{_pct(est.low):.1f}%, "
            f"{allowed}, {est.pairs}+{est.pairs} processes)")
    if lo_ok <= est.low and est.high <= hi_ok:
        return Verdict("pass", what, 0)
    if est.high < lo_ok or est.low > hi_ok:
        return Verdict("fail", what, 0)
    # The interval straddles a bound; its width shrinks about as 1/sqrt(pairs).
    bound = lo_ok if est.low < lo_ok <= est.high else hi_ok
    distance = abs(est.ratio - bound) / est.ratio
    if distance < 1e-9:
        return Verdict("inconclusive", what + ": the estimate sits on the tolerance, more pairs cannot decide", 0)
    needed = math.ceil(est.pairs * (est.half_width / distance) ** 2)
    more = max(1, needed - est.pairs)
    return Verdict("inconclusive", what + f": inconclusive, about {more} more pairs would decide (--rounds)", more)
