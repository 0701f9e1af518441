"""MPI and fabric: 2-rank ping-pong/allreduce bare vs container, and the transport actually in use.

The container must be as fast as bare metal *and* use the same MPI library and transport: a
container MPI that silently fell back to TCP (the SuperMUC-NG story) fails here even when TCP
happens to be fast enough on a small machine.
"""

from __future__ import annotations

import pytest

from generator.suite.mpi import Sides, measure_and_judge, run_mpi, transport_problem
from generator.suite.plugin import SUITE, runtimes_under_test

pytestmark = pytest.mark.whole_machine      # two ranks: not beside another measurement


def pytest_generate_tests(metafunc):
    if "runtime" in metafunc.fixturenames:
        options = metafunc.config.stash[SUITE]
        names = list(runtimes_under_test(options)) if "mpi" in options.workloads else []
        metafunc.parametrize("runtime", names)


def test_mpi_bare_vs_container(benchmark, suite, site, images, bare_python, verdicts, runtime):
    sides = Sides(suite, site, images, bare_python("pytorch"), runtime)
    measure_and_judge(benchmark, suite, site, sides, runtime, sides.mode, verdicts)


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
