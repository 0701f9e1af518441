"""OSU micro-benchmarks built against the container MPI, for fabric checks (bind and hybrid mode)."""

from __future__ import annotations

import hpccm

from generator import api


def python(site: api.Site) -> None:
    """No Python environment: the benchmarks are C programs."""
    return None


def build(site: api.Site) -> list[hpccm.Stage]:
    p = api.plan(site)
    if p.mpi.flavour == "none":
        raise api.RecipeError(f"{site.path}: the osu recipe needs an MPI (mpi.flavour is none)")
    bench = api.osu_benchmarks(site, p)
    return api.two_stage(site, "osu", p, keep=[*api.comm_stack(site, p), bench], command=("osu_latency",))
