"""Base images made offline: the `local` site's Debian base from mmdebstrap, imported into podman or docker."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from generator.files import machine_lock, one_at_a_time
from generator.model.site import Site
from generator.images.builders import exists_argv
from generator.images.process import ToolMissing, need, stderr_progress, stream, succeeds


DEBIAN_SUITES = {"11": "bullseye", "12": "bookworm", "13": "trixie"}


BASE_PACKAGES = ("python3", "ca-certificates", "passwd")


def ensure_base_image(site: Site, *, builder: str = "podman", progress: Callable[[str], None] = stderr_progress) -> str:
    """The site's base image; `localhost/` ones are made offline when missing: mmdebstrap minbase
    of the site's Debian release with python3, ca-certificates and passwd, then `podman import`
    (or `docker import`). Returns the devel base image name."""
    store = "docker" if builder == "docker" else "podman"
    for image in dict.fromkeys((site.base.devel, site.base.runtime)):
        if not image.startswith("localhost/") or succeeds(exists_argv(store, image)):
            continue
        said = f"waiting for another gen-recipe run making {image}"
        with one_at_a_time(machine_lock(f"base-{image}"), lambda said=said: progress(said)):
            if not succeeds(exists_argv(store, image)):
                _make_base(site, image, store, progress)
    return site.base.devel


def _make_base(site: Site, image: str, store: str, progress: Callable[[str], None]) -> None:
    suite = DEBIAN_SUITES.get(site.base.distro_version.split(".")[0]) if site.base.distro == "debian" else None
    if not suite:
        raise ToolMissing(f"cannot make {image} offline: only Debian base images are made here "
                          f"(site {site.name} has {site.base.distro} {site.base.distro_version})")
    need("mmdebstrap", f"make the base image {image}")
    with tempfile.TemporaryDirectory(prefix="gen-recipe-base-") as tmp:
        tar = Path(tmp) / f"{suite}.tar"
        progress(f"making {image}: mmdebstrap {suite} (offline, from the host's apt sources)")
        stream(("mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", suite, str(tar)),
                progress, f"make the base image {image}")
        stream((store, "import", "--change", 'CMD ["/bin/bash"]', str(tar), image), progress, f"import {image}")


def save_base_archives(site: Site, dest: Path, progress: Callable[[str], None] = stderr_progress) -> None:
    """For a site whose definitions start from OCI archives (images.<stack>.bootstrap = "oci-archive"): each
    base image saved from podman's store into the build context `dest`, under the name `From:` gives it."""
    need("podman", f"save the base images of site {site.name} for its definitions (bootstrap oci-archive)")
    ensure_base_image(site, builder="podman", progress=progress)
    for image in dict.fromkeys((site.base.devel, site.base.runtime)):
        stream(("podman", "save", "--quiet", "--format", "oci-archive", "-o", str(dest / site.base.source(image)), image),
               progress, f"save {image} for the definition")
