"""The payload the images carry: the `workloads` package (`python -m workloads.<name>`), found here only.

Images copy it to /opt/workloads; bare runs put a directory that holds it on PYTHONPATH. That directory
is not the package's own parent: installed from a wheel, the parent is a site-packages whose other
packages would shadow the bare twin's (its torch, its numpy).
"""

from __future__ import annotations

import os
from pathlib import Path

import workloads


def workloads_dir() -> Path:
    """The `workloads` package directory (in a checkout: ./workloads)."""
    return Path(workloads.__file__).resolve().parent


def pythonpath(cache_dir: Path = Path("build")) -> Path:
    """A directory holding only `workloads` (a link to the package), made once under `cache_dir`."""
    root = (cache_dir / "payload").absolute()
    link, target = root / "workloads", workloads_dir()
    if not (link.is_symlink() and Path(os.readlink(link)) == target):
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".workloads.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target, target_is_directory=True)
        os.replace(tmp, link)
    return root
