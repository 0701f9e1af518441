"""Benchmarks (pytest-benchmark; under the project's default --benchmark-disable each runs once):
linting the whole generated matrix, hpccm's raw output against ours, findings counted, and our own checks' time
in the number of instructions and stages."""

from __future__ import annotations

import gc
import time

import pytest

from generator.lint import definition, engine, lint_sources
from generator.lint.model import Target, collect

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


DOWNLOAD = "wget -q https://example.org/t.tar.gz"      # never deleted, never checked: GR002, GR004, AP016 look further
SHAPES = {      # (small, large: 10x, the text with n instructions, commands or stages)
    "Dockerfile RUNs": (2_000, 20_000, lambda n: "FROM debian:12\n" + f"RUN {DOWNLOAD}\n" * n + "USER 1\n"),
    "definition commands": (1_000, 10_000, lambda n: "Bootstrap: docker\nFrom: debian:12\n%post\n    cd /\n"
                            + f"    cd w && {DOWNLOAD}\n" * n),                   # /w/w/w/...: see shell.LONGEST_PATH
    "Dockerfile stages": (500, 5_000, lambda n: "FROM debian:12 AS s0\n" + "".join(
        f"FROM s{k} AS s{k + 1}\nWORKDIR w\nRUN {DOWNLOAD}\n" for k in range(n)) + "USER 1\n"),
    "definition stages": (500, 5_000, lambda n: "".join(
        f"Bootstrap: docker\nFrom: debian:12\nStage: s{k}\n%files from b{k}\n    /a /a\n%post\n    {DOWNLOAD}\n"
        for k in range(n))),
    "definition apps": (500, 5_000, lambda n: "Bootstrap: docker\nFrom: debian:12\n" + "".join(
        f"%appinstall a{k}\n    {DOWNLOAD}\n%apprun a{k}\n    exec true\n" for k in range(n))),
}
LINEAR = 30         # 10x the input, at most 30x the time: linear is 8-10x, quadratic 100x (12 failed when busy)


def own_checks(text: str) -> None:
    """What lint does with a file besides running hadolint and ShellCheck (those get a time budget per file, GR009)."""
    if text.startswith("FROM"):
        engine._docker_own(text, "x.Dockerfile")
        engine._hadolint_input(text)
    else:
        definition.check(text, Target(), "x.def")


def cpu_seconds(text: str) -> float:
    gc.collect()
    gc.disable()            # the checks' own growth, not the collector's
    try:
        start = time.process_time()
        own_checks(text)
        return time.process_time() - start
    finally:
        gc.enable()


@pytest.mark.benchmark(group="lint")
def test_bench_lint_is_linear_in_instructions_and_stages(benchmark):
    """Our own checks of 10x the instructions, commands, stages or apps take at most 30x as long, the two sizes measured
    side by side in this run (on a busy machine a pair is measured again, up to three times, until one is; quadratic
    code is 50-100x). Before: quadratic, 2,500 RUNs 2.3 s, 20,000 85 s; 500 chained stages a RecursionError."""
    texts = {shape: (make(small), make(large)) for shape, (small, large, make) in SHAPES.items()}

    def ratios() -> dict[str, float]:
        out = {}
        for shape, (small, large) in texts.items():
            pairs: list[tuple[float, float]] = []
            while len(pairs) < 3 and (not pairs or out[shape] > LINEAR):
                pairs.append((cpu_seconds(small), cpu_seconds(large)))
                out[shape] = min(b / max(a, 1e-3) for a, b in pairs)
            benchmark.extra_info[shape] = [[round(t, 3) for t in pair] for pair in pairs]
        return out

    found = benchmark.pedantic(ratios, rounds=1, iterations=1)
    benchmark.extra_info.update(ratios={shape: round(r, 1) for shape, r in found.items()})
    assert all(r <= LINEAR for r in found.values()), (found, benchmark.extra_info)
