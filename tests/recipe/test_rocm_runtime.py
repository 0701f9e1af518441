"""The slim ROCm runtime stage: what the generator emits for ROCm sites, and the collection
commands run for real (sh, ldd, dpkg) on a tree of real Debian binaries and libraries that stands in
for a ROCm build stage."""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from generator.recipe import render
from generator.model import site
from generator.recipe.blocks import rocm
from generator.recipe.plan import plan

LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
NEEDED = [Path("/usr/bin/curl"), Path("/usr/bin/xz"), LIBDIR / "libcurl.so.4", LIBDIR / "liblzma.so.5",
          LIBDIR / "libacl.so.1"]


@pytest.mark.parametrize("name", ["frontier", "lumi", "odo"])
def test_rocm_sites_run_on_the_distribution_image(name):
    s = site.load(name)
    assert s.base.runtime == "ubuntu:22.04" != s.base.devel
    assert plan(s).rocm_runtime
    text = render.recipe_text(s, "pytorch", "docker")
    runtime = text[text.index("FROM docker.io/library/ubuntu:22.04 AS runtime"):]
    assert "rocm/dev" not in runtime                      # nothing of the devel image's ROCm but the copy
    assert "COPY --from=devel /opt/rocm-runtime /opt/rocm\n" in runtime
    assert "xargs -r -a /opt/rocm/share/gen-recipe/distro-packages.txt apt-get install" in runtime
    devel = text[:text.index("FROM docker.io/library/ubuntu:22.04 AS runtime")]
    # collected after everything it scans: the last instruction of the build stage
    assert devel.rstrip().endswith("rm -rf /opt/rocm-runtime/.work")
    definition = render.recipe_text(s, "pytorch", "apptainer")
    assert "%files from devel\n    /opt/rocm-runtime /opt/rocm\n" in definition


def test_cuda_and_same_image_rocm_sites_keep_their_runtime_stage(tmp_path):
    s = site.load("alps")                            # CUDA: NVIDIA publishes runtime images
    assert not plan(s).rocm_runtime and "rocm-runtime" not in render.recipe_text(s, "pytorch", "docker")
    text = (resources.files("sites") / "frontier.toml").read_text(encoding="utf-8").replace(
        'runtime = "ubuntu:22.04"                 #', 'runtime = "rocm/dev-ubuntu-22.04:6.2.4" #', 1)
    (tmp_path / "frontier.toml").write_text(text, encoding="utf-8")
    same = site.load(str(tmp_path / "frontier.toml"))
    assert same.base.runtime == same.base.devel and not plan(same).rocm_runtime
    assert "rocm-runtime" not in render.recipe_text(same, "pytorch", "docker")


@pytest.mark.skipif(not all(p.exists() for p in NEEDED) or not shutil.which("dpkg"),
                    reason="needs Debian's curl, xz, libcurl4, liblzma5, libacl1 and dpkg")
def test_collection_commands_copy_the_rocm_closure_and_list_distro_packages(tmp_path):
    """A stand-in build stage: ROCm's prefix holds real libraries (libcurl, liblzma, libacl), the
    scanned prefix a program that links libcurl, the skipped prefix one that links liblzma."""
    versioned = tmp_path / "opt" / "rocm-9.9.9" / "lib"
    versioned.mkdir(parents=True)
    (tmp_path / "opt" / "rocm").symlink_to("rocm-9.9.9")
    for lib in ("libcurl.so.4", "liblzma.so.5", "libacl.so.1"):
        real = (LIBDIR / lib).resolve()
        shutil.copy(real, versioned / real.name)
        (versioned / lib).symlink_to(real.name)           # soname link, as ROCm installs them
    (versioned / "curl").mkdir()                          # data a library keeps beside it (rocBLAS's kernels)
    (versioned / "curl" / "kernels.dat").write_text("k", encoding="utf-8")
    for prog, where in (("curl", "usr/local/bin"), ("xz", "usr/local/ollama/bin")):
        (tmp_path / where).mkdir(parents=True)
        shutil.copy(f"/usr/bin/{prog}", tmp_path / where / prog)
    roots = tmp_path / "opt"
    out = tmp_path / "stage"
    commands = rocm.collect_commands(out=str(out), scan=[str(tmp_path / "usr/local")],
                                     skip=[str(tmp_path / "usr/local/ollama")], roots=[str(roots / "rocm")],
                                     dlopen=[str(roots / "rocm/lib/libacl.so.1")])
    env = dict(os.environ, LD_LIBRARY_PATH=str(roots / "rocm/lib"))   # the build image's ld.so.conf
    proc = subprocess.run(["sh", "-e", "-c", " && ".join(commands)], env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    lib = out / "lib"
    assert sorted(p.name for p in lib.iterdir()) == ["curl", "libacl.so.1", "libcurl.so.4"]
    assert not (lib / "libcurl.so.4").is_symlink()                       # links resolved, soname kept
    assert (lib / "libcurl.so.4").read_bytes() == (LIBDIR / "libcurl.so.4").read_bytes()
    assert (lib / "curl" / "kernels.dat").read_text(encoding="utf-8") == "k"
    packages = (out / rocm.PACKAGES).read_text(encoding="utf-8").split()
    assert packages == sorted(set(packages)) and "libc6" in packages
    owner = subprocess.run(["dpkg", "-S", "*/x86_64-linux-gnu/libnghttp2.so.14"], capture_output=True, text=True,
                           check=True).stdout.split(":")[0]
    assert owner in packages                                           # a dependency of libcurl
    assert not (out / ".work").exists()


def test_collection_fails_when_no_package_owns_a_dependency(tmp_path):
    """A dependency of a ROCm library found outside ROCm and outside every package cannot be
    installed in the runtime stage: the build stops, naming it."""
    if not shutil.which("dpkg") or not (LIBDIR / "libcurl.so.4").exists():
        pytest.skip("needs dpkg and libcurl4")
    rocm_lib, stray = tmp_path / "opt" / "rocm" / "lib", tmp_path / "stray"
    for d in (rocm_lib, stray, tmp_path / "usr" / "local"):
        d.mkdir(parents=True)
    shutil.copy((LIBDIR / "libcurl.so.4").resolve(), rocm_lib / "libcurl.so.4")
    shutil.copy((LIBDIR / "libnghttp2.so.14").resolve(), stray / "libnghttp2.so.14")
    commands = rocm.collect_commands(out=str(tmp_path / "stage"), scan=[str(tmp_path / "usr/local")], skip=[],
                                     roots=[str(tmp_path / "opt/rocm")], dlopen=[str(rocm_lib / "libcurl.so.4")])
    env = dict(os.environ, LD_LIBRARY_PATH=f"{rocm_lib}:{stray}")
    proc = subprocess.run(["sh", "-e", "-c", " && ".join(commands)], env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode != 0
    assert f"no package owns {stray}/libnghttp2.so.14" in proc.stderr


def _renamed_needed(src: Path, dst: Path, old: bytes, new: bytes) -> None:
    """A copy of a real ELF program whose dependency `old` is renamed to `new` (same length)."""
    assert len(old) == len(new)
    data = src.read_bytes()
    assert old + b"\0" in data
    dst.write_bytes(data.replace(old + b"\0", new + b"\0"))
    dst.chmod(0o755)


@pytest.mark.skipif(not Path("/usr/bin/xz").exists(), reason="needs Debian's xz")
def test_library_check_names_a_missing_library_and_lets_the_driver_ones_pass(tmp_path):
    """The runtime stage's last step (blocks/libcheck.py), run for real: a program that needs a library
    no image has fails the build with its name; the GPU driver's libcuda.so.1 (mounted by --nv at run
    time) does not; a skipped tree (Ollama's) is not looked at."""
    from generator.recipe.blocks import libcheck

    def run(*programs: tuple[str, bytes]) -> subprocess.CompletedProcess:
        root = tmp_path / "usr_local"
        shutil.rmtree(root, ignore_errors=True)
        (root / "bin").mkdir(parents=True)
        (root / "ollama").mkdir()
        for where, needed in programs:
            _renamed_needed(Path("/usr/bin/xz"), root / where, b"liblzma.so.5", needed)
        commands = libcheck.check_commands(scan=[str(root)], skip=[str(root / "ollama")],
                                           work=str(tmp_path / "ldd"))
        return subprocess.run(["sh", "-e", "-c", " && ".join(commands)], capture_output=True, text=True, check=False)

    ok = run(("bin/xz", b"liblzma.so.5"), ("bin/xz-gpu", b"libcuda.so.1"), ("ollama/runner", b"libzzzz.so.5"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run(("bin/xz", b"liblzma.so.5"), ("bin/tool", b"libzzzz.so.5"))
    assert bad.returncode != 0
    assert f"not in the image: libzzzz.so.5, needed by {tmp_path / 'usr_local' / 'bin' / 'tool'}" in bad.stdout
    assert "xz," not in bad.stdout


def test_every_runtime_stage_ends_with_the_library_check():
    for name in ("local", "alps", "frontier", "supermuc"):
        text = render.recipe_text(site.load(name), "pytorch", "docker")
        runtime = text[text.index(" AS runtime"):]
        assert text.count("xargs -r ldd /dev/null") == 1 and "xargs -r ldd /dev/null" in runtime
        assert ("find /usr/local /opt/rocm " in runtime) == (name == "frontier")


def test_library_check_requires_the_names_opened_with_dlopen(tmp_path):
    """libfabric --enable-cuda-dlopen opens "libcudart.so"; the check looks the name up in the linker
    cache (`ldconfig -p`), run here against this machine's cache."""
    from generator.recipe.blocks import libcheck
    empty = tmp_path / "empty"
    empty.mkdir()

    def run(name: str) -> subprocess.CompletedProcess:
        commands = libcheck.check_commands(scan=[str(empty)], skip=[], dlopen=[name], work=str(tmp_path / "w"))
        return subprocess.run(["sh", "-e", "-c", " && ".join(commands)], capture_output=True, text=True, check=False)

    assert run("libc.so.6").returncode == 0
    missing = run("libnot-here.so")
    assert missing.returncode != 0 and "not in the linker cache: libnot-here.so (opened with dlopen)" in missing.stdout


@pytest.mark.parametrize("name", ["alps", "perlmutter", "leonardo"])
def test_cuda_sites_run_on_the_cuda_base_image(name):
    """NVIDIA's image flavours (NVIDIA Container Toolkit wiki, "Container images"): base "contains the bare
    minimum (libcudart)"; runtime adds "all the shared libraries from the CUDA toolkit", which torch's
    wheel brings again as pip packages."""
    s = site.load(name)
    assert s.base.runtime.startswith("nvidia/cuda:") and s.base.runtime.endswith("-base-ubuntu22.04")
    text = render.recipe_text(s, "pytorch", "docker")
    runtime = text[text.index(" AS runtime"):]
    slingshot = s.fabric.kind == "slingshot"        # libfabric built --enable-cuda-dlopen
    assert ('ln -sf libcudart.so.12 "$d/libcudart.so"' in runtime) == slingshot
    assert ("grep -q '^[[:space:]]*libcudart.so '" in runtime) == slingshot
