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

from generator import render, site
from generator.blocks import rocm
from generator.plan import plan

LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
NEEDED = [Path("/usr/bin/curl"), Path("/usr/bin/xz"), LIBDIR / "libcurl.so.4", LIBDIR / "liblzma.so.5",
          LIBDIR / "libacl.so.1"]


@pytest.mark.parametrize("name", ["frontier", "lumi", "odo"])
def test_rocm_sites_run_on_the_distribution_image(name):
    s = site.load(name)
    assert s.base.runtime == "ubuntu:22.04" != s.base.devel
    assert plan(s).rocm_runtime
    text = render.recipe_text(s, "pytorch", "docker")
    runtime = text[text.index("FROM ubuntu:22.04 AS runtime"):]
    assert "rocm/dev" not in runtime                      # nothing of the devel image's ROCm but the copy
    assert "COPY --from=devel /opt/rocm-runtime /opt/rocm\n" in runtime
    assert "xargs -r -a /opt/rocm/share/gen-recipe/distro-packages.txt apt-get install" in runtime
    devel = text[:text.index("FROM ubuntu:22.04 AS runtime")]
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
