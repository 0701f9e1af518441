#!/usr/bin/env python3
"""hpccm's own output for stages like ours: the baseline `gen-recipe lint` compares against.

For a few sites this builds, with plain hpccm building blocks and hpccm's default rendering
(no gen-recipe blocks, no clean-up), stages equivalent to what gen-recipe generates, in both
formats, and writes them as lint fixtures:

    ifca      ucx + openmpi + python/pip   (InfiniBand, Open MPI from source)
    local     apt packages + pip           (Debian, distro Open MPI)
    frontier  generic_autotools libfabric + mpich
    supermuc  intel_mpi (the host's version, from Intel's apt repository) + pip

    .venv/bin/python scripts/hpccm_raw.py [--out tests/fixtures/lint/hpccm]

The versions and base images come from the site files, so the output changes only when they
(or hpccm) do; tests/lint checks that the committed fixtures are what this script writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import hpccm
from hpccm.building_blocks.generic_autotools import generic_autotools
from hpccm.building_blocks.intel_mpi import intel_mpi
from hpccm.building_blocks.mpich import mpich
from hpccm.building_blocks.openmpi import openmpi
from hpccm.building_blocks.packages import packages
from hpccm.building_blocks.pip import pip
from hpccm.building_blocks.ucx import ucx
from hpccm.primitives.baseimage import baseimage

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator.model import site as site_mod  # noqa: E402
from generator.recipe.context import hpccm_context, hpccm_distro  # noqa: E402
from generator.recipe.plan import plan  # noqa: E402

SUFFIX = {"docker": ".Dockerfile", "apptainer": ".def"}


def ifca(site) -> list:
    sw = site.software
    devel = hpccm.Stage(name="devel")
    devel += baseimage(image=site.base.devel, _as="devel", _distro=hpccm_distro(site))
    devel += ucx(version=str(sw.ucx), cuda=False, prefix="/usr/local/ucx")
    devel += openmpi(version=str(plan(site).mpi.version), prefix="/usr/local/openmpi", ucx="/usr/local/ucx",
                     infiniband=False, cuda=False)
    devel += pip(pip="pip3", packages=[f"mpi4py=={sw.mpi4py}", "numpy"])
    rt = hpccm.Stage(name="runtime")
    rt += baseimage(image=site.base.runtime, _as="runtime", _distro=hpccm_distro(site))
    rt += devel.runtime(_from="devel")
    return [devel, rt]


def local(site) -> list:
    stage = hpccm.Stage(name="runtime")
    stage += baseimage(image=site.base.runtime, _distro=hpccm_distro(site))
    stage += packages(ospackages=["ca-certificates", "openmpi-bin", "python3", "python3-mpi4py", "python3-pip",
                                  "python3-venv", "wget"])
    stage += pip(pip="pip3", packages=["six", "tqdm==4.66.5"])
    return [stage]


def frontier(site) -> list:
    sw = site.software
    devel = hpccm.Stage(name="devel")
    devel += baseimage(image=site.base.devel, _as="devel", _distro=hpccm_distro(site))
    devel += packages(ospackages=["bzip2", "file", "make", "perl", "python3", "tar", "wget"])
    devel += generic_autotools(
        url=f"https://github.com/ofiwg/libfabric/releases/download/v{sw.libfabric}/libfabric-{sw.libfabric}.tar.bz2",
        prefix="/usr/local/libfabric", configure_opts=["--disable-verbs", "--enable-tcp"])
    devel += mpich(version=str(plan(site).mpi.version), prefix="/usr/local/mpich")
    rt = hpccm.Stage(name="runtime")
    rt += baseimage(image=site.base.runtime, _as="runtime", _distro=hpccm_distro(site))
    rt += devel.runtime(_from="devel")
    return [devel, rt]


def supermuc(site) -> list:
    year, update, build = str(site.mpi.version).split(".")
    stage = hpccm.Stage(name="runtime")
    stage += baseimage(image=site.base.runtime, _distro=hpccm_distro(site))
    stage += intel_mpi(eula=True, version=f"{year}.{update}-{build}")
    stage += pip(pip="pip3", packages=[f"mpi4py=={site.software.mpi4py}"])
    return [stage]


BUILDERS = {"ifca": ifca, "local": local, "frontier": frontier, "supermuc": supermuc}


def render(name: str, fmt: str) -> str:
    site = site_mod.load(name)
    with hpccm_context(site, fmt):
        stages = BUILDERS[name](site)
        body = "\n\n".join(str(stage).strip("\n") for stage in stages)
    return f"# hpccm {hpccm.__version__} default rendering of the '{name}' stages (scripts/hpccm_raw.py)\n\n{body}\n"


def outputs() -> dict[str, str]:
    """{file name: text} for every site and format."""
    return {f"{name}{SUFFIX[fmt]}": render(name, fmt) for name in BUILDERS for fmt in SUFFIX}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "lint" / "hpccm")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for fname, text in outputs().items():
        (args.out / fname).write_text(text, encoding="utf-8")
        print(args.out / fname)
    return 0


if __name__ == "__main__":
    sys.exit(main())
