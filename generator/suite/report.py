"""The suite's results as a markdown table and PNG plots (`gen-recipe report RESULTS.json [--out DIR]`).

RESULTS.json is pytest-benchmark's JSON (`pytest suites/ --benchmark-enable --benchmark-json=RESULTS.json`);
every comparison of the suite leaves its numbers in `extra_info`. Writes DIR/report.md, DIR/ratios.png
(container/bare ratio with its 95% interval per comparison, tolerance band shaded) and
DIR/series.png (per-pair speeds, bare and container, per comparison).
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from generator.errors import UsageError
from generator.suite.result import KEY, Result
from generator.suite.stats import describe


def _median(values) -> float | None:
    values = [v for v in values or () if v is not None]
    return statistics.median(values) if values else None


def rows(results: dict) -> list[Result]:
    """Every comparison found in pytest-benchmark results (overhead, MPI metrics, start-up, controls)."""
    out = []
    for bench in results.get("benchmarks", []):
        if not isinstance(bench, dict):
            continue
        for record in (bench.get("extra_info") or {}).get(KEY, []):
            try:
                out.append(Result.from_dict(record))
            except (KeyError, TypeError, ValueError, AttributeError):
                raise UsageError(f"benchmark {str(bench.get('name', '?'))[:80]!r}: a result record that is not "
                                 "gen-recipe's (written by another version?)") from None
    return out


def _num(v: float | None) -> str:
    return "-" if v is None else (f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}")


def markdown(table: list[Result]) -> str:
    lines = ["| site | workload | runtime | mode | metric | bare | container | ratio | 95% CI | pairs | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r.site} | {r.workload} | {r.runtime} | {r.mode} | {r.metric} | {_num(_median(r.bare))} | "
                     f"{_num(_median(r.container))} | {r.ratio:.3f} | {r.low:.3f}–{r.high:.3f} | {r.pairs} | {r.verdict} |")
    return "\n".join(lines) + "\n"


def _save(fig, path: Path) -> Path:
    """savefig, atomically: a temporary file beside the target, then rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=110, format="png")
    os.replace(tmp, path)
    return path


# Result.runtime of the controls (not a runtime): A/A kinds, the power test, comparisons under a CPU hog.
CONTROLS = ("bare-bare", "container-container", "power")


def is_control(r: Result) -> bool:
    return r.runtime in CONTROLS or r.runtime.endswith("+hog")


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


def plots(table: list[Result], out: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("matplotlib is not installed: pip install 'gen-recipe[report]' (or give --no-plots)") from None
    colours = {"pass": "tab:green", "fail": "tab:red", "inconclusive": "tab:orange"}
    comparisons = [r for r in table if not is_control(r) and r.verdict != "info"]
    panels = sorted({(r.workload, r.metric) for r in comparisons}) or [("-", "-")]
    aa = [r for r in table if r.runtime == "bare-bare"]
    cols = min(3, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows + 0.6), squeeze=False)
    for ax, (workload, metric) in zip(axes.flat, panels):
        rows = sorted((r for r in comparisons if (r.workload, r.metric) == (workload, metric)), key=lambda r: r.runtime)
        for x, r in enumerate(rows):
            ax.errorbar([x], [r.ratio], yerr=[[r.ratio - r.low], [r.high - r.ratio]], fmt="o", capsize=5,
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
    ratios = _save(fig, out / "ratios.png")
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
    series = _save(fig, out / "series.png")
    plt.close(fig)
    return [ratios, series]
