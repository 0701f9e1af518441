"""`gen-recipe build --export PATH`: the image as one file, for sites whose compute nodes cannot pull
(air-gapped: build where there is internet, copy the file and its checksum in).

The file is what the site's runtime consumes: a gzipped tarball of the image's root for Charliecloud
(`ch-convert -i tar -o dir FILE.tar.gz DIR`, then `ch-run DIR`), a SIF for Apptainer and Singularity. Beside it,
`PATH.sha256` in sha256sum's format; the launch scripts of sites with `container.image_from = "file"`
check it before the job starts.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from generator.recipe import catalog
from generator.errors import UsageError, shown
from generator.files import replaceable, write_atomic
from generator.model.schema import KINDS
from generator.run.runtimes import PLATFORMS
from generator.model.site import Site
from generator.images.convert import charliecloud_dir, unpacked
from generator.images.oci import build_image
from generator.images.process import need, quiet, stderr_progress
from generator.images.sif import build_sif, file_sha256

# The runtime's image kind → the file suffix an export has (what `ch-convert`/`apptainer` recognise).
SUFFIX = {"directory": ".tar.gz", "sif": ".sif"}


@dataclass(frozen=True)
class Exported:
    path: Path
    sha256: str
    size_bytes: int


def export_suffix(site: Site, runtime: str | None = None) -> str:
    """The suffix of the site's exported image file; a one-line UsageError for runtimes that pull."""
    rt = site.runtime(runtime).name
    kind = PLATFORMS[rt].image
    if kind not in SUFFIX:
        raise UsageError(f"site {site.name}'s runtime {rt} pulls images from a registry: --export writes files for "
                         "charliecloud (.tar.gz) and apptainer/singularity (.sif)")
    return SUFFIX[kind]


def sha256_line(path: Path, digest: str) -> str:
    """The sidecar's text: what `sha256sum --check` reads, next to the file."""
    return f"{digest}  {path.name}\n"


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def check_targets(path: Path) -> int | None:
    """Refuse, before any byte is written, what the write path refuses at FILE and at FILE.sha256 (a link, a
    FIFO, a device, a directory, a hard-linked file); the name must be of the `word` kind. Returns the mode
    an existing FILE keeps (None: a new file)."""
    if not KINDS["word"][0].fullmatch(path.name):
        raise UsageError(f"--export {shown(path.name)}: not a file name of {KINDS['word'][1]} (e.g. --export pytorch-site.sif)")
    replaceable(sidecar(path), follow_symlinks=False, flag=None)
    return replaceable(path, follow_symlinks=False, flag=None)[1]


def place(part: Path, path: Path) -> Exported:
    """The write step: `part` (a finished image file beside `path`) becomes `path`, with `path`.sha256
    beside it; both targets are checked again first (a long build may have given time to plant a link)."""
    digest = file_sha256(part)
    keep = check_targets(path)
    os.chmod(part, 0o644 if keep is None else keep)
    os.replace(part, path)
    write_atomic(sidecar(path), sha256_line(path, digest), flag=None)
    return Exported(path, digest, path.stat().st_size)


def export_image(site: Site, recipe: str | catalog.Recipe, path: Path, *, builder: str | None = None,
                 progress: Callable[[str], None] = stderr_progress) -> Exported:
    """Build `recipe` for `site` and write it to `path` (built in a fresh folder beside it, then renamed) with
    `path`.sha256 beside it. Every refusal comes before the build."""
    recipe = catalog.load(recipe)
    suffix = export_suffix(site)
    path = Path(path).absolute()
    if not path.name.endswith(suffix):
        raise UsageError(f"--export {shown(path.name)}: site {site.name} runs {suffix} files "
                         f"(e.g. --export {recipe.name}-{site.name}{suffix})")
    check_targets(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--export {shown(path)}: cannot create its folder: {exc.strerror} (write elsewhere)") from None
    with tempfile.TemporaryDirectory(prefix=f".{path.name}.", suffix=".export", dir=path.parent) as tmp:
        part = Path(tmp) / f"part{suffix}"      # the suffix tells ch-convert the format
        if suffix == ".sif":
            build_sif(site, recipe, out=part, builder=builder, progress=progress)
        else:
            result = build_image(site, recipe, builder=builder, progress=progress)
            need("ch-convert", f"write {path.name}")
            # this very image already unpacked for ch-run (read-only there) is the same root
            cached = unpacked(site, result.ref)
            root = str(cached) if cached else charliecloud_dir(result.ref, Path(tmp) / "root", progress)
            progress(f"writing {path.name} (ch-convert)")
            quiet(("ch-convert", "-i", "dir", "-o", "tar", root, str(part)), f"ch-convert to {path.name}")
        return place(part, path)
