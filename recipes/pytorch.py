"""PyTorch training image: torch for the site's GPU stack, mpi4py on the container MPI, the training workloads."""

from __future__ import annotations

import hpccm

from generator import api


def python(site: api.Site) -> api.PythonSpec:
    """torch for the GPU stack and mpi4py on the container MPI (the training workloads need nothing more)."""
    return api.python_spec(site, api.plan(site))


def build(site: api.Site) -> list[hpccm.Stage]:
    p = api.plan(site)
    return api.two_stage(site, "pytorch", p, keep=[*api.comm_stack(site, p), api.python_env(site, python(site))],
                         runtime_extra=[api.workloads_payload()], command=("python3", "-m", "workloads"))
