"""Benchmark: generating the full matrix (all sites × recipes × formats). Target: ≤ 3 s on 2 cores."""

from __future__ import annotations

from generator.recipe import catalog, render
from generator.model import site

from tests.helpers import all_sites


def generate_matrix() -> int:
    n = 0
    for name in all_sites():
        n += len(render.render_all(site.load(name), catalog.names(), ("docker", "apptainer")))
    return n


def test_bench_full_matrix(benchmark):
    files = benchmark.pedantic(generate_matrix, rounds=5, warmup_rounds=1)
    assert files == len(all_sites()) * len(catalog.names()) * 2
    benchmark.extra_info.update(files=files, target_seconds=3.0)
