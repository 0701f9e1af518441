"""OSU micro-benchmarks, built with the container MPI's compiler wrappers."""

from __future__ import annotations

import posixpath

from hpccm.toolchain import toolchain

from generator.recipe.blocks.clean import lint_clean
from generator.recipe.blocks.common import autotools_block

SUITES = ("pt2pt", "collective", "one-sided", "startup")


class osu(autotools_block):  # noqa: N801
    """OSU micro-benchmarks (osu_latency, osu_bw, osu_allreduce, ...) on PATH, built with the container
    MPI's compiler wrappers; GPU buffers where the site has a GPU stack (ROCm or CUDA)."""

    def __init__(self, *, version: str, mpicc: str, gpu: str = "none", gpu_home: str = "",
                 prefix: str = "/usr/local/osu") -> None:
        super().__init__()
        mpicxx = posixpath.join(posixpath.dirname(mpicc), "mpicxx") if "/" in mpicc else "mpicxx"
        opts = {"rocm": ["--enable-rocm", f"--with-rocm={gpu_home}"],
                "cuda": ["--enable-cuda", f"--with-cuda={gpu_home}"]}.get(gpu, [])
        bindir = posixpath.join(prefix, "libexec", "osu-micro-benchmarks", "mpi")
        self._setup(f"OSU micro-benchmarks {version}", [], [],
                    url=f"https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-{version}.tar.gz",
                    prefix=prefix, configure_opts=opts, toolchain=toolchain(CC=mpicc, CXX=mpicxx),
                    env={"PATH": ":".join(posixpath.join(bindir, s) for s in SUITES) + ":$PATH"},
                    annotations={"version": version})


osu = lint_clean(osu)
