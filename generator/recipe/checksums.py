"""The sha256 of every source tarball and key the generator downloads (generator/checksums.toml).

    sha256("ucx", "1.15.0") -> "4b20...": the checksum a generated RUN/%post checks with
    `echo "<sha256>  <file>" | sha256sum -c -`. A missing entry is a one-line ChecksumError.

The blocks write each download with its check (generator/recipe/blocks/verify.py), from `for_url`, or
with the reason `unpublished` gives for having none.
"""

from __future__ import annotations

import functools
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:                     # Python 3.10
    import tomli as tomllib

from generator.errors import RecipeError

TABLE = Path(__file__).resolve().parents[1] / "checksums.toml"   # generator/checksums.toml (data; generated comments name it)


class ChecksumError(RecipeError):
    """A download the generator makes has no recorded checksum (a RecipeError: the site file is named with it)."""


@functools.cache
def _document() -> dict:
    return tomllib.loads(TABLE.read_text(encoding="utf-8"))


def table() -> dict[str, dict[str, dict[str, str]]]:
    """package → version → {"sha256", "url", "source"}."""
    return {k: v for k, v in _document().items() if k != "unpublished"}


def unpublished(url: str) -> str | None:
    """Why `url` has no checksum to record (its upstream publishes none), or None."""
    return next((why for prefix, why in _document().get("unpublished", {}).items() if url.startswith(prefix)), None)


def sha256(package: str, version: str) -> str:
    entry = table().get(package, {}).get(str(version))
    if entry is None:
        known = ", ".join(sorted(table().get(package, {}))) or "none"
        raise ChecksumError(f"{TABLE.name}: no sha256 for {package} {version} (recorded versions: {known}); "
                            f"add it with its source")
    return entry["sha256"]


def for_url(url: str) -> str | None:
    """The sha256 recorded for a download URL, or None."""
    return next((e["sha256"] for versions in table().values() for e in versions.values() if e.get("url") == url),
                None)
