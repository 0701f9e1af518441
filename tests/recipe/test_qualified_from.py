"""Every base image the generator writes names its registry: podman and buildah resolve a short name
(`nvidia/cuda:...`) through registries.conf, and without unqualified-search registries (Debian's default, and
what HPC users build with) stop at "short-name ... did not resolve" before any layer is fetched."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from generator.model.site import BaseImages as Base
from tests.conftest import REPO

GOLDEN = sorted((REPO / "tests").glob("golden*/*/*.*"))
FROM = re.compile(r"^(?:FROM\s+(?:--\S+\s+)*(\S+)|From:\s*(\S+))", re.M)


def bases() -> set[str]:
    """Every base image the golden Dockerfiles and definitions name (stage names and archives left out)."""
    out = set()
    for path in GOLDEN:
        if path.suffix not in (".Dockerfile", ".def"):
            continue
        text = path.read_text(encoding="utf-8")
        stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.M | re.I))
        for m in FROM.finditer(text):
            ref = m.group(1) or m.group(2)
            if ref not in stages and not ref.endswith(".oci.tar"):
                out.add(ref)
    return out


def test_every_generated_base_is_fully_qualified():
    found = bases()
    assert len(found) >= 5 and "docker.io/library/ubuntu:22.04" in found
    assert all(Base.qualified(ref) == ref for ref in found), sorted(r for r in found if Base.qualified(r) != r)


@pytest.mark.parametrize(("short", "full"), [
    ("ubuntu:22.04", "docker.io/library/ubuntu:22.04"), ("rocm/dev-ubuntu-22.04:6.2.4", "docker.io/rocm/dev-ubuntu-22.04:6.2.4"),
    ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:24.05-py3"), ("localhost/debian:bookworm", "localhost/debian:bookworm"),
    ("registry:5000/x/y:1", "registry:5000/x/y:1"), ("debian@sha256:" + "a" * 64, "docker.io/library/debian@sha256:" + "a" * 64)])
def test_qualified(short, full):
    assert Base.qualified(short) == full


@pytest.mark.skipif(not shutil.which("podman"), reason="podman not found (scripts/debian-packages.txt)")
def test_podman_takes_every_generated_base_as_a_name(tmp_path, monkeypatch):
    """Real podman: a short name stops at short-name resolution (where registries.conf has no alias for it);
    the generated, qualified names get past it, to a registry that refuses the connection at once (every
    registry they name mirrored to 127.0.0.1:1 in a registries.conf of the test's: no network is tried)."""
    conf = tmp_path / "registries.conf"
    conf.write_text("".join(f'[[registry]]\nprefix = "{host}"\nlocation = "127.0.0.1:1"\ninsecure = true\n'
                            for host in sorted({ref.split("/", 1)[0] for ref in bases()})))
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    short = subprocess.run(["podman", "pull", "--quiet", "gen-recipe-test/no-alias:1"], capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
    if "short-name" not in short.stderr:
        pytest.skip(f"this machine's registries.conf resolves short names (unqualified-search registries): {short.stderr[-200:]}")
    pulls = {ref: subprocess.Popen(["podman", "pull", "--quiet", ref], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, text=True) for ref in sorted(bases())}     # side by side
    for ref, proc in pulls.items():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode and "short-name" not in err and "127.0.0.1:1" in err, (ref, err)


def test_ch_image_builds_take_the_short_names_back(tmp_path):
    """ch-image reads a short name as Docker Hub's and fails on the explicit docker.io host (Charliecloud issue
    #1183): `gen-recipe build` with it rewrites the context's FROM lines to the same images' short names."""
    from generator.images.oci import short_names
    df = tmp_path / "Dockerfile"
    df.write_text("FROM docker.io/library/ubuntu:22.04 AS runtime\nFROM --platform=linux/amd64 docker.io/nvidia/cuda:12.8.1"
                  "-devel-ubuntu22.04 AS devel\nFROM localhost/debian:bookworm\nRUN echo docker.io/library/x\n")
    short_names(df)
    assert df.read_text() == ("FROM ubuntu:22.04 AS runtime\nFROM --platform=linux/amd64 nvidia/cuda:12.8.1-devel-ubuntu22.04"
                              " AS devel\nFROM localhost/debian:bookworm\nRUN echo docker.io/library/x\n")


def test_a_definition_from_a_local_file_or_the_library_keeps_its_name(tmp_path):
    """Only the docker agent's From: names a registry image; localimage names a file, library a library path."""
    from generator.recipe import render
    from generator.model import site as site_mod
    text = (REPO / "sites" / "frontier.toml").read_text(encoding="utf-8")
    for bootstrap, devel, want in (("localimage", "images/dev.sif", "From: images/dev.sif"),
                                   ("library", "library/default/ubuntu:22.04", "From: library/default/ubuntu:22.04")):
        copy = tmp_path / f"{bootstrap}.toml"
        changed = re.sub(r'^devel = ".*"$', f'devel = "{devel}"', text, count=1, flags=re.M)
        changed = re.sub(r"^\[images\.rocm\]$", f'[images.rocm]\nbootstrap = "{bootstrap}"\nversion = "6.2.4"', changed, count=1, flags=re.M)
        copy.write_text(changed, encoding="utf-8")
        out = render.recipe_text(site_mod.load(str(copy)), "pytorch", "apptainer")
        assert want in out, [ln for ln in out.splitlines() if ln.startswith(("From:", "Bootstrap:", "BootStrap:"))]
