"""Building the Apptainer definition into a SIF, with an optional ORAS push verified against the manifest."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from generator.recipe import catalog
from generator.model.site import Site
from generator.images.builders import BuildResult, find_builder, inspect_argv, sif_build_argv
from generator.images.context import CACHE_DIR, prepare_context
from generator.images.process import PushNotVerified, need, stderr_progress, stream
from generator.images.registry import push_target
from generator.images.tags import default_ref


def build_sif(site: Site, recipe: str | catalog.Recipe, *, out: Path | None = None, push: bool | str | None = None,
              progress: Callable[[str], None] = stderr_progress, builder: str | None = None,
              registry: str | None = None, cache_dir: Path = CACHE_DIR) -> BuildResult:
    """Build the Apptainer definition into a SIF (`<recipe>-<site>.sif`); push it with ORAS."""
    recipe = catalog.load(recipe)
    start = time.monotonic()
    ref = default_ref(site, recipe, fmt="apptainer")
    remote = push_target(site, ref, push, registry)
    tool = find_builder("apptainer", builder)
    sif = (out or Path(f"{recipe.name}-{site.name}.sif")).absolute()
    stamp = sif.with_name(sif.name + ".tag")
    cached = sif.is_file() and stamp.is_file() and stamp.read_text().strip() == ref
    if cached:
        progress(f"{sif} is {ref}: nothing to build")
    else:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="context-", dir=cache_dir) as ctx:
            prepare_context(site, recipe, "apptainer", Path(ctx), cache_dir, progress)
            # a plain user: Apptainer >= 1.1 and SingularityCE >= 4 find their way unprivileged (fakeroot, or proot,
            # which SingularityCE 4 takes only when --fakeroot is not given); Singularity 3.x needs --fakeroot; a
            # build for another site (container.build = "none": build --elsewhere) keeps --fakeroot as well
            fakeroot = os.geteuid() != 0 and site.container.build != "user"
            stream(sif_build_argv(tool, str(sif), f"{recipe.name}.def", fakeroot=fakeroot, force=True), progress,
                    f"{tool} build of {sif.name}", cwd=Path(ctx))
        stamp.write_text(ref + "\n")
    blob = "sha256:" + file_sha256(sif)
    if remote:
        stream((tool, "push", str(sif), f"oras://{remote}"), progress, f"push {remote}")
        need("skopeo", f"verify the pushed SIF {remote}")
        raw = subprocess.run(inspect_argv(remote), capture_output=True)
        layers = [layer.get("digest") for layer in json.loads(raw.stdout or b"{}").get("layers", [])] \
            if raw.returncode == 0 else []
        if blob not in layers:
            raise PushNotVerified(f"pushed {remote} but the registry's manifest does not list the SIF {blob}")
        digest, ref = "sha256:" + hashlib.sha256(raw.stdout).hexdigest(), remote
    else:
        digest, ref = blob, str(sif)
    return BuildResult(ref=ref, digest=digest, size_bytes=sif.stat().st_size, seconds=time.monotonic() - start,
                       cached=cached)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
