"""How images reach each site (container.build, image_from), whose GPU libraries they run with, and GPU-aware
MPI: the launch scripts' `# Image:` lines, the runtime flags, `gen-recipe build`'s refusal (issue #31)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.images import tags
from generator.model import site as site_mod
from generator.run import launch
from tests.helpers import account, all_sites, run_cli

REPO = Path(__file__).resolve().parents[2]


def image_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("# Image: "))
    out = [lines[start]]
    out += [ln for ln in lines[start + 1:] if ln.startswith("#    ")]
    return out


def flat(text: str) -> str:
    return " ".join(text.replace("\\\n", " ").split())


def test_a_site_that_cannot_build_says_so_and_how_the_image_gets_there():
    s = site_mod.load("lumi")
    assert s.container.build == "none"
    text = launch.script(s, launch.Job(account=account(s)))
    line, note = image_lines(text)[:2]
    assert line == "# Image: gen-recipe build --site lumi --recipe pytorch --push --registry HOST/PATH"
    assert "where images can be built: lumi cannot build images (container.build)" in flat(note)
    assert "then this launch command with --registry HOST/PATH names the pushed image and prints the line" in flat(
        "\n".join(image_lines(text)).replace("#    ", ""))
    assert "singularity build" not in text and "--fakeroot" not in text
    pushed = launch.script(s, launch.Job(account=account(s), registry="ghcr.io/me/gen-recipe"))
    ref = tags.default_ref(s, "pytorch", registry="ghcr.io/me/gen-recipe")     # the OCI image: LUMI documents docker://
    assert image_lines(pushed)[0] == f"# Image: singularity pull pytorch-lumi.sif docker://{ref}"
    assert "pushed by gen-recipe build --site lumi --recipe pytorch --push --registry " \
           "ghcr.io/me/gen-recipe where images can be built" in image_lines(pushed)[1]


@pytest.mark.parametrize("name", ["galileo", "hlrs"])
def test_singularity_3_sites_print_a_build_that_runs_as_a_plain_user(name):
    s = site_mod.load(name)
    assert s.container.build == "fakeroot"
    line, note = image_lines(launch.script(s, launch.Job(account=account(s))))[:2]
    assert line == f"# Image: gen-recipe build --site {name} --recipe pytorch --format apptainer"
    assert note == "#    (it runs apptainer/singularity build --fakeroot for a plain user, as this site builds)"


def test_the_pull_line_names_the_pushed_reference_for_registry_runtimes():
    s = site_mod.load("perlmutter")
    bare = launch.script(s, launch.Job(account=account(s)))
    assert image_lines(bare)[0] == "# Image: gen-recipe build --site perlmutter --recipe pytorch --push --registry HOST/PATH"
    assert "podman-hpc runs images from a registry" in image_lines(bare)[1]
    text = launch.script(s, launch.Job(account=account(s), registry="registry.example.org/me"))
    ref = tags.default_ref(s, "pytorch", registry="registry.example.org/me")
    assert image_lines(text)[0] == f"# Image: podman-hpc pull {ref}"
    assert f" {ref} " in flat(text)                      # and the job runs what was pulled
    udocker = site_mod.load("ifca")
    text = launch.script(udocker, launch.Job(account=account(udocker), registry="registry.example.org/me"))
    ref = tags.default_ref(udocker, "pytorch", registry="registry.example.org/me")
    name = re.search(r"udocker create --name=(\S+) ", image_lines(text)[0]).group(1)
    assert image_lines(text)[0] == f"# Image: udocker pull {ref} && udocker create --name={name} {ref}"
    assert f" {name} " in flat(text)


def test_local_scripts_name_the_build_that_makes_their_image():
    s = site_mod.load("local")
    for runtime, extra in (("charliecloud", " --runtime charliecloud"), ("udocker", " --runtime udocker"),
                           ("podman", "")):
        line = image_lines(launch.script(s, launch.Job(runtime=runtime)))[0]
        assert line == f"# Image: gen-recipe build --site local --recipe pytorch{extra}", line


COMMANDS = ("gen-recipe", "singularity", "apptainer", "podman-hpc", "podman", "udocker", "ch-image", "sarus", "docker")


@pytest.mark.parametrize("name", all_sites())
def test_every_image_line_is_a_command_as_printed(name):
    """The `# Image:` line of every runtime's script, with and without --registry, is one shell command (notes go
    on the lines after it), or says the image was given or is imported by the engine."""
    s = site_mod.load(name)
    for rt in s.runtimes:
        for registry in ("", "ghcr.io/me/gen-recipe"):
            line = image_lines(launch.script(s, launch.Job(account=account(s), runtime=rt.name,
                                                           registry=registry)))[0].removeprefix("# Image: ")
            if line.startswith("the engine imports"):
                continue
            proc = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0 and line.split()[0] in COMMANDS, (rt.name, registry, line, proc.stderr)


@pytest.mark.parametrize("registry", ["a b;rm", "http://ghcr.io/me", "ghcr.io/me:5000", "GHCR.io/Me", "ghcr.io/me/x:tag",
                                      "ghcr.io//x", "ghcr.io/me@sha256:ab", "x" * 300])
def test_registry_is_host_and_path_checked_like_every_value_that_reaches_a_script(registry):
    r = run_cli("launch", "--site", "lumi", "--account", "project_465000000", "--registry", registry)
    assert r.code == 2 and r.err.count("\n") == 1 and "is not HOST[:PORT][/PATH]" in r.err, r.err
    ok = run_cli("launch", "--site", "lumi", "--account", "project_465000000", "--registry", "127.0.0.1:5000/gen-recipe")
    assert ok.code == 0, ok.err
    assert "--registry 127.0.0.1:5000/gen-recipe" in next(ln for ln in ok.out.splitlines() if ln.startswith("# Generated"))


def test_the_container_engine_says_how_its_image_gets_there():
    s = site_mod.load("alps")
    line, note = image_lines(launch.script(s, launch.Job()))[:2]
    assert line == "# Image: gen-recipe build --site alps --recipe pytorch --push --registry HOST/PATH", line
    assert note.startswith("#    (where images can be built: ce runs images from a registry"), note
    text = launch.script(s, launch.Job(registry="ghcr.io/me"))
    assert image_lines(text)[0].startswith("# Image: the engine imports ghcr.io/me/pytorch-alps:")
    assert "--registry ghcr.io/me" in next(ln for ln in text.splitlines() if ln.startswith("# Generated by"))


@pytest.mark.parametrize("name", all_sites())
def test_gpu_support_of_cray_mpich_comes_with_its_gtl_library(name):
    s = site_mod.load(name)
    if s.mpi.flavour != "cray-mpich":
        return
    for mode in s.runtime().mpi_modes:
        text = launch.script(s, launch.Job(account=account(s), mode=mode))
        if re.search(r"MPICH_GPU_SUPPORT_ENABLED\W*=?\W*1", text):
            preload = [ln for ln in text.splitlines() if "LD_PRELOAD" in ln]
            assert any("libmpi_gtl_" in ln for ln in preload), (name, mode, preload)


def test_host_rocm_is_bound_only_where_it_is_the_images_release_series():
    lumi, frontier = site_mod.load("lumi"), site_mod.load("frontier")
    gpu = lumi.gpu_user_space()
    assert (str(gpu.host), str(gpu.image), gpu.host_libraries) == ("6.0.3", "6.2.2", False)
    assert "--rocm" not in flat(launch.script(lumi, launch.Job(account=account(lumi))))
    assert frontier.gpu_user_space().host_libraries
    assert "apptainer exec --rocm " in flat(launch.script(frontier, launch.Job(account=account(frontier))))
    r = run_cli("--site", "lumi", "--explain")
    assert "GPU libraries in containers: the image's own rocm 6.2.2 (no --rocm)" in r.out
    assert "--rocm would put the host's 6.0.3 libraries ahead of the images' 6.2.2" in r.out


def _as_plain_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("setpriv is needed to run as a plain user")
    plain = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*plain, sys.executable, "-c", "import generator.cli.main"], capture_output=True, text=True,
                           cwd="/", env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    if probe.returncode != 0:      # a clone in a private folder (mode 0700, as mktemp -d and most homes make them)
        pytest.skip(f"uid 65534 cannot run this checkout's gen-recipe ({sys.executable}, {REPO}: "
                    f"{(probe.stderr.strip().splitlines() or ['?'])[-1][:160]}); clone where other users may read to run it")
    return plain


def test_build_refuses_a_sif_for_a_site_that_cannot_build_in_one_line(tmp_path):
    proc = subprocess.run([*_as_plain_user(), sys.executable, "-m", "generator.cli.main", "build", "--site", "lumi",
                           "--format", "apptainer"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("gen-recipe: site lumi cannot build images (container.build = \"none\" in ")
    assert "--push --registry HOST/PATH" in proc.stderr and "--elsewhere" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_build_runtime_form_is_refused_with_a_sif_format():
    r = run_cli("build", "--site", "local", "--runtime", "charliecloud", "--format", "apptainer")
    assert r.code == 2 and "--runtime charliecloud makes its image from the OCI image" in r.err


@pytest.mark.parametrize("name, command", [
    ("frontier", "apptainer build pytorch-frontier.sif pytorch.def"),
    ("galileo", "singularity build --fakeroot pytorch-galileo.sif pytorch.def"),
    ("lumi", "singularity build pytorch-lumi.sif pytorch.def")])
def test_context_is_a_folder_where_the_printed_build_command_finds_what_the_definition_copies(
        name, command, tmp_path, monkeypatch):
    """`build --context DIR` writes the definition with every relative %files source beside it, and prints the
    build command to run there (the site's tool; --fakeroot where the site builds that way)."""
    monkeypatch.chdir(tmp_path)
    r = run_cli("build", "--site", name, "--format", "apptainer", "--context", "ctx")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("build context: ctx (") and lines[-1] == f"build it there: cd ctx && {command}"
    assert ("cannot build images" in r.out) == (name == "lumi")
    definition = (tmp_path / "ctx" / "pytorch.def").read_text()
    sources = [ln.split()[0] for section in re.findall(r"^%files\n((?:    .*\n)+)", definition, re.M)
               for ln in section.splitlines()]
    assert sources and all((tmp_path / "ctx" / s).exists() for s in sources), sources
    again = run_cli("build", "--site", name, "--context", "ctx")            # the Dockerfile's context replaces it
    assert again.code == 0 and "build it there: cd ctx && " in again.out
    assert not (tmp_path / "ctx" / "pytorch.def").exists() and (tmp_path / "ctx" / "Dockerfile").is_file()


def test_context_refuses_a_folder_that_holds_other_files_and_options_it_does_not_use(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep\n")
    (tmp_path / "a-file").write_text("")
    for argv, said in ((("--context", "mine"), "--context mine: the folder holds files gen-recipe did not write"),
                       (("--context", "a-file"), "--context a-file: exists and is not a folder"),
                       (("--context", "new", "--push"), "--context writes a folder to build in: leave out --push")):
        r = run_cli("build", "--site", "frontier", *argv)
        assert r.code == 2 and said in r.err and r.err.count("\n") == 1, r.err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep\n" and not (tmp_path / "new").exists()


def test_a_definition_starts_from_an_oci_archive_only_of_an_image_made_here(tmp_path):
    text = (REPO / "sites" / "local.toml").read_text().replace('devel = "localhost/debian:bookworm"',
                                                                'devel = "docker.io/library/debian:bookworm"')
    (tmp_path / "s.toml").write_text(text)
    r = run_cli("--site", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert r.code == 2 and "images.none.bootstrap" in r.err and "oci-archive is for images in this machine" in r.err


def test_udocker_image_is_a_container_name_not_a_registry_reference():
    r = run_cli("launch", "--site", "local", "--runtime", "udocker", "--workload", "mnist", "--image",
                "127.0.0.1:5000/gen-recipe/pytorch-local:1")
    assert r.code == 2 and r.err.count("\n") == 1 and "udocker runs a created container, named by --image" in r.err
    assert "udocker create --name=NAME 127.0.0.1:5000/gen-recipe/pytorch-local:1" in r.err
    ok = run_cli("launch", "--site", "local", "--runtime", "udocker", "--workload", "mnist", "--image", "mine")
    assert ok.code == 0 and "setup --execmode=P1 mine\n" in ok.out


def test_an_image_the_runtime_pulls_itself_is_not_built_over():
    r = run_cli("launch", "--site", "frontier", "--account", "abc", "--image", "docker://ghcr.io/me/x:1")
    assert r.code == 0 and "# Image: docker://ghcr.io/me/x:1, given with --image (the runtime pulls it" in r.out
    assert "--out docker://" not in r.out


def test_context_hostile_folders_and_lists_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_cli("build", "--site", "frontier", "--context", "ctx").code == 0
    written = {p: p.read_bytes() for p in (tmp_path / "ctx").rglob("*") if p.is_file()}
    (tmp_path / "link").symlink_to("ctx")
    mark = tmp_path / "ctx" / ".gen-recipe-context"
    for argv, said, edit in (
            (("--context", "link"), "--context link: is a symbolic link", None),
            (("--context", ""), "argument --context: '' is no value", None),        # the parser's rule (cli/main.py)
            (("--context", "ctx", "--cache-from", "type=gha"), "leave out --push", None),
            (("--context", "ctx"), "a file of the list must be a relative path inside ctx", "../victim/x\n"),
            (("--context", "ctx"), "not a list gen-recipe wrote", "\0bin\n")):
        if edit:
            mark.write_bytes(written[mark] + edit.encode())
        r = run_cli("build", "--site", "galileo", "--format", "apptainer", *argv)
        assert r.code == 2 and said in r.err and r.err.count("\n") == 1, r.err
        if edit:
            mark.write_bytes(written[mark])
    assert {p: p.read_bytes() for p in (tmp_path / "ctx").rglob("*") if p.is_file()} == written


def test_context_commands_name_the_sites_platform_and_a_folder_that_is_not_an_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run_cli("build", "--site", "alps", "--context=-dash")
    assert r.code == 0, r.err
    assert r.out.splitlines()[-1].startswith("build it there: cd ./-dash && podman build --layers --platform linux/arm64 ")


def test_context_lines_show_the_folder_without_raw_control_characters(tmp_path, monkeypatch):
    """The review's finding: "build it there: cd ..." printed a folder name's escape codes raw to the terminal."""
    from generator.errors import UNSAFE_FOR_TERMINAL

    monkeypatch.chdir(tmp_path)
    r = run_cli("build", "--site", "frontier", "--format", "apptainer", "--context", "c\x1b[31mx\u202e")
    assert r.code == 0 and not UNSAFE_FOR_TERMINAL.search(r.out.replace("\n", "")), r.out
    assert "build it there: cd 'c\\x1b[31mx\\u202e' && apptainer build pytorch-frontier.sif pytorch.def" in r.out


def test_context_of_an_app_with_its_own_wheel_on_the_torch_stack_carries_both_wheels(tmp_path, monkeypatch):
    """[python] wheels on base "pytorch": the context carries the site's torch wheel (wheels/) and the app's own
    (under app/), and the Dockerfile installs each from a bind mount, the app's in a layer of its own after the
    stack's; no COPY of either (the image test builds the app-wheel path on base "none", the trainer the stack's)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app" / "dist").mkdir(parents=True)
    (tmp_path / "app" / "dist" / "mypkg-1.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + bytes(18))
    (tmp_path / "app" / "app.toml").write_text('schema = 1\nname = "wheelapp"\nbase = "pytorch"\n[python]\n'
                                                'wheels = ["dist/mypkg-1.0-py3-none-any.whl"]\n'
                                                '[run]\ncommand = ["python3", "-c", "import mypkg"]\n')
    r = run_cli("build", "--site", "local", "--recipe", "app/app.toml", "--format", "docker", "--context", "ctx")
    assert r.code == 0, r.err
    torch = site_mod.load("local").software.torch_wheel.rsplit("/", 1)[-1]
    ctx = tmp_path / "ctx"
    assert (ctx / "wheels" / torch).is_file() and (ctx / "app" / "dist" / "mypkg-1.0-py3-none-any.whl").is_file()
    lines = (ctx / "Dockerfile").read_text().splitlines()
    stack = next(i for i, ln in enumerate(lines) if f"install /wheels/{torch}" in ln)
    own = next(i for i, ln in enumerate(lines) if "install /app-wheels/dist/mypkg-1.0-py3-none-any.whl" in ln)
    assert stack < own and "--mount=type=bind,source=app,target=/app-wheels" in lines[own], lines[own]
    assert not [ln for ln in lines if ln.startswith("COPY") and ".whl" in ln]
