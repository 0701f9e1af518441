"""The runtime stage's own check that every library its programs need is in the image.

The runtime stage starts from a smaller image than the build stage (CUDA's `-base`, the plain
distribution for ROCm) and gets each block's files and runtime packages. A library that a block
forgot, or that the smaller base lacks, would show only when a job starts on the cluster. This step
runs `ldd` over every shared object and program the blocks installed and fails the build, naming
the file and the library, when one is not found. The host's GPU driver libraries are the exception:
the runtime mounts them in at run time (`--nv`, the NVIDIA container hook), so no image has them.

An image with torch gets a second check (`compile_check`): torch.compile of a small function on the CPU
(Inductor's C++ backend needs a compiler and Python's headers at run time) and NumPy through torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpccm.building_blocks.base import bb_base
from hpccm.primitives.comment import comment
from hpccm.primitives.shell import shell

from generator.recipe.blocks.clean import lint_clean

SCAN = ("/usr/local",)
# Ollama's tree loads its own libraries with its own library path; the CUDA base image's tree is NVIDIA's.
SKIP = ("/usr/local/ollama", "/usr/local/cuda", "/usr/local/cuda-*")
DRIVER_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
WORK = "/var/tmp/gen-recipe-ldd"


def find_objects(scan: Sequence[str], skip: Sequence[str], out: str) -> str:
    """A `find` that writes to `out` every shared object and program under `scan`, not under `skip`."""
    prune = " ".join(f"-path '{p}' -prune -o" for p in skip)
    return (f"find {' '.join(scan)} {prune} -type f \\( -name '*.so' -o -name '*.so.*' -o -perm -u=x \\) -print "
            f"> {out}")


def check_commands(*, scan: Sequence[str] = SCAN, skip: Sequence[str] = SKIP,
                   allowed: Sequence[str] = DRIVER_LIBS, dlopen: Sequence[str] = (), work: str = WORK) -> list[str]:
    """POSIX sh commands that fail, naming file and library, when a library is not found (pure: a
    test runs them on a tree of its own). `dlopen`: names a program opens at run time with dlopen,
    which must be in the linker cache under exactly that name."""
    ok = "^(" + "|".join(a.replace(".", "\\\\.") for a in allowed) + ")$"
    opened = [f"ldconfig -p > {work}.cache",
              *(f"grep -q '^[[:space:]]*{name} ' {work}.cache || "
                f"{{ echo \"not in the linker cache: {name} (opened with dlopen)\"; exit 1; }}" for name in dlopen)] \
        if dlopen else []
    return [
        *opened,
        find_objects(scan, skip, f"{work}.files"),
        # /dev/null first: with two or more files ldd names each one before its libraries
        f"xargs -r ldd /dev/null < {work}.files > {work}.txt 2> /dev/null || true",
        f"awk -v ok='{ok}' '/^\\/.*:$/ {{ f = substr($0, 1, length($0) - 1) }} "
        f"($2 == \"=>\" && $3 == \"not\" && $1 !~ ok) {{ print \"not in the image: \" $1 \", needed by \" f; bad = 1 }} "
        f"END {{ exit bad }}' {work}.txt",
        f"rm -f {work}.files {work}.txt {work}.cache"]


class library_check(bb_base):  # noqa: N801 - hpccm naming
    """The check, as the runtime stage's last build step (see the module text)."""

    def __init__(self, *, scan: Sequence[str] = SCAN, dlopen: Sequence[str] = ()) -> None:
        super().__init__()
        self += comment("Every library the installed programs need is in the image (the GPU driver's "
                        "come from the host at run time)")
        self += shell(commands=check_commands(scan=scan, dlopen=dlopen))


library_check = lint_clean(library_check)

# A real torch.compile on the CPU (Inductor's C++ backend: the compiler and Python's headers), NumPy through
# torch.from_numpy (torch without NumPy only warns at import); the caches it writes go with the step.
COMPILE_PROBE = ("import numpy, torch; "
                 "f = torch.compile(lambda x: torch.sin(x) + 2 * x); x = torch.arange(8.0); "
                 "assert torch.allclose(f(x), torch.sin(x) + 2 * x); "
                 "assert torch.from_numpy(numpy.ones(2)).sum().item() == 2.0; "
                 "print('torch.compile and NumPy work:', torch.__version__, numpy.__version__)")
COMPILE_WORK = "/var/tmp/gen-recipe-compile"


def compile_commands(work: str = COMPILE_WORK, python: str = "python3") -> list[str]:
    """POSIX sh commands that compile a small function with torch.compile and use NumPy through torch, and
    fail when either does not work (pure: a test runs them in a built image)."""
    # TMPDIR too: Inductor keeps its precompiled headers under tempfile.gettempdir(), whatever its cache dir
    return [f"mkdir -p {work}",
            f"TORCHINDUCTOR_CACHE_DIR={work}/inductor TRITON_CACHE_DIR={work}/triton HOME={work} TMPDIR={work} "
            f"{python} -c \"{COMPILE_PROBE}\"",
            f"rm -rf {work}"]


class compile_check(bb_base):  # noqa: N801 - hpccm naming
    """The runtime stage's check that torch.compile and NumPy work in it (a build step after library_check)."""

    def __init__(self) -> None:
        super().__init__()
        self += comment("torch.compile works here (a C++ compiler, Python's headers) and NumPy with torch")
        self += shell(commands=compile_commands())


compile_check = lint_clean(compile_check)
