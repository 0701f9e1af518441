"""Text in, findings out: one function per kind of file, and a parallel runner for many files."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from generator.lint import definition, dockerfile, tools
from generator.lint.model import DEFINITION, DOCKER, Finding, Source, Target, kind_by_content
from generator.lint.rules import RULES


def _own(path: str, hits, ignore: dict[int, frozenset[str]]) -> list[Finding]:
    return [Finding(path, line, rule, RULES[rule].severity, msg) for line, rule, msg in hits
            if rule not in ignore.get(line, frozenset())]


def _docker_own(text: str, path: str) -> tuple[dict[int, frozenset[str]], list[Finding], set[int]]:
    instructions = dockerfile.parse(text)
    ignore = dockerfile.ignored(instructions)
    return ignore, _own(path, dockerfile.check(text), ignore), dockerfile.non_posix_runs(dockerfile.stages(instructions))


def _merge_docker(own: tuple[dict[int, frozenset[str]], list[Finding], set[int]], theirs: list[Finding]) -> list[Finding]:
    """Theirs with our pragmas applied and their POSIX-sh findings (SC3xxx) dropped where a SHELL runs bash."""
    ignore, ours, bash = own
    return sorted(set([f for f in theirs if f.rule not in ignore.get(f.line, frozenset())
                       and not (f.rule.startswith("SC3") and f.line in bash)] + ours))


def _merge_definition(checked, path: str, sc: list[Finding]) -> list[Finding]:
    hits, _, ignore = checked
    return sorted(set(_own(path, hits, ignore) + [f for f in sc if f.rule not in ignore.get(f.line, frozenset())]))


def _hadolint_input(text: str) -> tuple[str, list[int]]:
    return dockerfile.spaced_heredocs(text)


def _back(findings: list[Finding], origin: list[int]) -> list[Finding]:
    """hadolint's findings on the lines of the text it was given (see dockerfile.spaced_heredocs)."""
    return [dataclasses.replace(f, line=origin[min(f.line, len(origin)) - 1]) if origin else f for f in findings]


def lint_dockerfile(text: str, path: str) -> list[Finding]:
    """hadolint's findings plus ours (GR rules), with both pragmas applied to both."""
    given, origin = _hadolint_input(text)
    return _merge_docker(_docker_own(text, path), _back(tools.hadolint(given, path), origin))


def lint_definition(text: str, path: str, target: Target = Target()) -> list[Finding]:
    """Our definition checks plus ShellCheck on its scripts, pragmas applied."""
    checked = definition.check(text, target, path)
    return _merge_definition(checked, path, tools.shellcheck(checked[1], path))


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
    """Findings per source, in order. All Dockerfiles go to hadolint and all definition scripts to
    ShellCheck in a few batched processes (both at once); results are cached by content.
    `targets`: one Apptainer target per source, instead of `target` for all."""
    targets = list(targets) if targets is not None else [target] * len(sources)
    for s in sources:
        if s.kind not in (DOCKER, DEFINITION):
            raise ValueError(f"{s.path}: not a recipe")
    docker = [k for k, s in enumerate(sources) if s.kind == DOCKER]
    defs = [k for k, s in enumerate(sources) if s.kind == DEFINITION]
    own = {k: _docker_own(sources[k].text, sources[k].path) for k in docker}
    checked = {k: definition.check(sources[k].text, targets[k], sources[k].path) for k in defs}
    tools.budget()                                  # a bad $GEN_RECIPE_LINT_TIMEOUT: one line, before any work
    jobs = jobs or tools.default_jobs()
    with ThreadPoolExecutor(max_workers=2) as pool, tools.children_killed(pool):   # killed, then the threads end
        given = {k: _hadolint_input(sources[k].text) for k in docker}
        hado = pool.submit(tools.hadolint_many, [(given[k][0], sources[k].path) for k in docker], jobs)
        sc = pool.submit(tools.shellcheck_many, [(checked[k][1], sources[k].path) for k in defs], jobs)
        theirs = {k: _back(found, given[k][1]) for k, found in zip(docker, hado.result())} | dict(zip(defs, sc.result()))
    return [_merge_docker(own[k], theirs[k]) if k in own else _merge_definition(checked[k], sources[k].path, theirs[k])
            for k in range(len(sources))]
