"""The suite's results as a markdown table and PNG plots (`gen-recipe report RESULTS.json [--out DIR]`).

RESULTS.json is pytest-benchmark's JSON (`pytest suites/ --benchmark-enable --benchmark-json=RESULTS.json`);
every comparison of the suite leaves its numbers in `extra_info`. `parse` reads it like a site file: the
fields the report reads are checked (types, kinds of strings, finite numbers, bounded lengths) and any
problem is one line naming the file, the JSON path and a fix. The report is DIR/report.md, DIR/ratios.png
(container/bare ratio with its 95% interval per comparison, tolerance band shaded) and DIR/series.png
(per-pair speeds, bare and container, per comparison), rendered in memory and written as one set.
"""

from __future__ import annotations

import io
import json
import math
import re
import statistics
from collections.abc import Sequence

from generator.errors import UsageError, shown
from generator.model.schema import MAX_INT, Loader, describe as described
from generator.suite.result import KEY, Result
from generator.suite.stats import describe

MAX_RESULTS_FILE = 64 << 20      # a suite run's JSON holds every chunk of every pair: larger than a site file

MAX_RESULTS = 256           # comparisons in one report (its plots have one panel each)
MAX_SERIES = 100_000        # per-pair values of one side
MAX_VALUE = 1e15            # any number the report reads (finite, of at most this size)
# The kinds (generator.model.schema.KINDS) of the strings a record has, and which keys it must have.
STRINGS = {"site": "name", "workload": "name", "runtime": "word", "metric": "word", "mode": "value", "message": "text"}
EXAMPLE = {"site": "frontier", "workload": "cnn", "runtime": "podman", "metric": "throughput", "mode": "hybrid",
           "message": "a verdict"}
REQUIRED = ("site", "workload", "runtime", "ratio", "low", "high", "pairs", "verdict")
VERDICTS = ("pass", "fail", "inconclusive", "unfit", "info")
FOREIGN = "not a record of gen-recipe's suite (written by another version?): rerun the suite with this gen-recipe"


def _median(values) -> float | None:
    values = [v for v in values or () if v is not None]
    return statistics.median(values) if values else None


def parse(text: str, path: str) -> list[Result]:
    """The comparisons in the text of a pytest-benchmark JSON file, checked (see the module docstring)."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise UsageError(f"{shown(path)}: JSON nested too deeply: give the file of --benchmark-json") from None
    except ValueError as exc:
        raise UsageError(f"{shown(path)}: not JSON ({exc}); give the file of --benchmark-json") from None
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        raise UsageError(f"{shown(path)}: no 'benchmarks' list: not pytest-benchmark JSON (--benchmark-json)")
    return rows(doc, path)


def rows(results: dict, path: str = "RESULTS") -> list[Result]:
    """Every comparison found in pytest-benchmark results (overhead, MPI metrics, start-up, controls)."""
    loader = Loader(str(path))
    benches = _typed(results.get("benchmarks"), list, "benchmarks", "an array", loader)
    out = []
    for i, bench in enumerate(benches):
        key = f"benchmarks[{i}]"
        extra = _typed(_typed(bench, dict, key, "an object", loader).get("extra_info"), dict, f"{key}.extra_info",
                       "an object", loader, optional=True)
        records = _typed((extra or {}).get(KEY), list, f"{key}.extra_info.{KEY}", "an array", loader, optional=True)
        for j, record in enumerate(records or ()):
            if len(out) == MAX_RESULTS:
                loader.fail(f"{key}.extra_info.{KEY}[{j}]", f"more than {MAX_RESULTS} comparisons in one report",
                            "report a part of the run (pytest -k)")
            out.append(_record(record, f"{key}.extra_info.{KEY}[{j}]", loader))
    return out


def _typed(value, tp: type, key: str, what: str, loader: Loader, optional: bool = False):
    if value is None and optional:
        return None
    if not isinstance(value, tp):
        loader.fail(key, f"expected {what}, got {described(value)}", FOREIGN)
    if tp is list and len(value) > MAX_SERIES:
        loader.fail(key, f"{len(value)} items is too many", f"at most {MAX_SERIES}")
    return value


def _number(value, key: str, loader: Loader) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > MAX_VALUE \
            or not math.isfinite(value):          # the size first: an int of 10**400 has no float (OverflowError)
        loader.fail(key, f"expected a finite number of at most {MAX_VALUE:g}, got {described(value)}", FOREIGN)
    return float(value)


def _record(raw, key: str, loader: Loader) -> Result:
    """One record of extra_info["results"] as a Result: the fields `Result.as_dict` writes, checked."""
    raw = _typed(raw, dict, key, "an object", loader)
    for name in REQUIRED:
        if name not in raw:
            loader.fail(f"{key}.{name}", "missing required key", FOREIGN)
    kw = {}
    for name, kind in STRINGS.items():
        if name in raw:
            if not isinstance(raw[name], str):
                loader.fail(f"{key}.{name}", f"expected a string, got {described(raw[name])}", FOREIGN)
            kw[name] = loader.check_string(raw[name], f"{key}.{name}", kind, EXAMPLE[name])
    for name in ("ratio", "low", "high"):
        kw[name] = _number(raw[name], f"{key}.{name}", loader)
        if kw[name] <= 0:       # a ratio of two speeds, and its interval
            loader.fail(f"{key}.{name}", f"expected a ratio above 0, got {described(raw[name])}", FOREIGN)
    if kw["low"] > kw["high"]:
        loader.fail(f"{key}.low", f"the interval's low end {kw['low']:g} is above its high end {kw['high']:g}", FOREIGN)
    pairs = raw["pairs"]
    if isinstance(pairs, bool) or not isinstance(pairs, int) or not 0 <= pairs <= MAX_INT:
        loader.fail(f"{key}.pairs", f"expected an integer from 0 to {MAX_INT}, got {described(pairs)}", FOREIGN)
    if raw["verdict"] not in VERDICTS:
        loader.fail(f"{key}.verdict", f"expected one of {', '.join(VERDICTS)}, got {described(raw['verdict'])}", FOREIGN)
    tolerance = _typed(raw.get("tolerance"), list, f"{key}.tolerance", "an array", loader, optional=True)
    if tolerance:
        if len(tolerance) != 4 or not isinstance(tolerance[3], str):
            loader.fail(f"{key}.tolerance", "expected [reference, lower, upper, unit]", FOREIGN)
        tolerance = (*(_number(x, f"{key}.tolerance[{i}]", loader) for i, x in enumerate(tolerance[:3])),
                     loader.check_string(tolerance[3], f"{key}.tolerance[3]", "word", "ratio"))
    for side in ("bare", "container"):
        values = _typed(raw.get(side), list, f"{key}.{side}", "an array", loader, optional=True) or ()
        kw[side] = tuple(_number(x, f"{key}.{side}[{i}]", loader) for i, x in enumerate(values))
    extra = _typed(raw.get("extra"), dict, f"{key}.extra", "an object", loader, optional=True)
    return Result(**kw, pairs=pairs, verdict=raw["verdict"], tolerance=tolerance or None, extra=extra or {})


def cell(value: object) -> str:
    """A string from the results as markdown shows it literally in a table cell or a line: control and
    escape characters as escapes (`errors.shown`), and `|`, backquotes and `<` escaped."""
    return re.sub(r"([|`<\\])", r"\\\1", shown(value))


def _num(v: float | None) -> str:
    return "-" if v is None else (f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}")


def markdown(table: list[Result]) -> str:
    lines = ["| site | workload | runtime | mode | metric | bare | container | ratio | 95% CI | pairs | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        strings = " | ".join(cell(v) for v in (r.site, r.workload, r.runtime, r.mode, r.metric))
        lines.append(f"| {strings} | {_num(_median(r.bare))} | "
                     f"{_num(_median(r.container))} | {r.ratio:.3f} | {r.low:.3f}–{r.high:.3f} | {r.pairs} | {r.verdict} |")
    return "\n".join(lines) + "\n"


def _share(value) -> str:
    """A wait or steal share from a record (untrusted: anything but a number in [0, 1] reads as unknown)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1 and math.isfinite(value)
    return f"{value:.1%}" if ok else "-"


def _context(env, side: str) -> str:
    record = env.get(side) if isinstance(env, dict) else None
    value = record.get("scheduling") if isinstance(record, dict) else None
    return cell(value) if isinstance(value, str) and len(value) <= 200 else "-"


def machine_markdown(table: list[Result]) -> str:
    """How the machine treated each fork-server comparison (docs/measuring.md): each side's scheduling context
    (like-for-like fingerprint) and the share of its time it waited for a CPU, the hypervisor's steal, and the
    verdict (`unfit` when the machine was too busy to decide). Empty when no result has these records."""
    lines = []
    for r in table:
        load, env = r.extra.get("load"), r.extra.get("environment")
        if not isinstance(load, dict) and not isinstance(env, dict):
            continue
        load = load if isinstance(load, dict) else {}
        strings = " | ".join(cell(v) for v in (r.site, r.workload, r.runtime))
        lines.append(f"| {strings} | {_context(env, 'bare')} / {_context(env, 'container')} | {_share(load.get('bare'))} / "
                     f"{_share(load.get('container'))} | {_share(load.get('steal'))} | {r.verdict} |")
    return _table(("site", "workload", "runtime", "scheduling bare / container", "waited for a CPU bare / container", "steal",
                   "verdict"), lines)


def _table(columns: Sequence[str], lines: Sequence[str]) -> str:
    """A markdown table of `lines` (rows already made) under `columns`; empty without rows."""
    if not lines:
        return ""
    return f"| {' | '.join(columns)} |\n|{'---|' * len(columns)}\n" + "\n".join(lines) + "\n"


COMPILED = "throughput-compiled"      # the metric of the compiled variant (suites/test_compiled.py)


def _cold(r: Result) -> str:
    cold = r.extra.get("cold_start_s")
    if not (isinstance(cold, list) and len(cold) == 2 and all(isinstance(x, (int, float)) and 0 <= x <= MAX_VALUE
                                                             and math.isfinite(x) for x in cold)):
        return "-"
    return f"{_num(cold[0])} s / {_num(cold[1])} s"


def compiled_markdown(table: list[Result]) -> str:
    """Eager and compiled side by side, where the results have both for a workload and runtime: each one's
    container/bare ratio with its interval, what compiling gains on each side (compiled / eager speed,
    medians) and the cold start with an empty kernel cache (bare / container). Empty when there is none."""
    eager = {(r.site, r.workload, r.runtime): r for r in table if r.metric == "throughput"}
    lines = []
    for r in table:
        e = eager.get((r.site, r.workload, r.runtime)) if r.metric == COMPILED else None
        if e is None:
            continue
        gain = [(_median(c) / _median(b)) if _median(c) and _median(b) else None
                for b, c in ((e.bare, r.bare), (e.container, r.container))]
        strings = " | ".join(cell(v) for v in (r.site, r.workload, r.runtime))
        lines.append(f"| {strings} | {e.ratio:.3f} ({e.low:.3f}–{e.high:.3f}) {e.verdict} | {r.ratio:.3f} "
                     f"({r.low:.3f}–{r.high:.3f}) {r.verdict} | {_num(gain[0])}× | {_num(gain[1])}× | {_cold(r)} |")
    return _table(("site", "workload", "runtime", "eager: container/bare", "compiled: container/bare", "compiled/eager bare",
                   "compiled/eager container", "cold compile start bare / container"), lines)


def _png(fig) -> bytes:
    """The figure as PNG bytes (written with the report as one set by the caller)."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    return buf.getvalue()


# Result.runtime of the controls (not a runtime): A/A kinds, the power test, comparisons under a CPU hog or
# beside busy neighbours (RUNTIME+bare-neighbours, RUNTIME+containers-neighbours).
CONTROLS = ("bare-bare", "container-container", "power")


def is_control(r: Result) -> bool:
    return r.runtime in CONTROLS or r.runtime.endswith(("+hog", "-neighbours"))


def _slower(ratio: float) -> str:
    return f"{(1 - ratio) * 100:.1f}%"


def headlines(table: list[Result]) -> list[str]:
    """One line per site: how many workloads are within tolerance with every runtime, and the worst case."""
    lines = []
    for site in sorted({r.site for r in table}):
        rows = [r for r in table if r.site == site and not is_control(r) and r.verdict != "info"]
        if not rows:
            continue
        workloads = sorted({(r.workload, r.metric) for r in rows})
        ok = [w for w in workloads if all(r.verdict == "pass" for r in rows if (r.workload, r.metric) == w)]
        worst = min(rows, key=lambda r: r.ratio)
        what = f"{worst.workload}" + (f" {worst.metric}" if worst.metric not in ("throughput",) else "")
        lines.append(f"{len(ok)} of {len(workloads)} workloads within tolerance on {site}; worst: {what} with "
                     f"{worst.runtime}, {describe(worst.ratio)} bare metal (95% CI {_slower(worst.high)} to "
                     f"{_slower(worst.low)} slower, {worst.pairs} pairs, {worst.verdict})")
    return lines


def plots(table: list[Result]) -> dict[str, bytes]:
    """{file name: PNG bytes} of the two plots."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("matplotlib is not installed: pip install 'gen-recipe[report]' (or give --no-plots)") from None
    colours = {"pass": "tab:green", "fail": "tab:red", "inconclusive": "tab:orange", "unfit": "tab:grey"}
    comparisons = [r for r in table if not is_control(r) and r.verdict != "info"]
    panels = sorted({(r.workload, r.metric) for r in comparisons}) or [("-", "-")]
    aa = [r for r in table if r.runtime == "bare-bare"]
    cols = min(3, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows + 0.6), squeeze=False)
    for ax, (workload, metric) in zip(axes.flat, panels):
        rows = sorted((r for r in comparisons if (r.workload, r.metric) == (workload, metric)), key=lambda r: r.runtime)
        for x, r in enumerate(rows):
            ax.errorbar([x], [r.ratio], yerr=[[max(r.ratio - r.low, 0)], [max(r.high - r.ratio, 0)]], fmt="o", capsize=5,
                        color=colours.get(r.verdict, "tab:gray"))
            ax.annotate(f"{r.pairs} pairs", (x, r.high), textcoords="offset points", xytext=(0, 4), ha="center",
                        fontsize=7)
            if r.tolerance:
                ref, lo, hi = r.tolerance[:3]
                ax.fill_between([x - 0.35, x + 0.35], ref + lo, ref + hi, color="tab:green", alpha=0.12, linewidth=0,
                                label="tolerance" if x == 0 else None)
        for r in aa[:1] if metric == "throughput" else ():   # the A/A control: "no difference" with this machinery
            ax.axhspan(r.low, r.high, color="tab:gray", alpha=0.15, label=f"A/A bare vs bare ({r.pairs} pairs)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(rows)), [r.runtime for r in rows], fontsize=8)
        ax.set_xlim(-0.6, max(len(rows), 1) - 0.4)
        ax.set_title(workload + ("" if metric == "throughput" else f" ({metric})"), fontsize=9)
        ax.set_ylabel("container / bare speed", fontsize=8)
        ax.tick_params(labelsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="lower right")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("\n".join(headlines(table)) or "Container overhead", fontsize=8)
    fig.tight_layout()
    ratios = _png(fig)
    plt.close(fig)

    labels = [f"{r.workload}/{r.runtime}" + (f"/{r.metric}" if r.workload == "mpi" else "") for r in table]
    cols = min(3, len(table))
    nrows = (len(table) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.6 * nrows), squeeze=False)
    for ax, r, label in zip(axes.flat, table, labels):
        ax.plot(range(1, len(r.bare) + 1), r.bare, "o-", label="bare", markersize=3)
        ax.plot(range(1, len(r.container) + 1), r.container, "s-", label="container", markersize=3)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("pair (process) #", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(table):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    series = _png(fig)
    plt.close(fig)
    return {"ratios.png": ratios, "series.png": series}
