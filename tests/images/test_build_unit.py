"""Fast tests of generator/cli/build.py: tags, argv builders, errors. No builder is run."""

from __future__ import annotations

import re
import shutil
import sys

import pytest

from generator.recipe import catalog, render
from generator.cli import main as cli
from generator import errors
from generator.model import site as site_mod
from generator.errors import UsageError
from generator.images import base, builders, context, convert, process, tags

TAG = re.compile(r"^localhost/gen-recipe/pytorch-local:0\.1\.0-[0-9a-f]{12}$")


@pytest.fixture(scope="module")
def local():
    return site_mod.load("local")


def test_default_ref_is_deterministic(local):
    a = tags.default_ref(local, "pytorch")
    assert TAG.match(a) and a == tags.default_ref(local, "pytorch")
    assert tags.default_ref(local, "pytorch", target="devel") == a + "-devel"
    assert tags.default_ref(local, "pytorch", registry="127.0.0.1:5000/x/") == "127.0.0.1:5000/x/" + a.split("/", 2)[2]
    assert tags.default_ref(local, "pytorch", fmt="apptainer").endswith("-sif")
    assert tags.default_ref(local, "osu") != a.replace("pytorch", "osu")  # each recipe hashes its own text


def test_content_hash_covers_text_and_context(local):
    text = render.recipe_text(local, "pytorch", "docker")
    assert tags.content_hash(text, local, catalog.load("pytorch")) != tags.content_hash(text + "\n", local, catalog.load("pytorch"))
    manifest = dict(tags.context_manifest(local, catalog.load("pytorch")))
    assert manifest[local.software.torch_wheel] == "file:" + local.software.torch_wheel.split("/")[-1]
    assert "workloads/__main__.py" in manifest and not any("__pycache__" in p for p in manifest)
    frontier = site_mod.load("frontier")
    assert not any(p.startswith("wheels/") for p, _ in tags.context_manifest(frontier, catalog.load("pytorch")))


def test_build_argv_per_builder(tmp_path):
    podman = builders.build_argv("podman", tmp_path, "t:1", target="devel", secret="/ca.crt")
    assert podman == ("podman", "build", "--layers", "-f", f"{tmp_path}/Dockerfile", "-t", "t:1", "--target", "devel",
                      "--secret", "id=ca,src=/ca.crt", str(tmp_path))
    docker = builders.build_argv("docker", tmp_path, "t:1", cache_from="type=gha", cache_to="type=gha,mode=max")
    assert docker[:4] == ("docker", "buildx", "build", "--load")
    assert ("--cache-from", "type=gha") == docker[-5:-3] and docker[-1] == str(tmp_path)
    assert builders.build_argv("buildah", tmp_path, "t")[0:2] == ("buildah", "build")
    assert "--secret" not in builders.build_argv("ch-image", tmp_path, "t")


def test_images_are_built_for_the_sites_architecture(tmp_path):
    """Alps is aarch64 (GH200; CSCS "Alps hardware"): its images are linux/arm64, whatever builds them."""
    alps = site_mod.load("alps")
    assert alps.host.arch == "aarch64" and builders.PLATFORM[alps.host.arch] == "linux/arm64"
    for builder in ("podman", "buildah", "docker"):
        argv = builders.build_argv(builder, tmp_path, "t", platform="linux/arm64")
        assert argv[argv.index("--platform") + 1] == "linux/arm64"
    assert "--arch=arm64" in builders.build_argv("ch-image", tmp_path, "t", platform="linux/arm64")
    others = [n for n in sorted(set(site_mod.builtin_names().values())) if site_mod.load(n).host.arch != "x86_64"]
    assert others == ["alps"]
    assert "--platform" not in builders.build_argv("podman", tmp_path, "t")     # natively: the machine's own
    # an arm64 image needs an arm64 machine (no flag) or QEMU registered for it; this x86_64 machine is told so
    assert builders.target_platform("aarch64", "aarch64") is None
    assert builders.target_platform("aarch64", "arm64") is None
    assert builders.target_platform("x86_64", "x86_64") is None
    (tmp_path / "qemu-aarch64").write_text("enabled\n")
    assert builders.target_platform("aarch64", "x86_64", binfmt=tmp_path) == "linux/arm64"
    with pytest.raises(UsageError, match="linux/arm64 and this machine is x86_64: build on an aarch64 machine"):
        builders.target_platform("aarch64", "x86_64", binfmt=tmp_path / "none")


def test_push_and_inspect_argv_use_plain_http_only_locally(tmp_path):
    local = builders.push_argv("podman", "127.0.0.1:5000/g/p:1", tmp_path / "d")
    assert local == ("podman", "push", "--tls-verify=false", "--digestfile", str(tmp_path / "d"), "127.0.0.1:5000/g/p:1",
                     "docker://127.0.0.1:5000/g/p:1")
    assert "--tls-verify=false" not in builders.push_argv("podman", "ghcr.io/o/p:1", tmp_path / "d")
    assert builders.inspect_argv("localhost:5000/p:1") == ("skopeo", "inspect", "--raw", "--tls-verify=false",
                                                       "docker://localhost:5000/p:1")
    assert builders.inspect_argv("ghcr.io/o/p:1") == ("skopeo", "inspect", "--raw", "docker://ghcr.io/o/p:1")
    with pytest.raises(errors.UsageError):
        builders.push_argv("ch-image", "ghcr.io/o/p:1", tmp_path / "d")


def test_wheel_argv_asks_for_exactly_the_named_wheel(tmp_path):
    argv = context.wheel_argv("wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", tmp_path)
    assert argv[0] == sys.executable and "torch==2.13.0+cpu" in argv
    assert argv[argv.index("--platform") + 1] == "manylinux_2_28_x86_64"
    assert argv[argv.index("--python-version") + 1] == "311"


def test_runtime_image_names(local):
    ref = "127.0.0.1:5000/gen-recipe/pytorch-local@sha256:" + "a" * 64
    assert convert.runtime_image_name(local, ref, "podman") == ref
    assert convert.runtime_image_name(local, ref, "charliecloud") == "build/images/pytorch-local-" + "a" * 64
    assert convert.runtime_image_name(local, "localhost/g/p:0.1.0-abc", "udocker") == "p-0_1_0-abc"   # no "." for udocker


@pytest.mark.skipif(bool(shutil.which("apptainer") or shutil.which("singularity")), reason="Apptainer is installed")
def test_apptainer_format_without_apptainer_is_a_clear_error(capsys):
    rc = cli.main(["build", "--site", "local", "--recipe", "pytorch", "--format", "apptainer"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "neither apptainer nor singularity is on PATH" in err and "--format docker" in err


def test_push_needs_a_registry(capsys, monkeypatch):
    monkeypatch.delenv("GEN_RECIPE_REGISTRY", raising=False)
    rc = cli.main(["build", "--site", "local", "--recipe", "pytorch", "--push"])
    err = capsys.readouterr().err
    assert rc == 2 and "--push needs --registry" in err and err.count("\n") == 1


def test_unknown_builder_for_format(capsys):
    rc = cli.main(["build", "--site", "local", "--format", "apptainer", "--builder", "podman"])
    assert rc == 2 and "cannot build the apptainer format" in capsys.readouterr().err


def test_failing_step_streams_then_fails_in_one_line():
    lines = []
    with pytest.raises(process.BuildFailed) as err:
        process.stream(("sh", "-c", "echo step one; echo 'Error: boom' >&2; exit 3"), lines.append, "podman build of x")
    assert lines == ["step one", "Error: boom"]
    assert str(err.value) == "podman build of x failed: sh exited 3 (Error: boom)"


def test_progress_is_prefixed_on_stderr(capsys):
    process.stderr_progress("STEP 1/5")
    out, err = capsys.readouterr()
    assert out == "" and err == "  | STEP 1/5\n"


def test_remote_base_images_are_left_to_the_builder():
    frontier = site_mod.load("frontier")
    assert base.ensure_base_image(frontier, progress=pytest.fail) == frontier.base.devel


def test_export_refuses_links_and_special_files_at_file_and_sidecar_before_any_byte(tmp_path, monkeypatch):
    """build --export FILE: FILE and FILE.sha256 are checked with the write path's rules (no link, FIFO, device,
    directory or hard-linked file) before the build starts; the write step (a fake payload here, not a real
    image) re-checks both before it renames the image into place."""
    import hashlib
    import os

    from generator.images import export
    from tests.helpers import run_cli

    victim = tmp_path / "victim"
    victim.write_text("mine")
    cases = {"link.sif": lambda p: p.symlink_to(victim), "hard.sif": lambda p: os.link(victim, p),
             "fifo.sif": os.mkfifo, "dir.sif": lambda p: p.mkdir(),
             "side.sif.sha256": lambda p: p.symlink_to(victim)}
    for name, plant in cases.items():
        plant(tmp_path / name)
    for name in ("link.sif", "hard.sif", "fifo.sif", "dir.sif", "side.sif"):
        with pytest.raises(UsageError) as exc:
            export.check_targets(tmp_path / name)
        assert "--follow-symlinks" not in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(UsageError, match="not a file name"):
        export.check_targets(tmp_path / "a\x1b[31m.sif")
    assert export.check_targets(tmp_path / "new.sif") is None

    # the whole command refuses before any build (a builder is never looked for)
    monkeypatch.setattr(export, "build_sif", lambda *a, **k: pytest.fail("built before the checks"))
    for name in ("link.sif", "side.sif"):
        r = run_cli("build", "--site", "frontier", "--recipe", "osu", "--export", str(tmp_path / name))
        assert r.code == 2 and r.err.count("\n") == 1 and "symbolic link" in r.err, r.err
    assert victim.read_text() == "mine" and (tmp_path / "link.sif").is_symlink() and not (tmp_path / "side.sif").exists()

    # the write step with a fake payload: the image and its sidecar; a sidecar link planted meanwhile is refused
    # before the image is replaced
    (tmp_path / "good.sif").write_text("old image")
    (tmp_path / "good.sif").chmod(0o600)
    part = tmp_path / "part.sif"
    part.write_bytes(b"fake image")
    done = export.place(part, tmp_path / "good.sif")
    digest = hashlib.sha256(b"fake image").hexdigest()
    assert done.sha256 == digest and (tmp_path / "good.sif").read_bytes() == b"fake image"
    assert (tmp_path / "good.sif.sha256").read_text() == f"{digest}  good.sif\n"
    assert (tmp_path / "good.sif").stat().st_mode & 0o777 == 0o600 and not part.exists()
    part.write_bytes(b"newer image")
    (tmp_path / "good.sif.sha256").unlink()
    (tmp_path / "good.sif.sha256").symlink_to(victim)
    with pytest.raises(UsageError, match="symbolic link"):
        export.place(part, tmp_path / "good.sif")
    assert (tmp_path / "good.sif").read_bytes() == b"fake image" and victim.read_text() == "mine"
