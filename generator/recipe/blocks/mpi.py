"""MPI in the container: the distribution's packages (pinned to the host's), hpccm's Open MPI
(with hpccm's UCX, KNEM and GDRCopy), MPICH built with ch4:ofi so that its libmpi.so.12 can be
replaced by the host's Cray MPICH, and Intel MPI of the host's exact version."""

from __future__ import annotations

from collections.abc import Mapping

import hpccm.building_blocks as hbb
from hpccm.building_blocks.base import bb_base
from hpccm.primitives.comment import comment
from hpccm.primitives.environment import environment
from hpccm.primitives.shell import shell

from generator.errors import RecipeError
from generator.recipe.blocks.clean import lint_clean
from generator.recipe.blocks.common import autotools_block, ospackages
from generator.recipe.blocks.verify import checked_downloads, download

# Distribution MPI packages (Debian/Ubuntu): what a build needs, and what a run needs.
DISTRO_MPI = {
    "openmpi": {"devel": ("libopenmpi-dev", "openmpi-bin"), "runtime": ("libopenmpi3", "openmpi-bin")},
    "mpich": {"devel": ("libmpich-dev", "mpich"), "runtime": ("libmpich12", "mpich")},
}

# hpccm's blocks, lint-clean, each download of theirs checked
openmpi = lint_clean(checked_downloads(hbb.openmpi), parallel=True, env=True)
ucx = lint_clean(checked_downloads(hbb.ucx), parallel=True, env=True)
knem = lint_clean(checked_downloads(hbb.knem), env=True)
gdrcopy = lint_clean(checked_downloads(hbb.gdrcopy), env=True)


# Debian's and Ubuntu's MPICH is libmpich.so.12; the MPICH ABI's name is libmpi.so.12, which the bound-in host MPI
# (cray-mpich-abi) has and mpi4py's wheel opens. The image gets the link the ABI promises (where libmpich12 put it).
MPICH_ABI_LINK = ('lib=$(find /usr/lib -name libmpich.so.12 -print -quit) && [ -n "$lib" ] && '
                  'ln -sf libmpich.so.12 "$(dirname "$lib")/libmpi.so.12" && ldconfig')


class distro_mpi(bb_base):  # noqa: N801
    """The distribution's MPI, pinned to the site's package versions (software.distro_pins: the host's where
    it runs the same release, as `local`)."""

    def __init__(self, *, flavour: str, pins: Mapping[str, str]) -> None:
        super().__init__()
        if flavour not in DISTRO_MPI:
            raise RecipeError(f"no distribution packages known for {flavour} (known: {', '.join(DISTRO_MPI)})")
        self.__flavour, self.__pins = flavour, pins
        self.__install(self, "devel")

    def __install(self, target, which: str) -> None:
        target += comment(f"{self.__flavour} from the distribution, pinned to the host's packages"
                          if self.__flavour == "openmpi" else
                          f"{self.__flavour} from the distribution, pinned (software.distro_pins), with the MPICH "
                          "ABI's libmpi.so.12 (the distribution names it libmpich.so.12)")
        target += ospackages(packages=DISTRO_MPI[self.__flavour][which], pins=self.__pins)
        if self.__flavour == "mpich":
            target += shell(commands=[MPICH_ABI_LINK])

    def runtime(self, _from: str = "0") -> str:
        self.__install(self.rt, "runtime")
        return str(self.rt)


distro_mpi = lint_clean(distro_mpi)


class mpich(autotools_block):  # noqa: N801
    """MPICH with the ch4:ofi device on our libfabric, shared libraries only.

    Its libmpi.so.12 has the MPICH ABI, so in bind mode the host's Cray MPICH (cray-mpich-abi) or
    Intel MPI replaces it at run time (the OLCF container examples), and in hybrid mode it runs
    on the image's libfabric or on the host's swapped in (CSCS's container engine CXI hook).
    """

    # Spack's mpich +cuda / +rocm, with the GPU architecture for the embedded yaksa (as Spack's yaksa recipe)
    GPU_OPTS = {"cuda": ("--with-cuda={home}", "--with-cuda-sm={sm}"), "rocm": ("--with-hip={home}", "--with-hip-sm={sm}")}

    def __init__(self, *, version: str, libfabric: str, prefix: str = "/usr/local/mpich", gpu: str = "",
                 gpu_home: str = "", gpu_arch: str = "", xpmem: str = "") -> None:
        super().__init__()
        sm = gpu_arch.removeprefix("sm_")
        gpu_opts = [o.format(home=gpu_home, sm=sm) for o in self.GPU_OPTS[gpu]] if gpu else []
        gpu_opts += [f"--with-xpmem={xpmem}"] if xpmem else []
        self._setup(f"MPICH {version} (ch4:ofi; MPICH ABI, libmpi.so.12{'; ' + gpu + ' buffers' if gpu else ''})",
                    ["perl", "python3"], [],
                    url=f"https://www.mpich.org/static/downloads/{version}/mpich-{version}.tar.gz", prefix=prefix,
                    configure_opts=["--with-device=ch4:ofi", f"--with-libfabric={libfabric}", "--disable-fortran",
                                    "--enable-fast=O2,ndebug", "--enable-shared", "--disable-static", *gpu_opts],
                    env={"PATH": f"{prefix}/bin:$PATH"}, annotations={"version": version})


mpich = lint_clean(mpich)


# Intel MPI apt repositories by generation. hpccm's intel_mpi block knows only the 2019 one and
# adds its key with `wget | apt-key add` (deprecated, and a pipe in a /bin/sh %post); this block
# uses a keyring file with signed-by for both.
INTEL_MPI = {
    "2019": {"key": "https://apt.repos.intel.com/intel-gpg-keys/GPG-PUB-KEY-INTEL-SW-PRODUCTS-2019.PUB",
             "repo": "https://apt.repos.intel.com/mpi all main",
             "devel": "intel-mpi-{year}.{update}-{build}", "runtime": "intel-mpi-{year}.{update}-{build}",
             "root": "/opt/intel/compilers_and_libraries/linux/mpi",
             "lib": ("intel64/lib", "intel64/lib/release"), "bin": "intel64/bin", "libfabric": "intel64/libfabric"},
    "oneapi": {"key": "https://apt.repos.intel.com/intel-gpg-keys/GPG-PUB-KEY-INTEL-SW-PRODUCTS.PUB",
               "repo": "https://apt.repos.intel.com/oneapi all main",
               "devel": "intel-oneapi-mpi-devel-{version}", "runtime": "intel-oneapi-mpi-{version}",
               "root": "/opt/intel/oneapi/mpi/{version}",
               "lib": ("lib", "lib/release"), "bin": "bin", "libfabric": "opt/mpi/libfabric"},
}


class intel_mpi(bb_base):  # noqa: N801
    """Intel MPI of the host's exact version from Intel's apt repository (2019.U.B or oneAPI 2021+).

    The runtime stage installs the runtime package of the same version again (the 2019
    packages install behind a versioned symlink that a stage copy would not follow).
    libfabric: prefix of a libfabric for Intel MPI to use instead of its bundled one
    (I_MPI_OFI_LIBRARY_INTERNAL=0), for providers the bundled one lacks (opx).
    """

    KEYRING = "/usr/share/keyrings/intel-sw-products.gpg"

    def __init__(self, *, version: str, libfabric: str = "") -> None:
        super().__init__()
        parts = version.split(".")
        gen = "2019" if parts[0] in ("2018", "2019") else "oneapi"
        info = INTEL_MPI[gen]
        if gen == "2019" and len(parts) != 3:
            raise RecipeError(f"Intel MPI {version}: write 2019 versions as YEAR.UPDATE.BUILD, e.g. 2019.12.320")
        self.__version, self.__info = version, info
        self.__root = info["root"].format(version=version)
        self.__env = self.__environment(libfabric)
        self.__packages = {key: info[key].format(version=version, year=parts[0], update=parts[1],
                                                 build=parts[-1]) for key in ("devel", "runtime")}
        self.__install(self, "devel")

    def __install(self, target, which: str) -> None:
        info = self.__info
        target += comment(f"Intel MPI {self.__version}, the host's version")
        target += ospackages(packages=["ca-certificates", "gnupg", "openssh-client", "wget"])
        target += shell(commands=[
            *download(info["key"], outfile="/var/tmp/intel.pub"),
            f"gpg --dearmor -o {self.KEYRING} /var/tmp/intel.pub",
            "rm -f /var/tmp/intel.pub",
            f'echo "deb [signed-by={self.KEYRING}] {info["repo"]}" > /etc/apt/sources.list.d/intel-mpi.list'])
        target += ospackages(packages=[self.__packages[which]])
        target += environment(variables=self.__env)

    def __environment(self, libfabric: str) -> dict[str, str]:
        root, info = self.__root, self.__info
        libs = [f"{root}/{d}" for d in info["lib"]]
        fabric = f"{root}/{info['libfabric']}"
        env = {"I_MPI_ROOT": root, "PATH": f"{root}/{info['bin']}:$PATH",
               "LD_LIBRARY_PATH": ":".join([*libs, f"{fabric}/lib", "$LD_LIBRARY_PATH"]),
               "FI_PROVIDER_PATH": f"{fabric}/lib/prov"}
        if libfabric:
            env.update({"I_MPI_OFI_LIBRARY_INTERNAL": "0", "FI_PROVIDER_PATH": f"{libfabric}/lib/libfabric",
                        "LD_LIBRARY_PATH": ":".join([f"{libfabric}/lib", *libs, "$LD_LIBRARY_PATH"])})
        return env

    def runtime(self, _from: str = "0") -> str:
        self.__install(self.rt, "runtime")
        return str(self.rt)


intel_mpi = lint_clean(intel_mpi)

