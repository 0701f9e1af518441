"""A built OCI image as each runtime runs it (its `Platform.local_image`): an unpacked directory for
Charliecloud, a created container for udocker, the reference itself for OCI runtimes (docs/runtimes.md §5, §6).
One `Converter` per image form: what it is named, how it is made, how it is removed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from generator.files import one_at_a_time
from generator.run.runtimes import LOCAL_IMAGE_DIR, PLATFORMS, udocker_env
from generator.model.site import Site
from generator.images.process import BuildFailed, ToolMissing, need, quiet, stderr_progress

Progress = Callable[[str], None]


def _safe_name(ref: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", ref.rsplit("/", 1)[-1].replace("@sha256:", "-"))


@dataclass(frozen=True)
class Converter:
    """How a local podman image `ref` becomes one image form under `cache_dir`."""

    name: Callable[[str, Path], str]                       # (ref, cache_dir) → what the runtime is given
    make: Callable[[str, str, Path, Progress], str]        # (ref, name, cache_dir, progress) → name, made
    drop: Callable[[str, Path], None]                      # (name, cache_dir): remove what make made


def runtime_image_name(site: Site, ref: str, runtime: str, *, cache_dir: Path = LOCAL_IMAGE_DIR) -> str:
    """What `runtime_image` returns for `ref`, without making it (pure)."""
    converter = CONVERTERS.get(PLATFORMS[runtime].local_image)
    return converter.name(ref, cache_dir) if converter else ref


PROOT_WRAPPER = """#!/bin/bash
# udocker always passes -k <kernel release>; Debian's proot 5.1 then fails to load libraries (docs/runtimes.md §6)
args=(); while [ $# -gt 0 ]; do [ "$1" = -k ] && { shift 2; continue; }; args+=("$1"); shift; done
exec /usr/bin/proot "${args[@]}"
"""


def runtime_image(site: Site, ref: str, runtime: str, *, cache_dir: Path = LOCAL_IMAGE_DIR,
                  progress: Progress = stderr_progress) -> str:
    """Turn a podman image `ref` into what `runtime` runs (its `Platform.local_image`), reusing what exists:
    directory → an unpacked directory image (podman export + /ch/environment, docs/runtimes.md §5);
    container → a created udocker container name (udocker load of an uncompressed OCI layout from podman
    save; a docker-archive loads but cannot be created from), exec mode P1, run with `Platform.local_env`;
    oci → `ref` itself. Runtimes without a local form (SIF, EDF, ...) need a prebuilt image."""
    kind = PLATFORMS[runtime].local_image
    if not kind:
        raise ToolMissing(f"cannot make a {runtime} image from {ref} here (build it where {runtime} runs, "
                          "or pass a prebuilt image)")
    converter = CONVERTERS.get(kind)
    return converter.make(ref, converter.name(ref, cache_dir), cache_dir, progress) if converter else ref


CONTENT = "gen-recipe-content"      # in an unpacked image's ch/: what it holds (its layers and environment)


def content_of(ref: str) -> str:
    """What an unpacked `ref` holds: its layer digests and its environment (the text of ch/gen-recipe-content)."""
    return quiet(("podman", "image", "inspect", "--format", "{{json .RootFS.Layers}} {{json .Config.Env}}", ref),
                 f"inspect {ref}", text=True).stdout.strip()


def unpacked(site: Site, ref: str, *, cache_dir: Path = LOCAL_IMAGE_DIR) -> Path | None:
    """The Charliecloud directory `runtime_image` made of `ref`, if it exists and holds what `ref` holds."""
    found = Path(runtime_image_name(site, ref, "charliecloud", cache_dir=cache_dir))
    if (found / "ch" / "environment").is_file() and _read(found / "ch" / CONTENT) == content_of(ref):
        return found
    return None


def charliecloud_dir(ref: str, dest: Path, progress: Progress) -> str:
    """`ref` unpacked into `dest` as a Charliecloud directory image (kept when it exists). An image of the
    same layers and environment already unpacked beside it (another tag: one machine's two site files) is
    copied as hard links instead; ch-run mounts directory images read-only, so they never diverge."""
    if (dest / "ch" / "environment").is_file():
        return str(dest)
    need("podman", f"unpack {ref} for ch-run")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with one_at_a_time(dest.parent / f".{dest.name}.lock",
                       lambda: progress(f"waiting for another run unpacking {ref} into {dest}")):
        if (dest / "ch" / "environment").is_file():         # made meanwhile
            return str(dest)
        content = content_of(ref)
        same = [d for d in sorted(dest.parent.iterdir())      # not a half-made or a dropped one (".name.*")
                if d != dest and not d.name.startswith(".") and _read(d / "ch" / CONTENT) == content]
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            if same:
                progress(f"{ref} holds what {same[0].name} holds: hard-linking it into {dest}")
            if not (same and _link_copy(same[0], tmp, content, progress)):
                _unpack(ref, tmp, content, progress, dest)
            if dest.exists():                                    # half-made by an interrupted run
                shutil.rmtree(dest)
            tmp.rename(dest)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return str(dest)


def _link_copy(tree: Path, tmp: Path, content: str, progress: Progress) -> bool:
    """`tree` into the empty folder `tmp` as hard links; False (and `tmp` empty again) when the copy failed
    or came out without `tree`'s record (the tree went away meanwhile: unpack instead)."""
    try:
        quiet(("cp", "-a", "--link", f"{tree}/.", str(tmp)), f"hard-link {tree}")
        if _read(tmp / "ch" / CONTENT) == content:
            return True
    except BuildFailed as exc:
        progress(f"{exc}; unpacking instead")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return False


def _unpack(ref: str, tmp: Path, content: str, progress: Progress, dest: Path) -> None:
    progress(f"unpacking {ref} into {dest} (podman export)")
    cid = quiet(("podman", "create", "--read-only", ref, "/bin/true"), f"create a container of {ref}",
                 text=True).stdout.strip()
    try:
        with subprocess.Popen(("podman", "export", cid), stdout=subprocess.PIPE) as exp:
            tar = subprocess.run(("tar", "-x", "-C", str(tmp)), stdin=exp.stdout, capture_output=True)
        if exp.returncode or tar.returncode:
            raise BuildFailed(f"podman export of {ref} failed: {tar.stderr.decode(errors='replace').strip()[-300:]}")
    finally:
        subprocess.run(("podman", "rm", "-f", cid), capture_output=True)
    env = quiet(("podman", "image", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", ref),
                 f"inspect {ref}", text=True).stdout
    (tmp / "ch").mkdir(exist_ok=True)
    (tmp / "ch" / "environment").write_text(env)
    (tmp / "ch" / CONTENT).write_text(content)


def _drop_dir(path: Path) -> None:
    """Remove an unpacked image: renamed to a dot name first, so no run takes it as a tree to link from
    while it goes (a copy already under way then fails and unpacks instead)."""
    if not path.exists():
        return
    gone = path.with_name(f".{path.name}.dropped-{os.getpid()}")
    path.rename(gone)
    shutil.rmtree(gone, ignore_errors=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def drop_runtime_image(site: Site, ref: str, runtime: str, *, cache_dir: Path = LOCAL_IMAGE_DIR) -> None:
    """Remove what `runtime_image` made for `ref` (an unpacked directory, a udocker container), if anything."""
    converter = CONVERTERS.get(PLATFORMS[runtime].local_image)
    if converter:
        converter.drop(converter.name(ref, cache_dir), cache_dir)


def _udocker(cache_dir: Path) -> tuple[tuple[str, ...], dict[str, str]]:
    """The udocker command (with --allow-root as root) and its environment (a private UDOCKER_DIR)."""
    udocker = shutil.which("udocker") or str(Path(sys.executable).with_name("udocker"))
    if not Path(udocker).exists():
        raise ToolMissing("udocker not found (pip install udocker)")
    root = ("--allow-root",) if os.geteuid() == 0 else ()
    return (udocker, *root), {**os.environ, **udocker_env(cache_dir)}


def _udocker_container(ref: str, name: str, cache_dir: Path, progress: Progress) -> str:
    u, env = _udocker(cache_dir)
    home = Path(env["UDOCKER_DIR"])
    # one load at a time in a repository: images that share layers would write the same layer files
    with one_at_a_time(home / ".gen-recipe.lock", lambda: progress(f"waiting for another udocker load into {home}")):
        return _udocker_load(ref, name, u, env, home, cache_dir, progress)


def _udocker_load(ref: str, name: str, u: tuple[str, ...], env: dict[str, str], home: Path, cache_dir: Path,
                  progress: Progress) -> str:
    (home / "lib").mkdir(parents=True, exist_ok=True)
    (home / "lib" / "VERSION").write_text("1.2.11\n")    # use host tools, skip the udockertools download
    wrapper = home / "proot-nok"
    if not wrapper.exists():
        wrapper.write_text(PROOT_WRAPPER)
        wrapper.chmod(0o755)
    if subprocess.run((*u, "inspect", name), capture_output=True, env=env).returncode == 0:
        return name
    image = f"localhost/gen-recipe-udocker/{name.lower()}:latest"   # a tagged name: a digest ref saves without one
    quiet(("podman", "tag", ref, image), f"tag {ref} for udocker")
    try:
        with tempfile.TemporaryDirectory(prefix="udocker-load-", dir=cache_dir) as tmp:
            layout = Path(tmp) / "oci"
            progress(f"loading {ref} into udocker (podman save --format oci-dir --uncompressed, udocker load)")
            quiet(("podman", "save", "--format", "oci-dir", "--uncompressed", "-o", str(layout), image),
                   f"podman save {ref}")       # uncompressed: half the time of an oci-archive (no gzip)
            # streamed: no archive file beside the layout (one image's size less on disk at the peak)
            with subprocess.Popen(("tar", "-cf", "-", "-C", str(layout), "."), stdout=subprocess.PIPE) as tar:
                quiet((*u, "load"), f"udocker load {ref}", env=env, stdin=tar.stdout)
            if tar.returncode:
                raise BuildFailed(f"archive {ref} for udocker failed: tar exited {tar.returncode}")
    finally:
        # name the tag to drop: a bare `podman untag IMAGE` drops every name, `ref` included
        subprocess.run(("podman", "untag", image, image), capture_output=True)
    quiet((*u, "create", f"--name={name}", image), f"udocker create {name}", env=env)
    # the container is a full copy: its image's layers are not needed to run it (docs/runtimes.md §6)
    quiet((*u, "rmi", image), f"udocker rmi {image}", env=env)
    # P1 (PRoot, through the wrapper): R1 with the host runc runs, but udocker 1.3.17 then exits 1 even on success
    quiet((*u, "setup", "--execmode=P1", name), f"udocker setup {name}", env=env)
    return name


def _udocker_rm(name: str, cache_dir: Path) -> None:
    u, env = _udocker(cache_dir)
    subprocess.run((*u, "rm", name), capture_output=True, env=env)


# The local image forms (`Platform.local_image`) → their converter; "oci" is the podman image itself.
CONVERTERS: Mapping[str, Converter] = {
    "directory": Converter(name=lambda ref, cache_dir: str(cache_dir / _safe_name(ref)),
                           make=lambda ref, name, cache_dir, progress: charliecloud_dir(ref, Path(name), progress),
                           drop=lambda name, cache_dir: _drop_dir(Path(name))),
    "container": Converter(name=lambda ref, cache_dir: _safe_name(ref).replace(".", "_"),   # udocker refuses '.' in names
                           make=_udocker_container, drop=_udocker_rm),
}
