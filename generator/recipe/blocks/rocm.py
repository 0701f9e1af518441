"""ROCm's runtime libraries for a runtime stage that starts from the plain distribution image.

AMD publishes ROCm images with the whole development stack (compilers, headers, every math
library: `rocm/dev-*`) and no runtime-only image. Built against such an image, the image's own
programs (MPICH with HIP, libfabric with ROCr, the aws-ofi plugin, mpi4py, ...) need a few ROCm
libraries at run time; torch's ROCm wheels and Ollama's ROCm package carry their own.

`rocm_runtime` finds those libraries in the build stage, where they are installed: the dynamic
linker's closure (`ldd`) of every shared object and program under the scanned prefixes, plus the
libraries the programs open with dlopen, keeping what resolves into the ROCm prefixes. They are
copied (links resolved, under the names programs ask for) to STAGING/lib, with the data directory
a library keeps beside it (rocBLAS's kernels in lib/rocblas); the distribution packages those
libraries need are listed in STAGING/PACKAGES (their owners in the package database). The runtime
stage copies STAGING to /opt/rocm (where the build put ROCm, and where the sites' bind-mode
library paths look), installs the listed packages and adds /opt/rocm/lib to the linker cache.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from hpccm.building_blocks.base import bb_base
from hpccm.primitives.comment import comment
from hpccm.primitives.copy import copy
from hpccm.primitives.shell import shell

from generator.recipe.blocks.clean import lint_clean
from generator.recipe.blocks.libcheck import find_objects

STAGING = "/opt/rocm-runtime"
HOME = "/opt/rocm"
PACKAGES = "share/gen-recipe/distro-packages.txt"
ROOTS = ("/opt/rocm", "/opt/amdgpu")           # ROCm's prefixes (and versioned ones) and its libdrm's
SCAN = ("/usr/local", "/opt/venv")
SKIP = ("/usr/local/ollama",)                   # self-contained: loads its own ROCm with its own path
# Always taken: ROCr (libfabric's --with-rocr) and the HIP runtime, which the host's GPU-aware
# MPI (cray-mpich's GTL library, preloaded in bind mode) loads from the container.
DLOPEN = ("/opt/rocm/lib/libhsa-runtime64.so.1", "/opt/rocm/lib/libamdhip64.so.[0-9]")   # the soname link only


def collect_commands(*, out: str = STAGING, scan: Sequence[str] = SCAN, skip: Sequence[str] = SKIP,
                     roots: Sequence[str] = ROOTS, dlopen: Sequence[str] = DLOPEN) -> list[str]:
    """POSIX sh commands that fill OUT/lib and OUT/PACKAGES (see the module text). Pure: the
    paths are parameters so that a test can run the same commands on a tree of its own."""
    tmp = f"{out}/.work"
    roots_re = "^(" + "|".join(f"{r}[^/]*" for r in roots) + ")/"      # /opt/rocm and /opt/rocm-6.2.4
    found = f"{tmp}/rocm.txt"
    return [
        f"mkdir -p {out}/lib {tmp}",
        find_objects(scan, skip, f"{tmp}/files.txt"),
        *(f"echo {lib} >> {tmp}/files.txt" for lib in dlopen),
        f"xargs -r ldd < {tmp}/files.txt > {tmp}/ldd.txt 2> /dev/null || true",
        # the ROCm libraries: dependencies that resolve into ROCm's prefixes, and the dlopen'ed ones
        f"awk -v roots='{roots_re}' '($2 == \"=>\" && $3 ~ roots && !seen[$3]++) {{ print $3 }}' "
        f"{tmp}/ldd.txt > {found}",
        *(f"echo {lib} >> {found}" for lib in dlopen),
        f"xargs -r cp -L -t {out}/lib < {found}",
        f"for f in {out}/lib/*.so*; do d=\"${{f##*/}}\"; d=\"${{d%%.so*}}\"; d=\"${{d#lib}}\"; "
        f"for r in {' '.join(roots)}; do if [ -d \"$r/lib/$d\" ]; then cp -a \"$r/lib/$d\" {out}/lib/; fi; "
        "done; done",
        # what those libraries need from the distribution, by the packages that own it
        f"ldd {out}/lib/*.so* > {tmp}/deps.txt 2> /dev/null || true",
        f"awk -v roots='{roots_re}' '($2 == \"=>\" && $3 ~ /^\\// && $3 !~ roots && !seen[$3]++) {{ print $3 }}' "
        f"{tmp}/deps.txt > {tmp}/system.txt",
        f": > {tmp}/owners.txt",
        f"while read -r f; do dpkg -S \"*${{f#/usr}}\" >> {tmp}/owners.txt "
        f"|| {{ echo \"no package owns $f\" >&2; exit 1; }}; done < {tmp}/system.txt",
        f"sed -e 's/[:,].*//' {tmp}/owners.txt > {tmp}/packages.txt",
        f"mkdir -p {posixpath.dirname(f'{out}/{PACKAGES}')}",
        f"sort -u -o {out}/{PACKAGES} {tmp}/packages.txt",
        f"rm -rf {tmp}"]


class rocm_runtime(bb_base):  # noqa: N801 - hpccm naming
    """The ROCm libraries the image's programs load, for a runtime stage without ROCm (see the
    module text). Add it after every block whose files it should scan."""

    def __init__(self, *, scan: Sequence[str] = SCAN) -> None:
        super().__init__()
        self += comment("ROCm libraries the image's programs load (ldd closure and dlopen'ed ROCr), "
                        "for the runtime stage")
        self += shell(commands=collect_commands(scan=scan))

    def runtime(self, _from: str = "0") -> str:
        self.rt += comment("ROCm runtime libraries collected in the build stage, and the distribution "
                           "packages they need")
        self.rt += copy(_from=_from, src=STAGING, dest=HOME)
        self.rt += shell(commands=[
            "apt-get update -y",
            f"DEBIAN_FRONTEND=noninteractive xargs -r -a {HOME}/{PACKAGES} apt-get install -y "
            "--no-install-recommends",
            "rm -rf /var/lib/apt/lists/*",
            f"echo {HOME}/lib > /etc/ld.so.conf.d/rocm.conf",
            "ldconfig"])
        return str(self.rt)


rocm_runtime = lint_clean(rocm_runtime)
