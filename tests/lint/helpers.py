"""Shared by the lint tests: the generated matrix, the fixture corpus and its sidecars."""

from __future__ import annotations

import json
import os
from pathlib import Path

from generator.recipe import catalog, render
from generator.model import site
from generator.recipe.context import FORMATS
from generator.lint import DEFINITION, DOCKER, Finding, Source, Target, lint_sources, target_of
from generator.lint.model import kind_by_name

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "lint"
CORPUS = sorted(p for d in ("smelly", "hpccm", "build", "realworld", "equivalent") for p in (FIXTURES / d).iterdir()
                if kind_by_name(p.name))
# GEN_RECIPE_LINT_REGEN=1 pytest tests/lint/test_lint_fixtures.py rewrites the sidecars (review the diff!)
REGEN = os.environ.get("GEN_RECIPE_LINT_REGEN") == "1"
RAW_SITES = ("frontier", "ifca", "local", "supermuc")    # the sites scripts/hpccm_raw.py renders


def all_sites() -> list[str]:
    return sorted(set(site.builtin_names().values()))


def kind_of(fmt: str) -> str:
    return DOCKER if fmt == "docker" else DEFINITION


def site_sources(name: str, recipes: list[str] | None = None) -> list[tuple[Source, Target]]:
    """Every recipe × format of one site, rendered in memory, with the site's Apptainer target."""
    s = site.load(name)
    return [(Source(str(render.relpath(s, recipe, fmt)), render.recipe_text(s, recipe, fmt), kind_of(fmt)), target_of(s))
            for recipe in (recipes or catalog.names()) for fmt in FORMATS]


def matrix_sources() -> list[tuple[Source, Target]]:
    return [pair for name in all_sites() for pair in site_sources(name)]


def lint_pairs(pairs: list[tuple[Source, Target]]) -> list[Finding]:
    per_file = lint_sources([s for s, _ in pairs], targets=[t for _, t in pairs])
    return [f for findings in per_file for f in findings]


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".expected.json")


def load_expected(path: Path) -> dict:
    return json.loads(sidecar(path).read_text(encoding="utf-8"))


def dump_expected(data: dict) -> str:
    """One [line, rule] pair per line: sidecars are read in reviews."""
    out = []
    for key, value in data.items():
        if isinstance(value, list):
            inner = ",\n".join(f"    {json.dumps(v)}" for v in value)
            out.append(f'  "{key}": [\n{inner}\n  ]' if value else f'  "{key}": []')
        else:
            out.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(out) + "\n}\n"
