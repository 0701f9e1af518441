"""Building a recipe's OCI image (skipped when its content-hashed tag exists), with an optional verified push."""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from generator.files import machine_lock, one_at_a_time
from generator.recipe import catalog
from generator.model.site import Site
from generator.images.base import ensure_base_image
from generator.images.builders import BuildResult, build_argv, exists_argv, find_builder, inspect_local, target_platform
from generator.images.context import CACHE_DIR, ca_bundle, prepare_context
from generator.images.process import stderr_progress, stream, succeeds
from generator.images.registry import push as push_image, push_target, verify_push
from generator.images.tags import default_ref


def build_image(site: Site, recipe: str | catalog.Recipe, *, tag: str | None = None, push: bool | str | None = None,
                target: str | None = None, progress: Callable[[str], None] = stderr_progress,
                builder: str | None = None, registry: str | None = None, cache_dir: Path = CACHE_DIR,
                cache_from: str | None = None, cache_to: str | None = None) -> BuildResult:
    """Build `recipe` for `site` as an OCI image (skipped when the tag exists) and, with `push`
    (True, or the registry HOST[/PATH] as a string), push it and verify the pushed digest."""
    recipe = catalog.load(recipe)
    start = time.monotonic()
    local = tag or default_ref(site, recipe, target=target)
    remote = push_target(site, local, push, registry)
    builder = find_builder("docker", builder)
    cached = succeeds(exists_argv(builder, local))
    if not cached:
        # One build at a time per user and builder on this machine: images that share steps (every recipe's
        # apt and Python layers) then share their layers, which concurrent builds would each make anew.
        lock = machine_lock(f"{Path(builder).name}-build")
        with one_at_a_time(lock, lambda: progress(f"waiting for another gen-recipe build on this machine ({lock})")):
            cached = succeeds(exists_argv(builder, local))           # that build may have been this one
            if not cached:
                _build(site, recipe, local, builder, target, cache_dir, cache_from, cache_to, progress)
    if cached:
        progress(f"{local} exists: nothing to build")
    size, digest = inspect_local(builder, local)
    ref = local
    if remote:
        digest = push_image(builder, local, remote, progress)
        verify_push(remote, digest)
        ref = remote
    return BuildResult(ref=ref, digest=digest, size_bytes=size, seconds=time.monotonic() - start, cached=cached)


def _build(site: Site, recipe: catalog.Recipe, local: str, builder: str, target: str | None, cache_dir: Path,
           cache_from: str | None, cache_to: str | None, progress: Callable[[str], None]) -> None:
    import platform
    plat = target_platform(site.host.arch, platform.machine())
    ensure_base_image(site, builder=builder, progress=progress)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="context-", dir=cache_dir) as ctx:
        prepare_context(site, recipe, "docker", Path(ctx), cache_dir, progress)
        secret = ca_bundle() if site.software.pip_cert_secret and builder != "ch-image" else None
        if Path(builder).name == "ch-image":
            short_names(Path(ctx) / "Dockerfile")
        stream(build_argv(builder, Path(ctx), local, target=target, secret=secret, cache_from=cache_from,
                          cache_to=cache_to, platform=plat), progress,
               f"{builder} build of {local}" + (f" for {plat} (emulated)" if plat else ""))


def short_names(dockerfile: Path) -> None:
    """The generated FROM lines name Docker Hub (docker.io/...) for podman and buildah; ch-image takes short names
    as Docker Hub's and fails on the explicit host (Charliecloud issue #1183, open: "ch-image pull docker.io/...
    fails"): for it, the same images by their short names (the meaning is the same: Docker Hub's)."""
    text = dockerfile.read_text(encoding="utf-8")
    fixed = re.sub(r"^(FROM\s+(?:--\S+\s+)*)docker\.io/(?:library/)?", r"\1", text, flags=re.M | re.I)
    if fixed != text:
        dockerfile.write_text(fixed, encoding="utf-8")
