"""Golden files: every site × recipe × format, byte for byte.

Regenerate after an intended change with:  UPDATE_GOLDEN=1 ./scripts/test tests/recipe/test_golden.py
and review the diff (git diff tests/golden) like any code change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.recipe import catalog, render
from generator.model import site

from tests.helpers import all_sites

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
MATRIX = [(s, r, f) for s in all_sites() for r in catalog.names() for f in ("docker", "apptainer")]


@pytest.mark.parametrize("site_name,recipe,fmt", MATRIX, ids=["-".join(m) for m in MATRIX])
def test_golden(site_name, recipe, fmt, golden):
    s = site.load(site_name)
    golden(GOLDEN / render.relpath(s, recipe, fmt), render.recipe_text(s, recipe, fmt))


def test_no_stray_golden_files():
    expected = {GOLDEN / render.relpath(site.load(s), r, f) for s, r, f in MATRIX}
    present = {p for p in GOLDEN.rglob("*") if p.is_file() and p.suffix in (".Dockerfile", ".def")}
    assert present == expected
