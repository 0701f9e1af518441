"""OSU micro-benchmarks built against the container MPI, for fabric checks (bind and hybrid mode)."""

from __future__ import annotations

import hpccm

from generator.blocks.osu import osu
from generator.blocks.stack import comm_stack, mpicc, two_stage
from generator.errors import RecipeError
from generator.plan import plan
from generator.site import Site


def build(site: Site) -> list[hpccm.Stage]:
    p = plan(site)
    if p.mpi.flavour == "none":
        raise RecipeError(f"{site.path}: the osu recipe needs an MPI (mpi.flavour is none)")
    bench = osu(version=str(site.software.osu), mpicc=mpicc(p), gpu=site.gpu.stack,
                gpu_home=p.gpu_home)
    return two_stage(site, "osu", p, build=[], keep=[*comm_stack(site, p), bench],
                     command=("osu_latency",))
