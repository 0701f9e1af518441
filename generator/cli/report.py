"""gen-recipe report RESULTS.json [--out DIR]: the suite's results as a markdown table and PNG plots.

RESULTS.json is pytest-benchmark's JSON (`pytest suites/ --benchmark-enable --benchmark-json=RESULTS.json`);
the table and plots are made by `generator.suite.report`, in memory, then written as one set.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from generator.errors import GenRecipeError, UsageError, shown
from generator.files import read_text, write_set
from generator.suite.report import MAX_RESULTS_FILE, cell, compiled_markdown, headlines, machine_markdown, markdown, parse, plots



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="pytest-benchmark JSON of a suite run (--benchmark-json)")
    parser.add_argument("--out", type=Path, default=Path("report"), help="output directory (default: report)")
    parser.add_argument("--no-plots", action="store_true", help="write only the markdown table")


def run(args: argparse.Namespace) -> int:
    text = read_text(args.results, "results file (--benchmark-json)", max_bytes=MAX_RESULTS_FILE)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {shown(args.out)}: not a folder (give a folder for report.md and the plots)")
    table = parse(text, str(args.results))
    if not table:
        raise GenRecipeError(f"{shown(args.results)}: no suite comparisons in it (run pytest suites/ with "
                             "--benchmark-enable --benchmark-json=FILE)")
    heads = headlines(table)
    both = compiled_markdown(table)
    both = f"\n## Eager and compiled (torch.compile)\n\n{both}" if both else ""
    machine = machine_markdown(table)
    machine = f"\n## The machine during each comparison\n\n{machine}" if machine else ""
    md = f"# Container overhead\n\nFrom {cell(args.results.name)}.\n\n" + "".join(f"**{cell(h)}**\n\n" for h in heads) \
        + markdown(table) + both + machine
    files: dict[Path, str | bytes] = {args.out / "report.md": md}
    if not args.no_plots:
        files.update({args.out / name: png for name, png in plots(table).items()})
    write_set(files, root=args.out, flag=None)
    print("".join(shown(h) + "\n" for h in heads) + markdown(table) + both, end="")
    print("wrote " + ", ".join(shown(p) for p in files))
    return 0
