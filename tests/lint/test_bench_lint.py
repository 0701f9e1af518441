"""Benchmarks (pytest-benchmark; under the project's default --benchmark-disable each runs once):
linting the whole generated matrix, and hpccm's raw output against ours, findings counted."""

from __future__ import annotations

import pytest

from generator.lint import lint_sources
from generator.lint.model import collect

from .helpers import FIXTURES, RAW_SITES, all_sites, lint_pairs, matrix_sources, site_sources


@pytest.mark.benchmark(group="lint")
def test_bench_lint_generated_matrix(benchmark):
    pairs = matrix_sources()                        # rendering is not timed
    findings = benchmark.pedantic(lint_pairs, args=(pairs,), rounds=3, iterations=1)
    assert findings == []
    benchmark.extra_info.update(files=len(pairs), sites=len(all_sites()), findings=len(findings))


@pytest.mark.benchmark(group="lint")
def test_bench_hpccm_raw_vs_gen_recipe(benchmark):
    """The same sites (scripts/hpccm_raw.py's), both formats: hpccm's default rendering of plain
    building blocks vs gen-recipe's pytorch recipe (which carries more: the Python environment,
    the payload, the runtime stage)."""
    raw = collect([FIXTURES / "hpccm"])
    ours = [pair for name in RAW_SITES for pair in site_sources(name, ["pytorch"])]

    def count() -> tuple[int, int]:
        return sum(len(f) for f in lint_sources(raw)), len(lint_pairs(ours))

    raw_findings, our_findings = benchmark.pedantic(count, rounds=3, iterations=1)
    benchmark.extra_info.update(hpccm_raw_findings=raw_findings, gen_recipe_findings=our_findings,
                                hpccm_raw_files=len(raw), gen_recipe_files=len(ours), sites=list(RAW_SITES))
    assert our_findings == 0 < raw_findings
