"""Fabric libraries hpccm has no block for: libfabric with the cxi / psm2 / opx / verbs providers,
HPE's libcxi (Slingshot), libpsm2 (Omni-Path) and rdma-core from the distribution (InfiniBand),
and the aws-ofi-nccl plugin that lets NCCL or RCCL use libfabric. hpccm style: each block
composes hpccm's generic_autotools (or its packages block) and gives its runtime part from
runtime(). Sources for the build recipes are listed in docs/blocks.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import hpccm.templates.rm
import hpccm.templates.tar
from hpccm.building_blocks.base import bb_base
from hpccm.primitives.comment import comment
from hpccm.primitives.copy import copy
from hpccm.primitives.shell import shell
from hpccm.toolchain import toolchain

from generator.errors import RecipeError
from generator.model.providers import LIBFABRIC_BUILT, PACKAGES
from generator.recipe.blocks.clean import lint_clean
from generator.recipe.blocks.common import autotools_block, ospackages
from generator.recipe.blocks.verify import download

# libfabric providers the images build, and the Debian/Ubuntu packages of each: to build libfabric with it,
# and to run it (the fabric provider registry, generator.model.providers).
PROVIDERS = LIBFABRIC_BUILT
PROVIDER_PACKAGES = PACKAGES
class libfabric(autotools_block):  # noqa: N801
    """libfabric with the site's providers (libfabric's own tcp, udp, shm and rxm come with it).

    cxi: prefix of libcxi and the Cassini / CXI driver headers (libcxi block); the cxi provider is
    upstream from libfabric 1.21 on. psm2 builds against the distribution's libpsm2.
    """

    # GPU memory support (Spack's libfabric +cuda/+rocm; CSCS's and the LUMI AI Factory's container recipes)
    GPU_OPTS = {"cuda": ("--with-cuda={home}", "--enable-cuda-dlopen"), "rocm": ("--with-rocr={home}",)}

    def __init__(self, *, version: str, providers: Sequence[str], prefix: str = "/usr/local/libfabric",
                 cxi: str = "", pins=None, gpu: str = "", gpu_home: str = "", cuda_major: int = 12) -> None:
        super().__init__()
        self.__cudart = (gpu_home, f"libcudart.so.{cuda_major}") if gpu == "cuda" else None
        unknown = sorted(set(providers) - set(PROVIDERS))
        if unknown:
            raise RecipeError(f"libfabric: unknown provider(s) {', '.join(unknown)} (known: {', '.join(PROVIDERS)})")
        if "cxi" in providers:
            if not cxi:
                raise RecipeError("libfabric: the cxi provider needs libcxi (give its prefix)")
            if tuple(int(x) for x in version.split(".")[:2]) < (1, 21):
                raise RecipeError(f"libfabric {version} has no cxi provider upstream (it arrived in 1.21): "
                                  "set software.libfabric to 1.22.0 or later")
        opts = ["--disable-static", "--disable-dependency-tracking"]
        for p in sorted(providers):
            if p == "cxi":
                opts += [f"--enable-cxi={cxi}", f"--with-cassini-headers={cxi}", f"--with-cxi-uapi-headers={cxi}"]
            else:
                opts.append(f"--enable-{p}")
        opts += [o.format(home=gpu_home) for o in self.GPU_OPTS.get(gpu, ())]
        devel = [pkg for p in providers for pkg in PROVIDER_PACKAGES[p]["devel"]]
        runtime = [pkg for p in providers for pkg in PROVIDER_PACKAGES[p]["runtime"]]
        gpu_note = f"; {gpu} memory" if gpu in self.GPU_OPTS else ""
        self._setup(f"libfabric {version} (providers: {', '.join(sorted(providers)) or 'tcp, shm'}{gpu_note})",
                    devel, runtime,
                    pins=pins,
                    url=f"https://github.com/ofiwg/libfabric/releases/download/v{version}/libfabric-{version}.tar.bz2",
                    prefix=prefix, configure_opts=opts, annotations={"version": version},
                    env={"PATH": f"{prefix}/bin:$PATH"})


    # --enable-cuda-dlopen: libfabric opens the CUDA runtime as "libcudart.so" (src/hmem_cuda.c), a name
    # only the -dev package installs; without it CUDA memory support is off, logged at info level only.
    def runtime(self, _from: str = "0") -> str:
        super().runtime(_from=_from)
        if self.__cudart:
            home, soname = self.__cudart
            self.rt += comment(f"libfabric opens the CUDA runtime as libcudart.so: link it to {soname}")
            self.rt += shell(commands=[f'for d in {home}/targets/*/lib; do ln -sf {soname} "$d/libcudart.so"; done',
                                       "ldconfig"])
        return str(self.rt)


libfabric = lint_clean(libfabric)


class libcxi(autotools_block):  # noqa: N801
    """HPE's open-source libcxi (Slingshot CXI user library), with the Cassini and CXI-driver
    headers of the same release installed into the same prefix (libfabric's cxi provider needs all
    three). gpu ("cuda"/"rocm") and gpu_home: built with that GPU runtime, as the sites' own container
    recipes build it (CSCS's mpich-gpu Containerfile --with-cuda, the LUMI AI Factory's --with-rocm);
    otherwise --without-cuda/--without-rocm, so that it does not pick up a base image's GPU stack by itself."""

    GPU_OPTS = {"cuda": ("--with-cuda={home}", "--without-rocm"), "rocm": ("--without-cuda", "--with-rocm={home}")}

    HEADERS = {"cassini-headers": "https://github.com/HewlettPackard/shs-cassini-headers",
               "cxi-driver": "https://github.com/HewlettPackard/shs-cxi-driver"}

    def __init__(self, *, tag: str, prefix: str = "/usr/local/cxi", gpu: str = "", gpu_home: str = "") -> None:
        super().__init__()
        flat = tag.replace("/", "-")
        gpu_opts = [o.format(home=gpu_home) for o in self.GPU_OPTS.get(gpu, ("--without-cuda", "--without-rocm"))]
        fetch = []          # generic_autotools' preconfigure: checked with the block's own download (autotools_block)
        for name, repo in self.HEADERS.items():
            tarball = f"/var/tmp/{name}-{flat}.tar.gz"
            fetch += [f"wget -q -O {tarball} {repo}/archive/refs/tags/{tag}.tar.gz",
                      f"tar -x -z -f {tarball} -C /var/tmp",
                      f"cp -r /var/tmp/shs-{name}-{flat}/include/. {prefix}/include/"]
        fetch += [f"cp -r /var/tmp/shs-cassini-headers-{flat}/share/. {prefix}/share/",
                  f"cp -r /var/tmp/shs-cassini-headers-{flat}/share/cassini-headers /usr/share/",
                  "rm -rf " + " ".join(f"/var/tmp/shs-{n}-{flat} /var/tmp/{n}-{flat}.tar.gz" for n in self.HEADERS)]
        gpu_note = f"; {gpu} memory" if gpu in self.GPU_OPTS else ""
        self._setup(f"libcxi {tag} (HPE Slingshot CXI{gpu_note}) with the Cassini and CXI driver headers",
                    ["autoconf", "automake", "libtool", "pkg-config", "libconfig-dev", "libfuse-dev",
                     "libnl-3-dev", "libnl-route-3-dev", "libnuma-dev", "libsensors-dev", "libuv1-dev",
                     "libyaml-dev"],
                    ["libconfig9", "libfuse2", "libnl-3-200", "libnl-route-3-200", "libnuma1", "libsensors5",
                     "libuv1", "libyaml-0-2"],
                    url=f"https://github.com/HewlettPackard/shs-libcxi/archive/refs/tags/{tag}.tar.gz",
                    directory=f"shs-libcxi-{flat}", prefix=prefix,
                    preconfigure=[f"mkdir -p {prefix}/include {prefix}/share", *fetch, "./autogen.sh"],
                    configure_opts=[*gpu_opts,
                                    f"--with-systemdsystemunitdir={prefix}/lib/systemd/system",
                                    f"--with-udevrulesdir={prefix}/lib/udev/rules.d"],
                    toolchain=toolchain(CFLAGS=f"-I{prefix}/include -Wno-unused-variable -Wno-unused-but-set-variable"),
                    runtime=[f"{prefix}/lib"], annotations={"tag": tag})


libcxi = lint_clean(libcxi)


class xpmem(bb_base, hpccm.templates.rm, hpccm.templates.tar):  # noqa: N801
    """The XPMEM user library (its kernel module is the host's): libxpmem.c compiled on its own, as
    CSCS's MPICH recipe does, with upstream's library name (libtool's libxpmem.so.0, the name the host
    library and the container engine's CXI hook, which swaps it for the host's, use)."""

    def __init__(self, *, version: str, prefix: str = "/usr") -> None:
        super().__init__()
        url = f"https://github.com/hpc/xpmem/archive/v{version}.tar.gz"
        src = f"/var/tmp/xpmem-{version}"
        self.__prefix = prefix
        self += comment(f"XPMEM {version} user library (CSCS: MPICH \"must be built with both libfabric and xpmem\")")
        self += ospackages(packages=["ca-certificates", "gcc", "linux-libc-dev", "tar", "wget"])
        self += shell(commands=[
            *download(url, directory="/var/tmp"),
            self.untar_step(tarball=f"/var/tmp/v{version}.tar.gz", directory="/var/tmp"),
            f"gcc -O2 -fPIC -shared -Wl,-soname,libxpmem.so.0 -I{src}/include -o {prefix}/lib/libxpmem.so.0 "
            f"{src}/lib/libxpmem.c",
            f"ln -sf libxpmem.so.0 {prefix}/lib/libxpmem.so",
            f"cp {src}/include/xpmem.h {prefix}/include/",
            "ldconfig",
            self.cleanup_step(items=[src, f"/var/tmp/v{version}.tar.gz"])])

    def runtime(self, _from: str = "0") -> str:
        self.rt += comment("XPMEM user library")
        self.rt += copy(_from=_from, src=f"{self.__prefix}/lib/libxpmem.so.0", dest=f"{self.__prefix}/lib/libxpmem.so.0")
        self.rt += shell(commands=["ldconfig"])
        return str(self.rt)


xpmem = lint_clean(xpmem)


class distro_libs(bb_base):  # noqa: N801
    """Libraries taken from the distribution: build packages here, runtime packages in runtime()."""

    def __init__(self, *, title: str, devel: Sequence[str], runtime: Sequence[str], pins=None) -> None:
        super().__init__()
        self.__title, self.__runtime, self.__pins = title, tuple(runtime), pins
        self += comment(title)
        self += ospackages(packages=sorted(devel), pins=pins)

    def runtime(self, _from: str = "0") -> str:
        self.rt += comment(self.__title)
        self.rt += ospackages(packages=sorted(self.__runtime), pins=self.__pins)
        return str(self.rt)


distro_libs = lint_clean(distro_libs)


def rdma_core(pins=None):
    """InfiniBand verbs (rdma-core) from the distribution."""
    return distro_libs(title="InfiniBand verbs (rdma-core from the distribution)",
                       devel=PROVIDER_PACKAGES["verbs"]["devel"], runtime=PROVIDER_PACKAGES["verbs"]["runtime"],
                       pins=pins)


def libpsm2(pins=None):
    """Omni-Path PSM2 from the distribution (libpsm2-2; /dev/hfi1_* comes from the host)."""
    return distro_libs(title="Omni-Path PSM2 (libpsm2 from the distribution)",
                       devel=PROVIDER_PACKAGES["psm2"]["devel"], runtime=PROVIDER_PACKAGES["psm2"]["runtime"],
                       pins=pins)


class aws_ofi(autotools_block):  # noqa: N801
    """aws-ofi-nccl: NCCL over libfabric, or with --with-rocm the RCCL plugin (librccl-net.so).
    Its lib directory goes into the linker cache, where NCCL/RCCL look for the plugin by default.
    `force`: the image sets NCCL_NET_PLUGIN to it (OLCF's PyTorch guide: without it "the plugin will
    not be used"); off where a runtime hook brings the site's plugin (CSCS)."""

    LIBRARY = {"rocm": "librccl-net.so", "cuda": "libnccl-net.so"}

    def __init__(self, *, version: str, gpu: str, libfabric: str, gpu_home: str,
                 prefix: str = "/usr/local/aws-ofi", force: bool = True) -> None:
        super().__init__()
        if gpu not in ("rocm", "cuda"):
            raise RecipeError(f"aws-ofi-nccl: needs a GPU stack (rocm or cuda), not {gpu}")
        name = "aws-ofi-rccl (aws-ofi-nccl built for ROCm)" if gpu == "rocm" else "aws-ofi-nccl"
        tag, tarball = (f"v{version}", f"aws-ofi-nccl-{version}") if tuple(map(int, version.split(".")[:2])) >= (1, 14) \
            else (f"v{version}-aws", f"aws-ofi-nccl-{version}-aws")
        self._setup(f"{name} {version}: {'RCCL' if gpu == 'rocm' else 'NCCL'} collectives over libfabric",
                    ["libhwloc-dev"], ["libhwloc15"],
                    url=f"https://github.com/aws/aws-ofi-nccl/releases/download/{tag}/{tarball}.tar.gz",
                    directory=tarball, prefix=prefix,
                    configure_opts=[f"--with-libfabric={libfabric}", f"--with-{gpu}={gpu_home}", "--disable-tests"],
                    annotations={"version": version},
                    env={"NCCL_NET_PLUGIN": f"{prefix}/lib/{self.LIBRARY[gpu]}"} if force else None)


aws_ofi = lint_clean(aws_ofi)
