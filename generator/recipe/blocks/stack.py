"""The pieces every recipe shares, chosen from the `Plan`: the base images, the communication
stack (fabric libraries + MPI), the Python environment, and the two-stage layout."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import hpccm
from hpccm.building_blocks.base import bb_base
from hpccm.primitives.comment import comment
from hpccm.primitives.shell import shell

from generator import __version__
from generator.recipe.plan import Plan
from generator.model.runtimes import PLATFORMS, split_bind
from generator.model.site import Site
from generator.recipe.blocks import fabric, mpi
from generator.recipe.blocks.libcheck import compile_check, library_check
from generator.recipe.blocks.rocm import rocm_runtime
from generator.recipe.blocks.clean import baseimage, docker
from generator.recipe.blocks.common import finish, ospackages, payload, python_env
from generator.recipe.context import hpccm_distro

HPCCM_DISTRO_KEYWORD = {"ubuntu": "ubuntu", "debian": "ubuntu", "rockylinux": "rockylinux"}
PREFIX = {"libfabric": "/usr/local/libfabric", "libcxi": "/usr/local/cxi", "psm2": "/usr/local/psm2",
          "ucx": "/usr/local/ucx", "mpich": "/usr/local/mpich", "openmpi": "/usr/local/openmpi",
          "aws-ofi": "/usr/local/aws-ofi", "knem": "/usr/local/knem", "gdrcopy": "/usr/local/gdrcopy",
          "xpmem": "/usr"}     # where CSCS's MPICH recipe puts libxpmem (and the CXI hook swaps in the host's)
# The build stage's Python (+ a compiler and headers when mpi4py is built from source); what a run needs.
DEVEL_PACKAGES = ("ca-certificates", "python3", "python3-venv", "wget")
COMPILE_PACKAGES = ("build-essential", "python3-dev")
# Blocks whose output only the build needs (KNEM: headers UCX compiles against).
BUILD_ONLY = ("knem",)
RUNTIME_PACKAGES = ("ca-certificates", "python3")
# What torch.compile needs at run time beside torch's own wheels (and Triton's, on GPU stacks): a C++ compiler
# for Inductor's CPU kernels (and the C compiler Triton builds its launchers with) and Python's headers.
COMPILE_RUNTIME_PACKAGES = ("g++", "python3-dev")


def _distro(site: Site) -> str:
    return hpccm_distro(site)


def base(site: Site, which: str, name: str) -> baseimage:
    image = site.base.devel if which == "devel" else site.base.runtime
    if docker() or site.base.bootstrap == "docker":      # a registry's image: never a short name (localimage: a file)
        image = site.base.qualified(image)
    return baseimage(image=image if docker() else site.base.source(image), _as=name, _distro=_distro(site), _arch=site.host.arch,
                     _bootstrap=site.base.bootstrap)


def cuda_major(site: Site) -> int:
    """The CUDA major version of the runtime image (nvidia/cuda:<major>.<minor>...), else the host's."""
    m = re.search(r":([0-9]+)\.", site.base.runtime)
    return int(m.group(1)) if m else site.gpu.version.parts[0]


def comm_stack(site: Site, p: Plan) -> list:
    """Fabric libraries and the container MPI, in build order; each block has `runtime()`."""
    pins = site.software.distro_pins
    if p.mpi.source == "distro":
        return [mpi.distro_mpi(flavour=p.mpi.flavour, pins=pins)]
    cuda = p.cuda_home or False
    blocks: list = []
    if p.verbs:
        blocks.append(fabric.rdma_core(pins=pins))
    if p.psm2:
        blocks.append(fabric.libpsm2(pins=pins))
    if p.libcxi:
        blocks.append(fabric.libcxi(tag=p.libcxi, prefix=PREFIX["libcxi"], gpu=p.gpu_memory, gpu_home=p.gpu_home))
    if p.xpmem:
        blocks.append(fabric.xpmem(version=str(p.xpmem), prefix=PREFIX["xpmem"]))
    if p.libfabric:
        blocks.append(fabric.libfabric(version=str(p.libfabric), providers=p.providers, prefix=PREFIX["libfabric"],
                                       cxi=PREFIX["libcxi"] if p.libcxi else "", pins=pins, gpu=p.gpu_memory,
                                       gpu_home=p.gpu_home,
                                       cuda_major=cuda_major(site) if p.gpu_memory == "cuda" else 12))
    if p.ucx:
        if cuda:
            blocks.append(mpi.gdrcopy(prefix=PREFIX["gdrcopy"], ldconfig=True))
        blocks.append(mpi.knem(prefix=PREFIX["knem"]))
        blocks.append(mpi.ucx(version=str(p.ucx), prefix=PREFIX["ucx"], cuda=cuda, ldconfig=True, ofed=True,
                              knem=PREFIX["knem"], gdrcopy=PREFIX["gdrcopy"] if cuda else ""))
    if p.mpi.flavour == "openmpi":
        extra = {"with_ofi": PREFIX["libfabric"]} if p.libfabric else {}
        if p.pmix:
            extra["pmix"] = p.pmix
        blocks.append(mpi.openmpi(version=str(p.mpi.version), prefix=PREFIX["openmpi"], ldconfig=True, cuda=cuda,
                                  ucx=PREFIX["ucx"] if p.ucx else False, infiniband=False, **extra))
    elif p.mpi.flavour == "mpich":
        blocks.append(mpi.mpich(version=str(p.mpi.version), libfabric=PREFIX["libfabric"], prefix=PREFIX["mpich"],
                                gpu=p.mpi_gpu, gpu_home=p.gpu_home, gpu_arch=site.gpu.arch,
                                xpmem=PREFIX["xpmem"] if p.xpmem else ""))
    elif p.mpi.flavour == "intel-mpi":
        blocks.append(mpi.intel_mpi(version=str(p.mpi.version), libfabric=PREFIX["libfabric"] if p.libfabric else ""))
    if p.net_plugin:
        blocks.append(fabric.aws_ofi(version=str(p.net_plugin_version), gpu=site.gpu.stack,
                                     libfabric=PREFIX["libfabric"], gpu_home=p.gpu_home,
                                     prefix=PREFIX["aws-ofi"], force=site.fabric.collectives.plugin == "image"))
    return blocks


def mpicc(p: Plan) -> str:
    if p.mpi.flavour == "intel-mpi":
        return "mpicc"
    if p.mpi.source == "distro":
        return "mpicc"
    return f"{PREFIX[p.mpi.flavour]}/bin/mpicc"


@dataclass(frozen=True)
class PythonSpec:
    """What a recipe's Python environment holds; the image's venv and the suite's bare twin use it alike."""

    index_packages: tuple[tuple[str, tuple[str, ...]], ...]   # (index URL, requirements)
    wheels: tuple[str, ...]                                   # paths in the build context
    requirements: tuple[str, ...]                             # from the default index
    mpi4py: tuple[str, str] | None                            # (version, mpicc): built against the container MPI
    system_site_packages: bool                                # the distro's mpi4py (distro MPI)
    app: tuple[str, ...] = ()                                 # an application's own pins: a layer of their own
    app_wheels: tuple[str, ...] = ()                          # ... and wheel files (app/<path> in the build context)
    torch_compile: bool = False                               # torch is there: the runtime stage can compile (two_stage)


def python_spec(site: Site, p: Plan, extra: Sequence[str] = (), *, torch: bool = True, mpi4py: bool = True,
                app: Sequence[str] = (), app_wheels: Sequence[str] = ()) -> PythonSpec:
    """torch for the GPU stack (index or local wheel) unless `torch` is false, mpi4py on the container
    MPI unless `mpi4py` is false, the recipe's extras, then an application's own pins (`app`)."""
    sw = site.software
    wheel = p.torch_wheel if torch else ""
    return PythonSpec(
        index_packages=((p.torch_index, (f"torch=={sw.torch}",)),) if torch and not wheel else (),
        wheels=(wheel,) if wheel else (),
        requirements=(*((f"numpy=={sw.numpy}",) if torch else ()),
                      *((f"mpi4py=={sw.mpi4py}",) if mpi4py and p.mpi4py == "wheel" else ()), *extra),
        mpi4py=(str(sw.mpi4py), mpicc(p)) if mpi4py and p.mpi4py == "source" else None,
        system_site_packages=mpi4py and p.mpi4py == "distro",
        app=tuple(app), app_wheels=tuple(f"app/{w}" for w in app_wheels), torch_compile=torch)


def python_blocks(site: Site, spec: PythonSpec) -> python_env:
    """The image's virtual environment holding `spec` (see `python_spec`)."""
    return python_env(index_packages=spec.index_packages, wheels=spec.wheels, requirements=spec.requirements,
                      mpi4py=spec.mpi4py, system_site_packages=spec.system_site_packages, app=spec.app,
                      app_wheels=spec.app_wheels, torch_compile=spec.torch_compile,
                      ca_secret=site.software.pip_cert_secret, python=site.software.python)


def two_stage(site: Site, recipe: str, p: Plan, build: Sequence, keep: Sequence, runtime_extra: Sequence = (),
              runtime_packages: Sequence[str] = (), command: Sequence[str] = ("python3", "-m", "workloads"), *,
              build_packages: Sequence[str] = (), distro_mpi4py: bool | None = None,
              env: Mapping[str, str] | None = None, workdir: str = "", app_labels: Mapping[str, str] | None = None) -> list:
    """A build stage with `build` + `keep` blocks and a runtime stage with what `keep` leaves behind.

    `build`: blocks used only to build (their output is copied by a later `keep` block or lost);
    `keep`: blocks whose runtime() goes to the runtime stage; `runtime_extra`: blocks only there.
    `build_packages` / `runtime_packages`: more distro packages for either stage; `distro_mpi4py`: whether
    the runtime stage needs the distro's mpi4py (default: when the plan takes it from the distro);
    `env`, `workdir`, `app_labels`: an application's (see `finish`).
    """
    compiles = any(getattr(b, "torch_compile", False) for b in keep)     # torch is in the image: it can compile
    devel = hpccm.Stage(name="devel")
    devel += base(site, "devel", "devel")
    # the build stage is a single-stage image too (--target devel): what runs compiled torch, as the runtime stage
    devel += ospackages(packages=sorted({*DEVEL_PACKAGES, *(COMPILE_PACKAGES if p.compiles else ()), *build_packages,
                                         *(COMPILE_RUNTIME_PACKAGES if compiles else ())}))
    for block in [*build, *keep]:
        devel += block
    if p.rocm_runtime:
        devel += rocm_runtime()

    rt = hpccm.Stage(name="runtime")
    rt += base(site, "runtime", "runtime")
    distro_py = ["python3-mpi4py"] if (p.mpi4py == "distro" if distro_mpi4py is None else distro_mpi4py) else []
    rt += ospackages(packages=sorted({*RUNTIME_PACKAGES, *runtime_packages, *distro_py,
                                      *(COMPILE_RUNTIME_PACKAGES if compiles else ())}),
                     pins=site.software.distro_pins)
    rt += devel.runtime(_from="devel", exclude=list(BUILD_ONLY))
    for block in runtime_extra:
        rt += block
    if mount_points(site):
        rt += bind_mount_points(site)
    rt += library_check(scan=("/usr/local", "/opt/rocm") if p.rocm_runtime else ("/usr/local",),
                        dlopen=("libcudart.so",) if p.gpu_memory == "cuda" and p.libfabric else ())
    if compiles:
        rt += compile_check()
    rt += finish(labels={"org.opencontainers.image.title": f"{recipe}-{site.name}",
                         "io.github.gen-recipe.site": site.name, "io.github.gen-recipe.recipe": recipe,
                         "io.github.gen-recipe.version": __version__,
                         "io.github.gen-recipe.mpi-mode": site.container.mpi_mode},
                 user=site.software.user, command=command, env=env, workdir=workdir, app_labels=app_labels)
    return [devel, rt]


class bind_mount_points(bb_base):  # noqa: N801 - hpccm naming
    """The folders the site's bind mode mounts onto (`mount_points`), made in the image."""

    def __init__(self, site: Site) -> None:
        super().__init__()
        runtimes = sorted({r.name for r in site.runtimes if not PLATFORMS[r.name].makes_mount_points})
        self += comment(f"Mount points of the site's bind mode ({', '.join(runtimes)} mounts the image read-only "
                        "and cannot make them)")
        self += shell(commands=["mkdir -p " + " ".join(map(shlex.quote, mount_points(site)))])


def mount_points(site: Site) -> list[str]:
    """The destinations of the site's bind-mode folders (container.bind.paths) that the image must hold: where a
    runtime of the site that runs bind mode mounts the image read-only (Platform.makes_mount_points)."""
    if not any("bind" in r.mpi_modes and not PLATFORMS[r.name].makes_mount_points for r in site.runtimes):
        return []
    return sorted({split_bind(b)[1] for b in site.container.bind.paths})


__all__ = ["base", "comm_stack", "python_blocks", "two_stage", "payload"]
