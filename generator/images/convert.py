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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.files import one_at_a_time, write_atomic
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
    container → a created udocker container name (podman export streamed into udocker import --tocontainer,
    the image's config as its container.json), exec mode P1, run with `Platform.local_env`;
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


def _exported(ref: str, into: Sequence[str], what: str, **kw) -> None:
    """`ref`'s file tree (podman export of a created container) streamed into the command `into`: the tree is
    written once, by the reader."""
    cid = quiet(("podman", "create", "--read-only", ref, "/bin/true"), f"create a container of {ref}",
                 text=True).stdout.strip()
    try:
        with subprocess.Popen(("podman", "export", cid), stdout=subprocess.PIPE) as exp:
            proc = subprocess.run(list(into), stdin=exp.stdout, capture_output=True, **kw)
        if exp.returncode or proc.returncode:
            err = proc.stderr.decode(errors="replace").strip()[-300:]
            raise BuildFailed(f"{what} failed: podman export exited {exp.returncode}, {into[0]} {proc.returncode}"
                              + (f" ({err})" if err else ""))
    finally:
        subprocess.run(("podman", "rm", "-f", cid), capture_output=True)


def _unpack(ref: str, tmp: Path, content: str, progress: Progress, dest: Path) -> None:
    progress(f"unpacking {ref} into {dest} (podman export)")
    _exported(ref, ("tar", "-x", "-C", str(tmp)), f"unpacking {ref}")
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
        return _udocker_load(ref, name, u, env, home, progress)


def _udocker_load(ref: str, name: str, u: tuple[str, ...], env: dict[str, str], home: Path,
                  progress: Progress) -> str:
    (home / "lib").mkdir(parents=True, exist_ok=True)
    (home / "lib" / "VERSION").write_text("1.2.11\n")    # use host tools, skip the udockertools download
    wrapper = home / "proot-nok"
    if not wrapper.exists():
        wrapper.write_text(PROOT_WRAPPER)
        wrapper.chmod(0o755)
    if subprocess.run((*u, "inspect", name), capture_output=True, env=env).returncode == 0:
        return name
    progress(f"importing {ref} into udocker (podman export | udocker import --tocontainer)")
    try:
        # the file tree straight into the container: written once (save + load + create wrote it three times)
        _exported(ref, (*u, "import", "--tocontainer", f"--name={name}", "-", f"gen-recipe/{name.lower()}:latest"),
                  f"udocker import {ref}", env=env)
        # import writes a blank config: the image's own (Env, User, Cmd, WorkingDir), as `udocker create` keeps it
        root = quiet((*u, "inspect", "-p", name), f"udocker inspect {name}", env=env, text=True).stdout.strip()
        config = quiet(("podman", "image", "inspect", "--format", '{"architecture": {{json .Architecture}}, '
                        '"os": {{json .Os}}, "config": {{json .Config}}}', ref), f"inspect {ref}", text=True).stdout
        write_atomic(Path(root).parent / "container.json", config)
        # P1 (PRoot, through the wrapper): R1 with the host runc runs, but udocker 1.3.17 then exits 1 on success
        quiet((*u, "setup", "--execmode=P1", name), f"udocker setup {name}", env=env)
    except BaseException:
        subprocess.run((*u, "rm", name), capture_output=True, env=env)     # not taken for made by the next run
        raise
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
