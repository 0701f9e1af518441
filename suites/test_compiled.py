"""torch.compile bare vs container: the compiled variant of the training workloads, paired as the eager ones.

Most PyTorch 2.x training code compiles its model; an image whose runtime stage cannot compile (no C++
compiler, no Python headers: Inductor's CPU backend builds its kernels at run time) or that keeps its
kernel caches where a read-only image cannot write, fails at the first step. Here both sides run
`--compile`, each with a kernel cache of its own (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and TMPDIR,
where Inductor keeps its precompiled headers): the first pair of a comparison compiles into an empty cache
(the cold start, reported bare vs container), the later pairs find their side's kernels there (a warm cache,
as a job's later steps do), and the throughput verdict is the usual one.

Which runs: compiled mnist with every runtime, compiled cnn with the first (CI time: a cold compile takes
half a minute here). The like-for-like guard refuses a compiled side against an eager one.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
from pathlib import Path

import pytest

from generator.run import runtimes
from generator.suite import harness, result
from generator.suite.plugin import SUITE, need_runtime, run_options, runtimes_under_test, settle, size, tolerance
from workloads.registry import WORKLOADS as REGISTRY

COMPILED = {"mnist": "every runtime", "cnn": "the first runtime"}
FLAG = "--compile"


def pytest_generate_tests(metafunc):
    if {"compiled", "runtime"} <= set(metafunc.fixturenames):
        options = metafunc.config.stash[SUITE]
        rts = runtimes_under_test(options)
        cases = [(w, r) for w, which in COMPILED.items() if w in options.workloads
                 for r in (rts if which == "every runtime" else rts[:1])]
        metafunc.parametrize("compiled,runtime", cases, ids=[f"{w}-compiled-{r}" for w, r in cases])


def cache_env(site, root) -> dict[str, str]:
    """One side's kernel caches under `root` (the site's variables, and TMPDIR for the precompiled headers)."""
    return {**runtimes.kernel_cache_env(site, str(root)), "TMPDIR": str(root)}


@pytest.fixture
def caches(compiled, runtime):
    """An empty kernel cache per side, in /tmp (which the container sees: shared, or bound in) and writable by
    the image's user (podman runs the image's USER, not the caller), removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix=f"gen-recipe-kernels-{compiled}-{runtime}-", dir="/tmp"))
    out = {}
    for side in ("bare", "container"):
        out[side] = top / side
        out[side].mkdir()
        out[side].chmod(0o1777)
    top.chmod(0o755)
    yield out
    shutil.rmtree(top, ignore_errors=True)


def test_compiled_overhead(benchmark, suite, site, images, bare_python, cpu_pin, verdicts, compiled, runtime, caches):
    need_runtime(suite, runtime)
    tol = tolerance(suite, compiled)
    w = size(site, compiled)
    w = dataclasses.replace(w, args=(*w.args, FLAG))
    image = images.for_runtime(REGISTRY[compiled].recipe, runtime)
    opts = dataclasses.replace(run_options(suite, runtime, env={**cpu_pin, **cache_env(site, caches["container"])}),
                               binds=runtimes.cache_binds(site, runtime, bind=str(caches["container"])))
    try:
        bare = harness.bare_side(site, bare_python(REGISTRY[compiled].recipe), opts.mode,
                                 {**cpu_pin, **cache_env(site, caches["bare"])})
        cont = harness.container_side(site, runtime, image, opts)
        comp, v = harness.decide(benchmark, bare, cont, compiled, w, f"{compiled} compiled ({runtime})", tol,
                                 rounds=suite.rounds)
    except harness.CannotRunHere as exc:
        pytest.skip(f"{compiled} --compile cannot run here: {str(exc).splitlines()[-1][:200]}")
    except harness.Unlike as exc:
        pytest.fail(str(exc), pytrace=False)
    for side, root in caches.items():
        assert any(root.rglob("*.so")) or any(root.rglob("*.py")), f"the {side} side compiled nothing into {root}"
    cold = comp.ready_s[0]
    warm = [statistics.median(x) for x in zip(*comp.ready_s[1:])] if len(comp.ready_s) > 1 else [None, None]
    result.record(benchmark, [result.of_pairs(
        v, comp.pairs, site=site.name, workload=compiled, runtime=runtime, mode=opts.mode, metric="throughput-compiled",
        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
        extra={"image": image, "image_digests": images.digests(REGISTRY[compiled].recipe), "look": v.look, "environment": dict(comp.environment),
               "compiled": True, "cold_start_s": list(cold), "warm_start_s": warm,
               "ready_s": [list(r) for r in comp.ready_s], **harness.load_record(comp)})])
    verdicts.append(v)
    print(f"\n{compiled} compiled ({runtime}): cold start bare {cold[0]:.1f} s, container {cold[1]:.1f} s"
          + (f"; warm {warm[0]:.1f} s, {warm[1]:.1f} s" if warm[0] is not None else ""))
    settle(v)
    assert v.outcome == "pass", v.message


def test_a_compiled_side_against_an_eager_one_gets_no_verdict(suite, site, bare_python, cpu_pin, tmp_path):
    """The like-for-like guard: the same workload compiled on one side and eager on the other is refused
    before anything is measured (the children's `environment` differ in `compiled`)."""
    if "mnist" not in suite.workloads:
        pytest.skip("mnist is not among --workloads")
    w = dataclasses.replace(size(site, "mnist"), chunks=1, steps=1)
    python = bare_python("pytorch")
    eager = harness.bare_side(site, python, "hybrid", cpu_pin)
    compiled = dataclasses.replace(harness.bare_side(site, python, "hybrid", {**cpu_pin, **cache_env(site, tmp_path)}),
                                   extra_args=(FLAG,))
    with pytest.raises(harness.Unlike, match="compiled False vs True"):
        harness.compare(eager, compiled, "mnist", w, pairs=1)
