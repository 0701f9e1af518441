"""Lint Dockerfiles (hadolint + gen-recipe checks) and Apptainer definitions (gen-recipe + ShellCheck).

    gen-recipe lint PATH... [--format text|json] [--fix [--no-backup]] [--target apptainer[:VERSION]]
    gen-recipe lint --explain ID

Exit 0: no findings (after --fix: none left); 1: findings; 2: bad input (unreadable file, not a
recipe, bad option).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from ..render import write_atomic
from .engine import lint_sources
from .fix import Fixed, fix_text
from .model import Finding, LintError, Source, Target, collect
from .rules import SEVERITIES, explain

JSON_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="Dockerfiles, Apptainer definitions, or directories holding them")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument("--fix", action="store_true", help="rewrite the smells that have a safe fix, then lint again")
    parser.add_argument("--no-backup", action="store_true", help="with --fix: keep no FILE.orig copy")
    parser.add_argument("--target", default="apptainer", metavar="RUNTIME[:VERSION]",
                        help="Apptainer/Singularity that reads the definitions, e.g. apptainer:1.3.6 or "
                             "singularity:3.1.0 (default: apptainer, any version)")
    parser.add_argument("--explain", metavar="ID", help="print what rule ID checks and why, and exit")


def fix_sources(sources: list[Source], backup: bool) -> tuple[list[Source], dict[str, list[Fixed]]]:
    """Fix each source in place (atomically, FILE.orig kept unless backup is False)."""
    fixed_sources, fixed = [], {}
    for src in sources:
        text, done = fix_text(src.text, src.kind)
        if text != src.text:
            path = Path(src.path)
            try:
                if backup:
                    write_atomic(path.with_name(path.name + ".orig"), src.text)
                write_atomic(path, text)
            except OSError as exc:
                raise LintError(f"lint: cannot write {exc.filename or path}: {exc.strerror or exc}") from None
        fixed[src.path] = done
        fixed_sources.append(Source(src.path, text, src.kind))
    return fixed_sources, fixed


def report_json(sources: list[Source], findings: list[Finding], fixed: dict[str, list[Fixed]] | None) -> str:
    fixed = fixed or {}
    counts = Counter(f.severity for f in findings)
    return json.dumps({
        "version": JSON_VERSION,
        "files": [{"file": s.path, "kind": s.kind} for s in sources],
        "findings": [f.as_dict() for f in findings],
        "fixed": [{"file": path, **f.as_dict()} for path, done in fixed.items() for f in done],
        "summary": {"files": len(sources), "findings": len(findings),
                    "fixed": sum(len(d) for d in fixed.values()),
                    **{s: counts.get(s, 0) for s in SEVERITIES}},
    }, indent=2)


def report_text(sources: list[Source], findings: list[Finding], fixed: dict[str, list[Fixed]] | None) -> str:
    """One line per fix and per finding, then a summary line."""
    lines = [f"{path}:{f.line}: fixed {f.rule}: {f.what}" for path, done in (fixed or {}).items() for f in done]
    lines += [str(f) for f in findings]
    n, files = len(findings), len(sources)
    summary = f"{n} finding{'' if n == 1 else 's'}{' left' if fixed is not None else ''} in {files} " \
              f"file{'' if files == 1 else 's'}"
    if fixed is not None:
        summary = f"fixed {sum(len(d) for d in fixed.values())}, {summary}"
    return "\n".join([*lines, summary])


def run(args: argparse.Namespace) -> int:
    if args.explain:
        print(explain(args.explain))
        return 0
    if not args.paths:
        raise LintError("lint: give one or more PATHs (files or directories), or --explain ID")
    if args.no_backup and not args.fix:
        raise LintError("lint: --no-backup only goes with --fix")
    target = Target.parse(args.target)
    sources = collect(args.paths)
    fixed: dict[str, list[Fixed]] | None = None
    if args.fix:
        sources, fixed = fix_sources(sources, backup=not args.no_backup)
    findings = sorted(f for per_file in lint_sources(sources, target) for f in per_file)
    print(report_json(sources, findings, fixed) if args.format == "json" else report_text(sources, findings, fixed))
    return 1 if findings else 0
