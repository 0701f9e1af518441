"""Container-vs-bare statistics with processes as the replicates.

On these machines each process gets its own lasting speed (sd ≈ 9% between identical processes,
see docs/measuring.md), so many steps of one process are not independent samples. The unit here is the
*pair*: one bare process and one container process started next to each other, their work interleaved
in short chunks. Each process's speed is its work over its time; a pair's ratio is container speed over
bare speed; the estimate is the geometric mean of the pair ratios, and its 95% interval comes from a
hierarchical bootstrap: resample pairs, then within each resampled process resample its chunks.

With a dozen pairs a plain percentile interval is too narrow (it uses the normal quantile where the
spread of a mean of n is Student's t with n-1 degrees of freedom, and the bootstrap variance is short
by (n-1)/n); the interval is the *expanded percentile* one ("What Teachers Should Know About the
Bootstrap", Hesterberg 2015): the bootstrap quantiles at Φ(-√(n/(n-1))·t(n-1, 0.975)) and its mirror,
about 1.1% and 98.9% for 12 pairs.

Intervals are of the mean log ratio, reported as exp of their ends: a ratio interval is never below 0.
Heavy-tailed metrics (a latency sampled many times, where a descheduled sample can be 100x the rest)
summarise each process by the median of its samples (`Process.of_samples`). `sequential.py` adds pairs
until the interval decides.

"Speed" is higher-is-better everywhere: throughput as is, times and latencies inverted, so one
tolerance rule fits all metrics: ratio = container speed / bare speed, 1.0 = no overhead, 0.93 = the
container is 7% slower.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from generator.model.site import Tolerance

BOOTSTRAP = 4000
CONFIDENCE = 0.95


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution function, exact for integer df by the finite series of Abramowitz &
    Stegun 26.7.3-4 (Handbook of Mathematical Functions), in the angle θ = atan(t/√df)."""
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2:
        # the odd series: θ + sinθ cosθ (1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + …), df - 1 terms in all
        series, term = 0.0, 1.0
        for k in range((df - 1) // 2):
            series += term
            term *= c2 * (2 * k + 2) / (2 * k + 3)
        inside = 2 / math.pi * (theta + s * math.sqrt(c2) * series)
    else:
        series, term = 0.0, 1.0
        for k in range(df // 2):
            series += term
            term *= c2 * (2 * k + 1) / (2 * k + 2)
        inside = s * series
    tail = (1 - inside) / 2
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (upper tail, p > 0.5), by bisection on `t_cdf`: exact also far in the tail,
    where the sequential design's early looks read it (p = 1 - 1e-6 and beyond)."""
    if not 0.5 < p < 1:
        raise ValueError(f"t_quantile needs 0.5 < p < 1, got {p}")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2


def expanded_alpha(n: int, confidence: float = CONFIDENCE) -> float:
    """The lower tail probability at which the expanded percentile interval reads the bootstrap."""
    t = t_quantile(1 - (1 - confidence) / 2, n - 1)
    return NormalDist().cdf(-math.sqrt(n / (n - 1)) * t)


@dataclass(frozen=True)
class Process:
    """One process's chunks: work done (samples, tokens, 1 for a timed call) and seconds each took.

    Its speed is its total work over its total time; with `median` it is the median of the chunks' own
    speeds instead, for heavy-tailed metrics (a latency measured many times, where one descheduled
    sample can be 3x the rest): see `of_samples`."""

    work: tuple[float, ...]
    seconds: tuple[float, ...]
    median: bool = False

    @classmethod
    def of_samples(cls, values: Sequence[float], *, time: bool) -> Process:
        """A process measured by many samples of one metric, summarised by their median: latencies or
        durations (`time`: lower is better, speed = 1/value) or rates (higher is better)."""
        values = tuple(float(v) for v in values)
        ones = (1.0,) * len(values)
        return cls(work=ones, seconds=values, median=True) if time else cls(work=values, seconds=ones, median=True)

    def speed(self, idx: Sequence[int] | None = None) -> float:
        idx = range(len(self.work)) if idx is None else idx
        if self.median:
            return statistics.median(self.work[i] / self.seconds[i] for i in idx)
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
    low: float            # 95% interval: exp of an interval of the mean log ratio, so always > 0
    high: float
    pairs: int
    level: float = CONFIDENCE   # the nominal two-sided level of this interval on its own (see sequential)

    @property
    def half_width(self) -> float:
        """Half the interval's width, relative to the estimate."""
        return (self.high - self.low) / 2 / self.ratio


def _bootstrap_logs(pairs: Sequence[Pair], seed: int, resamples: int) -> list[float]:
    """Hierarchical bootstrap of the mean log ratio: resample pairs, then each process's chunks."""
    rng = random.Random(seed)
    out = []
    for _ in range(resamples):
        total = 0.0
        for _ in pairs:
            p = pairs[rng.randrange(len(pairs))]
            b = [rng.randrange(len(p.bare.work)) for _ in p.bare.work]
            c = [rng.randrange(len(p.container.work)) for _ in p.container.work]
            total += math.log(p.container.speed(c) / p.bare.speed(b))
        out.append(total / len(pairs))
    return out


def estimate(pairs: Sequence[Pair], *, seed: int = 0, resamples: int = BOOTSTRAP) -> Estimate:
    """Geometric-mean ratio and its hierarchical-bootstrap interval (expanded percentile)."""
    if len(pairs) < 2:
        raise ValueError("need at least 2 pairs of processes for an interval")
    logs = [math.log(p.ratio) for p in pairs]
    point = math.exp(sum(logs) / len(logs))
    stats = sorted(_bootstrap_logs(pairs, seed, resamples))
    alpha = expanded_alpha(len(pairs))
    low = math.exp(stats[int(alpha * resamples)])
    high = math.exp(stats[min(resamples - 1, int((1 - alpha) * resamples))])
    return Estimate(ratio=point, low=low, high=high, pairs=len(pairs))


@dataclass(frozen=True)
class Verdict:
    outcome: str          # "pass" | "fail" | "inconclusive"; a sequential look that has not decided: "continue"
    message: str
    more_pairs: int       # for inconclusive: about how many more pairs would decide (0 otherwise)
    pairs: int = 0        # pairs the verdict rests on
    look: int = 0         # sequential designs: the look that gave it (1-based); 0 for a fixed number of pairs
    estimate: Estimate | None = None

    @property
    def decided(self) -> bool:
        return self.outcome in ("pass", "fail")


def _pct(ratio: float) -> float:
    """Slowdown in percent: 0.93 → 7.0 (7% slower); 1.05 → -5.0 (5% faster)."""
    return (1 - ratio) * 100


def describe(ratio: float) -> str:
    slow = _pct(ratio)
    return f"{slow:.1f}% slower than" if slow >= 0 else f"{-slow:.1f}% faster than"


# Within these ratios intervals read as percent slower; wider ones (heavy-tailed metrics such as MPI
# latency) as speed ratios, where "-276% slower" would be hard to read.
PERCENT_RANGE = (0.5, 2.0)


def describe_interval(name: str, est: Estimate, tol: Tolerance, sides: tuple[str, str], count: str) -> str:
    """"cnn: container 7.2% slower than bare metal (95% CI 5.9–8.4%, allowed 5.0%, COUNT)"."""
    lo_ok, hi_ok = tol.reference + tol.lower, tol.reference + tol.upper
    if PERCENT_RANGE[0] <= est.low and est.high <= PERCENT_RANGE[1]:
        interval = f"95% CI {_pct(est.high):.1f}–{_pct(est.low):.1f}%"
        allowed = f"allowed {-tol.lower * 100:.1f}%"
        if est.ratio > tol.reference:
            allowed += f" slower, {tol.upper * 100:.1f}% faster"
    else:
        interval = f"95% CI of the speed ratio {est.low:.2f}–{est.high:.2f}"
        allowed = f"allowed {lo_ok:.2f}–{hi_ok:.2f}"
    return f"{name}: {sides[0]} {describe(est.ratio)} {sides[1]} ({interval}, {allowed}, {count})"


def outcome(est: Estimate, tol: Tolerance) -> str:
    """"fail" when the interval lies wholly outside [reference+lower, reference+upper]; "pass" when its slow
    end lies inside (the overhead claim, at the interval's confidence) and the estimate is not beyond the fast
    bound; "inconclusive" otherwise. The fast bound is a plausibility check (a container far faster than bare
    metal is not running the same thing), not a claim: it fails a comparison only when the whole interval is
    beyond it, and an interval that merely reaches past it does not hold back a pass (MPI bandwidth on two
    shared CPUs: 50% faster, 95% CI of the speed ratio 1.09–2.06 against 2.00, after 32 pairs)."""
    lo_ok, hi_ok = tol.reference + tol.lower, tol.reference + tol.upper
    if lo_ok <= est.low and est.ratio <= hi_ok:
        return "pass"
    if est.high < lo_ok or est.low > hi_ok:
        return "fail"
    return "inconclusive"


def fast_note(est: Estimate, tol: Tolerance) -> str:
    """What a pass whose interval reaches past the faster bound says of it ("" otherwise): `outcome` checks that
    bound on the estimate, not on the interval."""
    return ": its interval reaches past the faster bound, which is checked on the estimate only" \
        if est.high > tol.reference + tol.upper else ""


def more_pairs(est: Estimate, tol: Tolerance) -> int:
    """About how many more pairs would decide an interval that straddles a bound: its width on the log
    scale shrinks about as 1/sqrt(pairs). 0 when the estimate sits on the bound (nothing decides)."""
    lo_ok, hi_ok = tol.reference + tol.lower, tol.reference + tol.upper
    bound = lo_ok if est.low < lo_ok <= est.high else hi_ok
    distance = abs(math.log(est.ratio / bound))
    if distance < 1e-9:
        return 0
    half_width = math.log(est.high / est.low) / 2
    return max(1, math.ceil(est.pairs * (half_width / distance) ** 2) - est.pairs)


def verdict(name: str, est: Estimate, tol: Tolerance, *,
            sides: tuple[str, str] = ("container", "bare metal")) -> Verdict:
    """Pass, fail or inconclusive (`outcome`) — with about how many more pairs would decide.

    Message: "cnn: container 7.2% slower than bare metal (95% CI 5.9–8.4%, allowed 5.0%, 12+12 processes)"
    (interval and allowance in percent slower; a faster container shows negative percentages).
    """
    what = describe_interval(name, est, tol, sides, f"{est.pairs}+{est.pairs} processes")
    result = outcome(est, tol)
    if result != "inconclusive":
        return Verdict(result, what + (fast_note(est, tol) if result == "pass" else ""), 0, est.pairs, 0, est)
    more = more_pairs(est, tol)
    if more == 0:
        return Verdict("inconclusive", what + ": the estimate sits on the tolerance, more pairs cannot decide", 0,
                       est.pairs, 0, est)
    return Verdict("inconclusive", what + f": inconclusive, about {more} more pairs would decide (--rounds)", more,
                   est.pairs, 0, est)
