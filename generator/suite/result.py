"""One record per suite comparison: what the tests store in pytest-benchmark's `extra_info["results"]`
and what `gen-recipe report` reads back (`as_dict` / `from_dict`, JSON-safe both ways)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

KEY = "results"     # extra_info[KEY] = [Result.as_dict(), ...]


@dataclass(frozen=True, kw_only=True)
class Result:
    site: str
    workload: str                  # cnn, mnist, mpi, ... (or the control's workload)
    runtime: str                   # a runtime, or the control's kind ("bare-bare", ...)
    metric: str = "throughput"     # throughput, mpi_latency, mpi_bandwidth, startup_s, ...
    mode: str = "-"
    ratio: float                   # container speed / bare speed (> 1: container faster)
    low: float                     # 95% interval of the ratio
    high: float
    pairs: int
    verdict: str                   # pass | fail | inconclusive | info
    message: str = ""
    tolerance: tuple | None = None     # (reference, lower, upper, unit)
    bare: tuple[float, ...] = ()       # per-process speeds (or values) of each side
    container: tuple[float, ...] = ()
    extra: Mapping[str, object] = field(default_factory=dict)   # chunk series, transport, injected slowdown, ...

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["tolerance"] = list(self.tolerance) if self.tolerance else None
        d["bare"], d["container"], d["extra"] = list(self.bare), list(self.container), dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> Result:
        """The inverse of `as_dict`; raises KeyError/TypeError/ValueError on a foreign record."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["tolerance"] = tuple(kw["tolerance"]) if kw.get("tolerance") else None
        for k in ("ratio", "low", "high"):
            kw[k] = float(kw[k])
        kw["pairs"] = int(kw["pairs"])
        kw["bare"], kw["container"] = tuple(map(float, kw.get("bare") or ())), tuple(map(float, kw.get("container") or ()))
        kw["extra"] = dict(kw.get("extra") or {})
        return cls(**kw)


def of(estimate, verdict, **kw) -> Result:
    """A Result from a stats estimate and verdict (`generator.suite.stats`)."""
    return Result(ratio=estimate.ratio, low=estimate.low, high=estimate.high, pairs=estimate.pairs,
                  verdict=verdict.outcome, message=verdict.message, **kw)


def of_pairs(verdict, pairs, **kw) -> Result:
    """A Result of a paired comparison: its verdict's estimate and outcome, and each side's per-process speeds."""
    return of(verdict.estimate, verdict, bare=tuple(p.bare.speed() for p in pairs),
              container=tuple(p.container.speed() for p in pairs), **kw)


def record(benchmark, results: Sequence[Result]) -> None:
    """Store `results` in the benchmark's extra_info (the one place tests write it)."""
    if benchmark is not None:
        benchmark.extra_info.setdefault(KEY, []).extend(r.as_dict() for r in results)
