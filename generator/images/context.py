"""The build context: the recipe text, the workloads payload, the site's wheel and the CA bundle."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from generator.errors import UsageError, shown
from generator.files import inside, one_at_a_time, read_text, write_set
from generator.recipe import catalog, render
from generator.model.app import IGNORED
from generator.recipe.payload import workloads_dir
from generator.model.site import Site
from generator.images.base import save_base_archives
from generator.images.process import BuildFailed, ToolMissing, stream


CACHE_DIR = Path("build")                       # contexts, wheels, runtime images


CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def ca_bundle() -> str:
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      os.environ.get("REQUESTS_CA_BUNDLE"), *CA_BUNDLES):
        if candidate and Path(candidate).is_file():
            return candidate
    raise ToolMissing("no host CA bundle found for the pip certificate secret (set SSL_CERT_FILE)")


def wheel_argv(wheel: str, dest: Path) -> tuple[str, ...]:
    """`pip download` of exactly the wheel the site names (its tags from the file name)."""
    name, version, py, abi, plat = Path(wheel).name.removesuffix(".whl").split("-")[:5]
    return (sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
            "--python-version", py.removeprefix("cp"), "--implementation", "cp", "--abi", abi, "--platform", plat,
            f"{name}=={version}", "-d", str(dest))


def fetch_wheel(site: Site, cache_dir: Path, progress: Callable[[str], None]) -> Path:
    """The site's wheel in `cache_dir/wheels`, downloaded once with pip (which uses its find-links)."""
    wheel = Path(site.software.torch_wheel).name
    path = cache_dir / "wheels" / wheel
    if path.is_file():
        return path
    with one_at_a_time(path.parent / ".lock",        # a concurrent build may be fetching it: wait, look again
                       lambda: progress(f"waiting for another gen-recipe run fetching {wheel}")):
        if not path.is_file():
            with tempfile.TemporaryDirectory(prefix=".download-", dir=path.parent) as tmp:   # never a partial wheel
                stream(wheel_argv(wheel, Path(tmp)), progress, f"download {wheel}")
                if not (Path(tmp) / wheel).is_file():
                    raise BuildFailed(f"pip download did not produce {wheel} (site.software.torch_wheel); "
                                      "point pip at an index or find-links that has it")
                os.replace(Path(tmp) / wheel, path)
    return path


def prepare_context(site: Site, recipe: str | catalog.Recipe, fmt: str, dest: Path, cache_dir: Path,
                    progress: Callable[[str], None]) -> str:
    """Fill `dest` with the recipe text and what it needs; returns the text."""
    r = catalog.load(recipe)
    text = render.recipe_text(site, r, fmt)
    (dest / ("Dockerfile" if fmt == "docker" else f"{r.name}.def")).write_text(text, encoding="utf-8")
    if fmt == "apptainer" and site.base.bootstrap == "oci-archive":
        save_base_archives(site, dest, progress)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", *IGNORED)
    if r.payload:
        shutil.copytree(workloads_dir(), dest / "workloads", ignore=ignore)
    for rel in r.context:
        local, target = r.folder / rel, dest / "app" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if local.is_dir():
            shutil.copytree(local, target, ignore=ignore)
        else:
            shutil.copy2(local, target)
    wheel = render.site_wheel(site, r)
    if wheel:
        src = fetch_wheel(site, cache_dir, progress)
        target = dest / wheel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, target)
        except OSError:
            shutil.copy2(src, target)
    return text


CONTEXT_MARK = ".gen-recipe-context"           # in a --context folder: the files the last write put there


def write_context(site: Site, recipe: str | catalog.Recipe, fmt: str, folder: Path, cache_dir: Path,
                  progress: Callable[[str], None]) -> tuple[str, ...]:
    """Write the build context (`prepare_context`) into `folder` as one set through the write path, for a
    build that runs there; a folder an earlier call wrote loses the files that this context no longer has.
    Refuses, before writing anything, a folder that is a link, that holds anything else, or whose list of
    earlier files names a path outside it. Returns the files, relative to `folder`."""
    where = f"--context {shown(folder)}"
    mark = folder / CONTEXT_MARK
    try:
        if folder.is_symlink():
            raise UsageError(f"{where}: is a symbolic link; name the folder itself")
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{where}: exists and is not a folder; name a new or empty folder")
        if folder.is_dir() and any(folder.iterdir()) and not mark.is_file():
            raise UsageError(f"{where}: the folder holds files gen-recipe did not write there; name a new or empty "
                             "folder")
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror}; name a folder you can write") from None
    before = read_text(mark, "context list").splitlines() if mark.is_file() else []
    for rel in before:
        if not rel or "\0" in rel:
            raise UsageError(f"{shown(mark)}: not a list gen-recipe wrote (an empty line or a NUL byte); remove the "
                             "folder or name another")
        inside(folder, rel, "file of the list")
    with tempfile.TemporaryDirectory(prefix="gen-recipe-context-") as tmp:
        prepare_context(site, recipe, fmt, Path(tmp), cache_dir, progress)
        rels = tuple(sorted(p.relative_to(tmp).as_posix() for p in Path(tmp).rglob("*") if p.is_file()))
        files: dict[Path, str | bytes] = {folder / rel: (Path(tmp) / rel).read_bytes() for rel in rels}
    files[mark] = "".join(f"{rel}\n" for rel in rels)
    write_set(files, root=folder, flag=None)
    for rel in sorted(set(before) - set(rels)):              # left from an earlier context of another recipe
        stale = inside(folder, rel, "file of the list")
        if stale.is_file() and not stale.is_symlink():
            stale.unlink()
        for parent in stale.parents:                         # and the folders that held only such files
            if parent == folder or not parent.is_dir() or parent.is_symlink() or any(parent.iterdir()):
                break
            parent.rmdir()
    return rels
