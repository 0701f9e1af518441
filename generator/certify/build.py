"""The certificate `gen-recipe build` makes: the SBOM and the provenance of the image it built, signed and
attached to the pushed image, or written beside the exported file; unsigned, for a signer of its own."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
from pathlib import Path

import recipes as _recipes
from generator.certify import certificate, provenance, sbom
from generator.certify.statement import subject
from generator.images.context import CACHE_DIR
from generator.images.sif import file_sha256
from generator.images.tags import context_manifest
from generator.model.site import Site
from generator.recipe import catalog, render


def recipe_file(recipe: catalog.Recipe) -> Path | None:
    if recipe.source:
        return Path(recipe.source)
    path = Path(_recipes.__file__).parent / f"{recipe.name}.py"
    return path if path.is_file() else None


def statements(site: Site, recipe: str | catalog.Recipe, *, fmt: str, builder: str, run_ref: str, image: str,
               digest: str, subjects: list[dict], started: str, finished: str, target: str | None = None,
               platform: str | None = None) -> dict[str, dict]:
    """The SBOM (read by running `run_ref` with `builder`) and provenance of one build."""
    r = catalog.load(recipe)
    text = render.recipe_text(site, r, fmt)
    tool = "apptainer" if builder in ("apptainer", "singularity") else builder
    created = created_at(builder, run_ref)
    reused = created is not None and created < _seconds(started) - 5
    if reused:
        finished = certificate.utc(datetime.datetime.fromtimestamp(created, datetime.timezone.utc))
    inputs = provenance.BuildInputs(
        site=site.name, site_file=Path(site.path) if site.path else Path("/nonexistent"), recipe=r.name,
        recipe_file=recipe_file(r), fmt=fmt, text=text, builder=tool, builder_version=certificate.tool_version(tool),
        started=started, finished=finished, target=target, platform=platform, context=context_manifest(site, r),
        bases=certificate.base_digests(builder, text) if fmt == "docker" else {},
        environ=provenance.github_environ(os.environ), reused=reused)
    return certificate.build_statements(subjects, sbom.inventory(builder, run_ref), inputs, image, digest,
                                        context_files(site, r))


def _seconds(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def created_at(builder: str, ref: str) -> float | None:
    """When the image was made (seconds since the epoch): the builder's record, a SIF file's time; None unknown."""
    if builder in ("apptainer", "singularity"):
        return Path(ref).stat().st_mtime if Path(ref).is_file() else None
    fmt = "{{.Created.Unix}}" if builder != "docker" else "{{.Created}}"
    tool = "docker" if builder == "docker" else "podman"
    done = subprocess.run((tool, "image", "inspect", "--format", fmt, ref), capture_output=True, text=True)
    out = done.stdout.strip()
    if done.returncode != 0 or not out:
        return None
    try:
        return float(out) if out.isdigit() else _seconds(re.sub(r"\.[0-9]+", "", out))
    except ValueError:
        return None


def context_files(site: Site, recipe: catalog.Recipe) -> tuple[sbom.Built, ...]:
    """The site's wheel the build context carried (software.torch_wheel), with its sha256, when it is here."""
    wheel = render.site_wheel(site, recipe)
    path = CACHE_DIR / "wheels" / Path(wheel).name
    if not wheel or not path.is_file():
        return ()
    parts = path.name.split("-")
    return (sbom.Built(path.name, parts[1] if len(parts) > 1 else "", f"file:{wheel}", file_sha256(path),
                       "copied from the build context (site.software.torch_wheel)", origin="context"),)


__all__ = ["statements", "subject"]
