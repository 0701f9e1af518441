"""Text in, findings out: one function per kind of file, and a parallel runner for many files."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from . import definition, dockerfile, tools
from .model import DEFINITION, DOCKER, Finding, Source, Target, kind_by_content
from .rules import RULES


def _own(path: str, hits, ignore: dict[int, frozenset[str]]) -> list[Finding]:
    return [Finding(path, line, rule, RULES[rule].severity, msg) for line, rule, msg in hits
            if rule not in ignore.get(line, frozenset())]


def lint_dockerfile(text: str, path: str) -> list[Finding]:
    """hadolint's findings plus ours (GR001-GR003), with both pragmas applied to both."""
    ignore = dockerfile.ignored(dockerfile.parse(text))
    theirs = [f for f in tools.hadolint(text, path) if f.rule not in ignore.get(f.line, frozenset())]
    return sorted(set(theirs + _own(path, dockerfile.check(text), ignore)))


def lint_definition(text: str, path: str, target: Target = Target()) -> list[Finding]:
    """Our definition checks plus ShellCheck on its scripts, pragmas applied."""
    hits, scripts, ignore = definition.check(text, target)
    sc = [f for f in tools.shellcheck(scripts, path) if f.rule not in ignore.get(f.line, frozenset())]
    return sorted(set(_own(path, hits, ignore) + sc))


def lint_text(text: str, path: str = "-", kind: str | None = None, target: Target = Target()) -> list[Finding]:
    kind = kind or kind_by_content(text)
    if kind == DOCKER:
        return lint_dockerfile(text, path)
    if kind == DEFINITION:
        return lint_definition(text, path, target)
    raise ValueError(f"{path}: not a recipe")


def lint_source(source: Source, target: Target = Target()) -> list[Finding]:
    return lint_text(source.text, source.path, source.kind, target)


def lint_sources(sources: Sequence[Source], target: Target = Target(), jobs: int | None = None,
                 targets: Sequence[Target] | None = None) -> list[list[Finding]]:
    """Findings per source, in order; the external linters run in parallel (one process each).
    `targets`: one Apptainer target per source, instead of `target` for all."""
    pairs = list(zip(sources, targets if targets is not None else [target] * len(sources)))
    jobs = jobs or min(8, os.cpu_count() or 1)
    if jobs == 1 or len(pairs) < 2:
        return [lint_source(s, t) for s, t in pairs]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda pair: lint_source(*pair), pairs))
