"""gen-recipe report RESULTS.json [--out DIR]: the suite's results as a markdown table and PNG plots.

RESULTS.json is pytest-benchmark's JSON (`pytest suites/ --benchmark-enable --benchmark-json=RESULTS.json`);
the table and plots are made by `generator.suite.report`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from generator.errors import GenRecipeError, UsageError
from generator.files import write_atomic
from generator.suite.report import headlines, markdown, plots, rows


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
    heads = headlines(table)
    md = f"# Container overhead\n\nFrom `{args.results.name}`.\n\n" + "".join(f"**{h}**\n\n" for h in heads) + markdown(table)
    written = [args.out / "report.md"]
    write_atomic(written[0], md)
    if not args.no_plots:
        written += plots(table, args.out)
    print("".join(h + "\n" for h in heads) + markdown(table), end="")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
