"""Deterministic image references: a tag from the hash of the recipe text and of the build context."""

from __future__ import annotations

import hashlib
from pathlib import Path

from generator import __version__
from generator.recipe import catalog, render
from generator.recipe.payload import workloads_dir
from generator.model.app import IGNORED
from generator.model.site import Site


DEFAULT_REGISTRY = "localhost/gen-recipe"


# Registries served over plain HTTP on this machine (docs/runtimes.md §4).
INSECURE_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def context_manifest(site: Site, recipe: catalog.Recipe) -> list[tuple[str, str]]:
    """(path in the build context, content id) for what gen-recipe puts there: each workloads file
    (built-in recipes) or application file by its sha256, the site's wheel by its file name (PyPI never
    reuses a file name, and the tag can then be computed where the 190 MB wheel is not downloaded)."""
    items = []
    if recipe.payload:
        root = workloads_dir()
        items += [(f"workloads/{f.relative_to(root).as_posix()}", _sha256(f)) for f in sorted(root.rglob("*"))
                  if _wanted(f, root)]
    for rel in recipe.context:
        local = recipe.folder / rel
        found = [local] if local.is_file() else sorted(f for f in local.rglob("*") if _wanted(f, local))
        items += [(f"app/{rel}/{f.relative_to(local).as_posix()}" if f != local else f"app/{rel}", _sha256(f))
                  for f in found]
    wheel = render.site_wheel(site, recipe)
    if wheel:
        items.append((wheel, "file:" + Path(wheel).name))
    return items


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()




def _wanted(path: Path, root: Path) -> bool:
    rel = path.relative_to(root)
    return path.is_file() and not any(part in IGNORED for part in rel.parts) and path.suffix not in (".pyc", ".pyo")


def content_hash(text: str, site: Site, recipe: catalog.Recipe) -> str:
    h = hashlib.sha256(b"gen-recipe build context 1\0" + text.encode())
    for path, content in context_manifest(site, recipe):
        h.update(f"\0{path}\0{content}".encode())
    return h.hexdigest()[:12]


def default_ref(site: Site, recipe: str | catalog.Recipe, *, registry: str = DEFAULT_REGISTRY,
                target: str | None = None, fmt: str = "docker") -> str:
    """The tag `gen-recipe build` gives (or pushes as, with --registry)."""
    r = catalog.load(recipe)
    text = render.recipe_text(site, r, fmt)
    tag = f"{__version__}-{content_hash(text, site, r)}" + (f"-{target}" if target else "") \
        + ("-sif" if fmt == "apptainer" else "")
    return f"{registry.rstrip('/')}/{r.name}-{site.name}:{tag}"


def retarget(ref: str, registry: str) -> str:
    """The same repository name and tag under another registry prefix."""
    return f"{registry.rstrip('/')}/{ref.rsplit('/', 1)[-1]}"


def registry_host(ref: str) -> str:
    first = ref.split("/", 1)[0]
    return first if ("." in first or ":" in first or first == "localhost") and "/" in ref else "docker.io"


def insecure(ref: str) -> bool:
    """Plain-HTTP registries on this machine need --tls-verify=false."""
    host = registry_host(ref)
    name = host.split("]")[0] + "]" if host.startswith("[") else host.rsplit(":", 1)[0]
    return name in INSECURE_HOSTS


def tls_flags(ref: str) -> tuple[str, ...]:
    return ("--tls-verify=false",) if insecure(ref) else ()
