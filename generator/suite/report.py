"""gen-recipe report RESULTS.json [--out DIR]: the suite's results as a markdown table and PNG plots.

RESULTS.json is pytest-benchmark's JSON (`pytest suites/ --benchmark-enable --benchmark-json=RESULTS.json`);
every comparison of the suite leaves its numbers in `extra_info`. Writes DIR/report.md, DIR/ratios.png
(container/bare ratio with its 95% interval per comparison, tolerance band shaded) and
DIR/series.png (per-pair speeds, bare and container, per comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from ..errors import GenRecipeError, UsageError
from ..files import write_atomic
from .result import KEY, Result


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


def plots(table: list[Result], out: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("matplotlib is not installed: pip install 'gen-recipe[report]' (or give --no-plots)") from None
    labels = [f"{r.workload}/{r.runtime}" + (f"/{r.metric}" if r.workload == "mpi" else "") for r in table]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(table) + 2), 4))
    xs = range(len(table))
    colours = {"pass": "tab:green", "fail": "tab:red", "inconclusive": "tab:orange"}
    for x, r in zip(xs, table):
        ax.errorbar([x], [r.ratio], yerr=[[r.ratio - r.low], [r.high - r.ratio]], fmt="o", capsize=4,
                    color=colours.get(r.verdict, "tab:gray"))
        if r.tolerance:
            ref, lo, hi = r.tolerance[:3]
            ax.fill_between([x - 0.4, x + 0.4], ref + lo, ref + hi, color="tab:green", alpha=0.12, linewidth=0)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("container / bare speed (95% CI)")
    ax.set_title("Container overhead (shaded: allowed by the site's tolerance)")
    fig.tight_layout()
    ratios = _save(fig, out / "ratios.png")
    plt.close(fig)

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="pytest-benchmark JSON of a suite run (--benchmark-json)")
    parser.add_argument("--out", type=Path, default=Path("report"), help="output directory (default: report)")
    parser.add_argument("--no-plots", action="store_true", help="write only the markdown table")


def run(args: argparse.Namespace) -> int:
    try:
        results = json.loads(args.results.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{args.results}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"{args.results}: not JSON ({exc}); give the file of --benchmark-json") from None
    if not isinstance(results, dict) or "benchmarks" not in results:
        raise UsageError(f"{args.results}: no 'benchmarks' list: not pytest-benchmark JSON (--benchmark-json)")
    table = rows(results)
    if not table:
        raise GenRecipeError(f"{args.results}: no suite comparisons in it (run pytest suites/ with "
                             "--benchmark-enable --benchmark-json=FILE)")
    args.out.mkdir(parents=True, exist_ok=True)
    md = f"# Container overhead\n\nFrom `{args.results.name}`.\n\n" + markdown(table)
    written = [args.out / "report.md"]
    write_atomic(written[0], md)
    if not args.no_plots:
        written += plots(table, args.out)
    print(markdown(table), end="")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
