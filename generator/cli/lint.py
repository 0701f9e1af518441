"""Lint Dockerfiles (hadolint + gen-recipe checks) and Apptainer definitions (gen-recipe + ShellCheck).

    gen-recipe lint PATH... [--format text|json] [--fix [--unsafe-fixes] [--no-backup]] [--target apptainer[:VERSION]]
                    [--build-arg NAME=VALUE ...]
    gen-recipe lint --explain ID

Exit 0: no findings (after --fix: none left); 1: findings; 2: bad input (unreadable file, not a
recipe, bad option).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections import Counter
from pathlib import Path

from generator.errors import UsageError, shown
from generator.files import WriteFailed, replaceable, write_set
from generator.lint.engine import lint_sources
from generator.lint.fix import Fixed, fix_all
from generator.lint.model import Finding, LintError, Source, Target, collect
from generator.lint.rules import SEVERITIES, explain

JSON_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="Dockerfiles, Apptainer definitions, or directories holding them")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument("--fix", action="store_true",
                        help="apply the rewrites that keep what the build produces, then lint again")
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help="with --fix (or alone): also the rewrites that may change it, each with the reason")
    parser.add_argument("--no-backup", action="store_true", help="with --fix: keep no FILE.orig copy")
    parser.add_argument("--target", default="apptainer", metavar="RUNTIME[:VERSION]",
                        help="Apptainer/Singularity that reads the definitions, e.g. apptainer:1.3.6 or "
                             "singularity:3.1.0 (default: apptainer, any version)")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="a definition's build argument, as `apptainer build --build-arg` gives it: replaces "
                             "{{ NAME }} before the checks (else the stage's %%arguments default)")
    parser.add_argument("--ignore", action="append", default=[], metavar="ID[,ID...]",
                        help="do not report these rule ids (repeatable)")
    parser.add_argument("--explain", metavar="ID", help="print what rule ID checks and why, and exit")


def backup_path(path: Path) -> Path:
    """FILE.orig, or FILE.orig.1, .2, ... when that exists: a backup is never overwritten."""
    candidate, n = path.with_name(path.name + ".orig"), 0
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}.orig.{n}")
    return candidate


def write_fixed(path: Path, old: str, new: str, backup: bool) -> None:
    """Replace the file (keeping its mode) and write its backup as one set, every check made before the first
    byte: a symbolic link, a special file or a file with other hard links is refused, backup and all."""
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        texts = {backup_path(path): old.encode("utf-8")} if backup else {}
        write_set({**texts, path: new.encode("utf-8")}, mode=mode, flag=None)
    except (UsageError, WriteFailed) as exc:
        raise LintError(f"lint: {exc}") from None
    except OSError as exc:
        raise LintError(f"lint: cannot write {shown(exc.filename or path)}: {exc.strerror or exc}") from None


def fix_sources(sources: list[Source], backup: bool, unsafe: bool = False
                ) -> tuple[list[Source], dict[str, list[Fixed]], list[tuple[str, str]]]:
    """Fix each source in place (atomically, a numbered FILE.orig kept unless backup is False). Every file to
    rewrite is checked (links, special files, hard links) before the first is written: one refused file
    leaves all of them as they were. Also returns the files whose fixing stopped early, with why."""
    fixed_sources, fixed, limited, changed = [], {}, [], []
    for src in sources:
        text, done, stopped = fix_all(src.text, src.kind, unsafe)
        if stopped:
            limited.append((src.path, stopped))
        if text != src.text:
            changed.append((Path(src.path), src.text, text))
        fixed[src.path] = done
        fixed_sources.append(Source(src.path, text, src.kind))
    for path, _, _ in changed:
        try:
            replaceable(path, follow_symlinks=False, flag=None)
        except (UsageError, WriteFailed) as exc:
            raise LintError(f"lint: {exc}" + (" (no file was rewritten)" if len(changed) > 1 else "")) from None
    for path, old, new in changed:
        write_fixed(path, old, new, backup)
    return fixed_sources, fixed, limited


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
                    "unsafe_fixed": sum(bool(f.unsafe) for d in fixed.values() for f in d),
                    **{s: counts.get(s, 0) for s in SEVERITIES}},
    }, indent=2)


def report_text(sources: list[Source], findings: list[Finding], fixed: dict[str, list[Fixed]] | None) -> str:
    """One line per fix and per finding, then a summary line."""
    lines = [f"{path}:{f.line}: fixed {f.rule}: {f.what}" + (f" (unsafe: {f.unsafe})" if f.unsafe else "")
             for path, done in (fixed or {}).items() for f in done]
    lines += [str(f) for f in findings]
    lines = [shown(line) for line in lines]             # file names and file content: no escape codes
    n, files = len(findings), len(sources)
    summary = f"{n} finding{'' if n == 1 else 's'}{' left' if fixed is not None else ''} in {files} " \
              f"file{'' if files == 1 else 's'}"
    if fixed is not None:
        unsafe = sum(bool(f.unsafe) for d in fixed.values() for f in d)
        summary = f"fixed {sum(len(d) for d in fixed.values())}{f' ({unsafe} unsafe)' if unsafe else ''}, {summary}"
    return "\n".join([*lines, summary])


def report_skipped(skipped: list[tuple[str, str]], most: int = 20) -> None:
    """On stderr: each file directory mode did not lint, with the reason; past `most`, a count per reason."""
    if len(skipped) <= most:
        for path, why in skipped:
            print(f"gen-recipe: lint: skipped {shown(path)}: {why}", file=sys.stderr)
        return
    for why, n in sorted(Counter(why for _, why in skipped).items()):
        examples = shown(", ".join(p for p, w in skipped if w == why))
        print(f"gen-recipe: lint: skipped {n} (e.g. {examples[:150]}): {why}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.explain:
        print(explain(args.explain))
        return 0
    if not args.paths:
        raise LintError("lint: give one or more PATHs (files or directories), or --explain ID")
    fix = args.fix or args.unsafe_fixes
    if args.no_backup and not fix:
        raise LintError("lint: --no-backup only goes with --fix")
    target = Target.parse(args.target).with_build_args(args.build_arg)
    skipped: list[tuple[str, str]] = []
    sources = collect(args.paths, skipped)
    report_skipped(skipped)
    fixed: dict[str, list[Fixed]] | None = None
    if fix:
        sources, fixed, limited = fix_sources(sources, backup=not args.no_backup, unsafe=args.unsafe_fixes)
        for path, why in limited:
            print(f"gen-recipe: lint: {shown(path)}: {why}", file=sys.stderr)
    ignore = {i.strip().upper() for arg in args.ignore for i in arg.split(",") if i.strip()}
    findings = sorted(f for per_file in lint_sources(sources, target) for f in per_file if f.rule not in ignore)
    print(report_json(sources, findings, fixed) if args.format == "json" else report_text(sources, findings, fixed))
    return 1 if findings else 0
