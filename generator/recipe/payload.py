"""The payload the images carry: the `workloads` package (`python -m workloads.<name>`), found here only.

Images copy it to /opt/workloads; bare runs put a directory that holds it on PYTHONPATH. That directory
is not the package's own parent: installed from a wheel, the parent is a site-packages whose other
packages would shadow the bare twin's (its torch, its numpy).
"""

from __future__ import annotations

import os
from pathlib import Path

import workloads
from generator.errors import UsageError, shown


def workloads_dir() -> Path:
    """The `workloads` package directory (in a checkout: ./workloads)."""
    return Path(workloads.__file__).resolve().parent


def pythonpath(cache_dir: Path = Path("build")) -> Path:
    """A directory holding only `workloads` (a link to the package), made once under `cache_dir`. Refuses
    (UsageError, before any change) a linked `cache_dir` or payload folder and anything but its own link at
    `workloads`: the folder is the tool's, and a planted link must not move where the bare runs read from."""
    root = (cache_dir / "payload").absolute()
    link, target = root / "workloads", workloads_dir()
    fix = "remove it, or give --workloads-dir"
    for folder in (cache_dir.absolute(), root):
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise UsageError(f"{shown(str(folder))}: not a folder of its own (a link or a file): {fix}")
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return root
    if link.exists() and not link.is_symlink():
        raise UsageError(f"{shown(str(link))}: not the link to the workloads package this tool makes: {fix}")
    tmp = root / f".workloads.{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target, target_is_directory=True)
        os.replace(tmp, link)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot make {shown(str(link))} for the bare run: {exc.strerror} ({fix})") from None
    return root
