"""Your application's workload, bare vs container: `pytest suites/ --site=S --recipe app.toml`.

Each pair is one fresh run of the workload's command on the host (the user's own files, the bare twin of
the image's Python environment first on PATH) and one in the site's container runtime, in random order;
each run reports one value of the metric (a JSON key or a regular expression on its output). Pairs are
added until the interval decides (generator.suite.sequential), as for the built-in workloads. Before
measuring, both sides list the versions of the recipe's Python packages: unlike sides get no verdict.
"""

from __future__ import annotations

import dataclasses

import pytest

from generator.model.site import Tolerance
from generator.suite import result
from generator.suite import harness
from generator.suite.plugin import SUITE, need_runtime, run_options, runtimes_under_test, settle


def pytest_generate_tests(metafunc):
    if "app_runtime" in metafunc.fixturenames:
        options = metafunc.config.stash[SUITE]
        names = list(runtimes_under_test(options)) if options.recipe else []
        metafunc.parametrize("app_runtime", names)


def app_tolerance(suite, recipe) -> Tolerance:
    w = recipe.workload
    slower = suite.tolerance if suite.tolerance is not None else w.tolerance
    if slower is None:
        pytest.skip(f"no tolerance for {recipe.name}: set [workload] tolerance in {recipe.source} (e.g. 0.10), "
                    "or pass --tolerance")
    return Tolerance(reference=1.0, lower=-slower, upper=w.faster, unit="ratio")


def package_names(spec) -> list[str]:
    """The distributions a Python spec pins (torch, mpi4py, its requirements and the app's)."""
    import re

    pins = [*(r for _, reqs in spec.index_packages for r in reqs), *spec.requirements, *spec.app]
    names = [re.split(r"[\[=<>~!]", p, maxsplit=1)[0] for p in pins]
    names += ["torch"] if spec.wheels else []
    names += ["mpi4py"] if spec.mpi4py or spec.system_site_packages else []
    return sorted(set(names))


def test_app_overhead(benchmark, suite, site, images, bare_python, verdicts, app_runtime):
    recipe, runtime = suite.recipe, app_runtime
    w = recipe.workload
    if w is None:
        pytest.skip(f"recipe {recipe.name} declares no workload to measure: add a [workload] table to {recipe.source} "
                    "(docs/apps.md)")
    need_runtime(suite, runtime)
    tol = app_tolerance(suite, recipe)
    spec = recipe.python(site)
    python = bare_python(recipe) if spec is not None else None
    image = images.for_runtime(recipe, runtime)
    opts = run_options(suite, runtime)
    bare = harness.app_bare_run(site, recipe, python, opts.mode)
    cont = harness.app_container_run(site, runtime, image, w.command, opts)
    label = f"{recipe.name} ({runtime})"
    try:
        if spec is not None:      # also runs the container side's set-up commands
            probe = harness.versions_argv(package_names(spec))
            harness.same_packages(dataclasses.replace(bare, argv=probe),
                                  harness.app_container_run(site, runtime, image, probe, opts))
        comp, v = harness.decide_with(benchmark, lambda pairs, until: harness.compare_runs(
            bare, cont, w, pairs, until=until, setup=spec is None), label, tol, rounds=suite.rounds)
    except harness.HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    metric = "throughput" if w.better == "higher" else "time"
    result.record(benchmark, [result.of_pairs(
        v, comp.pairs, site=site.name, workload=recipe.name, runtime=runtime, mode=opts.mode, metric=metric,
        tolerance=(tol.reference, tol.lower, tol.upper, tol.unit),
        extra={"image": image, "image_digests": images.digests(recipe), "look": v.look, "unit": w.unit, "bare_values": comp.series.get("a", []),
               "container_values": comp.series.get("b", []), "wall_s": [list(r) for r in comp.ready_s],
               **harness.load_record(comp)})])
    verdicts.append(v)
    settle(v)
    assert v.outcome == "pass", v.message
