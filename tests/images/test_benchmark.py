"""Build-time and image-size figures (pytest-benchmark; docs/build.md records them).

Meaningful under the project's --benchmark-disable too: each benchmarked call runs once and its
result is checked. With --benchmark-enable --benchmark-json=FILE the figures land in
`extra_info`: cold build seconds (the session's first build, when it had to build), warm
(cached) build seconds, runtime-stage and single-stage (`--target devel`) sizes and their ratio.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.images import oci

CACHE = Path(__file__).resolve().parents[2] / "build"
TARGET_RATIO = 0.5


def quiet(line: str) -> None:
    pass


def test_build_time_cold_and_warm(benchmark, local_build, local_site):
    warm = benchmark.pedantic(oci.build_image, args=(local_site, "pytorch"),
                              kwargs={"cache_dir": CACHE, "progress": quiet}, rounds=3, iterations=1)
    benchmark.extra_info.update(
        ref=local_build.ref, cold_seconds=None if local_build.cached else round(local_build.seconds, 1),
        cold_was_cached=local_build.cached, warm_seconds=round(warm.seconds, 2))
    assert warm.cached and warm.ref == local_build.ref and warm.digest == local_build.digest


def test_runtime_stage_vs_single_stage_size(benchmark, local_build, local_site):
    devel = benchmark.pedantic(oci.build_image, args=(local_site, "pytorch"),
                               kwargs={"target": "devel", "cache_dir": CACHE, "progress": quiet},
                               rounds=1, iterations=1)
    ratio = local_build.size_bytes / devel.size_bytes
    benchmark.extra_info.update(runtime_bytes=local_build.size_bytes, single_stage_bytes=devel.size_bytes,
                                ratio=round(ratio, 3), target_ratio=TARGET_RATIO, single_stage_ref=devel.ref)
    assert devel.ref.endswith("-devel") and local_build.size_bytes < devel.size_bytes
    if ratio > TARGET_RATIO:
        pytest.xfail(f"runtime stage is {ratio:.0%} of the single-stage image (target {TARGET_RATIO:.0%}): "
                     "the torch wheel's files sit in both and dominate them (docs/build.md)")
