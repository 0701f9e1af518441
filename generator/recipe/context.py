"""hpccm keeps its output settings in module globals; this sets them for one rendering and
restores them afterwards, so Docker and Apptainer output can be made in one process.

hpccm building blocks read the globals when they are *constructed* (distro-specific package
names) and primitives read them when they are *rendered*: build and render a recipe inside
one `hpccm_context`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import hpccm.config
from hpccm.common import container_type, cpu_arch
from packaging.version import Version as _PkgVersion

from generator.model.site import HPCCM_DISTRO, Site

FORMATS = ("docker", "apptainer")

_SAVED = ("g_ctype", "g_linux_distro", "g_linux_version", "g_singularity_version", "g_cpu_arch",
          "g_cpu_target", "g_wd")

HPCCM_ARCH = {"x86_64": cpu_arch.X86_64, "aarch64": cpu_arch.AARCH64, "ppc64le": cpu_arch.PPC64LE}
# Apptainer 1.x continues SingularityCE/Singularity 3.x; hpccm only asks "is it >= 3.2?".
DEFAULT_APPTAINER = ("apptainer", "1.3.6")


def hpccm_distro(site: Site) -> str:
    base = site.base
    key = (base.distro, base.distro_version.split(".")[0])
    return HPCCM_DISTRO[key]     # site.py checks at load that the key is one of these


def singularity_version(site: Site) -> _PkgVersion:
    """The Singularity-equivalent version whose definition syntax the site's runtime reads."""
    rt = site.apptainer
    name, version = (rt.name, rt.version) if rt else DEFAULT_APPTAINER
    if name == "apptainer":
        return _PkgVersion("3.9")
    return _PkgVersion(site.runtime(name).version.series(2))


@contextlib.contextmanager
def hpccm_context(site: Site, fmt: str) -> Iterator[None]:
    """Set hpccm's globals for `site` and output format `fmt` ('docker' or 'apptainer')."""
    saved = {name: getattr(hpccm.config, name) for name in _SAVED}
    try:
        hpccm.config.g_ctype = container_type.DOCKER if fmt == "docker" else container_type.SINGULARITY
        hpccm.config.set_linux_distro(hpccm_distro(site))
        hpccm.config.g_cpu_arch = HPCCM_ARCH[site.host.arch]
        hpccm.config.g_cpu_target = None
        hpccm.config.g_singularity_version = singularity_version(site)
        hpccm.config.g_wd = "/var/tmp"
        yield
    finally:
        for name, value in saved.items():
            setattr(hpccm.config, name, value)
