"""PyTorch training image: torch for the site's GPU stack, mpi4py on the container MPI, the training workloads."""

from __future__ import annotations

import hpccm

from generator.blocks.stack import comm_stack, payload, python_blocks, two_stage
from generator.plan import plan
from generator.site import Site


def requirements(site: Site) -> list[str]:
    """Python packages beyond torch and mpi4py (none: the training workloads need only torch)."""
    return []


def build(site: Site) -> list[hpccm.Stage]:
    p = plan(site)
    return two_stage(site, "pytorch", p, build=[], keep=[*comm_stack(site, p), python_blocks(site, p, requirements(site))],
                     runtime_extra=[payload()])
