"""MPI and fabric: 2-rank ping-pong/allreduce bare vs container, the transport actually in use, and the MPI
library each rank loaded.

The container must be as fast as bare metal *and* use the intended MPI library and transport: a container
MPI that silently fell back to TCP (the SuperMUC-NG story) fails here even when TCP happens to be fast
enough on a small machine, and so does a bind-mode run whose ranks still loaded the image's MPI (or a
hybrid one whose ranks loaded the host's), whatever the timings say.
"""

from __future__ import annotations

import dataclasses

import pytest

from generator.suite.mpi import (GENERIC_TCP, THREE_WAY_ARGS, THREE_WAY_ROUNDS, Sides, judge_three_way, library_problem, measure_and_judge, run_mpi,
                                 three_way, transport_problem)
from generator.suite.plugin import SUITE, runtimes_under_test

pytestmark = pytest.mark.whole_machine      # two ranks: not beside another measurement


def pytest_generate_tests(metafunc):
    if "runtime" in metafunc.fixturenames:
        options = metafunc.config.stash[SUITE]
        names = list(runtimes_under_test(options)) if "mpi" in options.workloads else []
        if "mode" in metafunc.fixturenames:     # each MPI mode the runtime offers at the site (or --mode)
            pairs = [(r, m) for r in names if r in {x.name for x in options.site.runtimes}
                     for m in options.site.runtime(r).mpi_modes if options.mode in (None, m)]
            metafunc.parametrize(("runtime", "mode"), pairs, ids=[f"{r}-{m}" for r, m in pairs])
        else:
            metafunc.parametrize("runtime", names)


def test_mpi_bare_vs_container(benchmark, suite, site, images, bare_python, verdicts, runtime, mode):
    sides = Sides(suite, site, images, bare_python("pytorch"), runtime, mode=mode)
    measure_and_judge(benchmark, suite, site, sides, runtime, sides.mode, verdicts, label=f"{runtime}, {mode}")


def test_forced_tcp_in_the_container_is_caught(suite, site, images, bare_python):
    """Forcing the container's Open MPI onto TCP (OMPI_MCA_btl=tcp,self) must make the check fail."""
    if site.mpi.flavour != "openmpi":
        pytest.skip(f"the TCP injection uses Open MPI's MCA variables; site {site.name} runs {site.mpi.flavour}")
    runtime = site.container.runtime
    python = bare_python("pytorch")
    clean = Sides(suite, site, images, python, runtime)
    forced = Sides(suite, site, images, python, runtime, inject={"OMPI_MCA_btl": "tcp,self"})
    bare = run_mpi(clean.bare_argv, clean.bare_env)
    assert transport_problem(bare, run_mpi(clean.cont_argv, clean.cont_env)) is None
    problem = transport_problem(bare, run_mpi(forced.cont_argv, forced.cont_env))
    assert problem is not None and "tcp" in problem


def test_bind_mode_without_the_injection_is_caught(suite, site, images, bare_python, runtime):
    """Bind mode with the host MPI mounted but not put first on the library path (container.bind.env left out):
    the ranks load the image's MPI, and the check says so, naming the library they loaded instead."""
    if "bind" not in site.runtime(runtime).mpi_modes or "LD_LIBRARY_PATH" not in site.container.bind.env:
        pytest.skip(f"{runtime} at site {site.name} runs no bind mode with a library path to leave out")
    python = bare_python("pytorch")
    clean = Sides(suite, site, images, python, runtime, mode="bind")
    bare = run_mpi(clean.bare_argv, clean.bare_env)
    swapped = run_mpi(clean.cont_argv, clean.cont_env)
    assert transport_problem(bare, swapped, site, "bind") is None, swapped.get("mpi_library_paths")
    assert swapped["library_version"].split(",")[0] == bare["library_version"].split(",")[0]
    bind = dataclasses.replace(site.container.bind, env={k: v for k, v in site.container.bind.env.items()
                                                       if k != "LD_LIBRARY_PATH"})
    stripped = dataclasses.replace(site, container=dataclasses.replace(site.container, bind=bind))
    broken = Sides(suite, stripped, images, python, runtime, mode="bind")
    # nor the host MPI's library path of the launcher's environment, which ch-run passes in (docs/bind.md)
    broken.cont_env.pop("LD_LIBRARY_PATH", None)
    image_mpi = run_mpi(broken.cont_argv, broken.cont_env)
    problem = transport_problem(bare, image_mpi, site, "bind")
    assert problem is not None and "did not take" in problem, problem
    assert any(path in problem for path in image_mpi["mpi_library_paths"]), problem


def test_tuned_vs_generic_vs_bare(benchmark, suite, site, images, bare_python, verdicts):
    """The value of tuning, measured (MODAK's question): side by side in one run, bare metal, the image with the
    host's MPI bound in ("tuned for the site") and the same image on its own MPI over TCP only ("generic").
    The tuned image must pass against bare metal; the generic one must really be on TCP with the image's own
    MPI (else the comparison measures nothing); the generic/tuned ratio is recorded for the report."""
    runtime = site.container.runtime        # one runtime: test_mpi_bare_vs_container measures each one's bind mode
    modes = site.runtime(runtime).mpi_modes
    if "mpi" not in suite.workloads:
        pytest.skip("--workloads has no mpi")
    if not ("bind" in modes and "hybrid" in modes and site.container.bind.env):
        pytest.skip(f"{runtime} at site {site.name} does not offer both bind and hybrid mode")
    python = bare_python("pytorch")
    tuned = Sides(suite, site, images, python, runtime, mode="bind", args=THREE_WAY_ARGS)
    generic = Sides(suite, site, images, python, runtime, mode="hybrid", env=GENERIC_TCP, args=THREE_WAY_ARGS)
    bare, fast, slow = benchmark.pedantic(three_way, args=(tuned, tuned, generic),
                                          kwargs={"rounds": suite.rounds or THREE_WAY_ROUNDS}, rounds=1, iterations=1)
    assert transport_problem(bare[0], fast[0], site, "bind") is None, fast[0].get("mpi_library_paths")
    assert library_problem(site, "hybrid", slow[0]) is None, slow[0].get("mpi_library_paths")
    assert slow[0]["network"] == "tcp" and slow[0]["evidence"]["tcp_peer_connections"] > 0, slow[0]["evidence"]
    decided = judge_three_way(benchmark, suite, site, runtime, (bare, fast, slow), verdicts)
    failed = [v.message for (compared, _), v in decided.items() if compared == "tuned" and v.outcome != "pass"]
    assert not failed, "; ".join(failed)
