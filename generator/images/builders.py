"""Image builders: which one is installed, and the argv each takes (pure)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from generator.errors import UsageError
from generator.images.process import ToolMissing, need, quiet, succeeds
from generator.images.tags import tls_flags


OCI_BUILDERS = ("docker", "podman", "buildah", "ch-image")     # tried in this order


SIF_BUILDERS = ("apptainer", "singularity")


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    ref: str             # the pushed reference when pushed, else the local tag (a SIF path for apptainer)
    digest: str          # sha256:... (registry manifest digest when pushed)
    size_bytes: int
    seconds: float
    cached: bool         # the tag existed: nothing was built


# The site's host.arch → the OCI platform its images are built for (and the machine names Linux reports).
PLATFORM = {"x86_64": "linux/amd64", "aarch64": "linux/arm64", "ppc64le": "linux/ppc64le"}


def build_argv(builder: str, context: Path, tag: str, *, target: str | None = None, secret: str | None = None,
               cache_from: str | None = None, cache_to: str | None = None,
               platform: str | None = None) -> tuple[str, ...]:
    """The builder's command line; `platform` (e.g. linux/arm64) only for a build for another
    architecture than the machine's (natively each builder builds for its own)."""
    df = str(context / "Dockerfile")
    tgt = ("--target", target) if target else ()
    sec = ("--secret", f"id=ca,src={secret}") if secret else ()
    plat = ("--platform", platform) if platform else ()
    if builder in ("podman", "buildah"):
        return (builder, "build", "--layers", *plat, "-f", df, "-t", tag, *tgt, *sec, str(context))
    if builder == "docker":
        cache = (*(("--cache-from", cache_from) if cache_from else ()), *(("--cache-to", cache_to) if cache_to else ()))
        return ("docker", "buildx", "build", "--load", "--progress=plain", *plat, "-f", df, "-t", tag, *tgt, *sec,
                *cache, str(context))
    if builder == "ch-image":  # no RUN --mount secrets in ch-image: the Dockerfile must not need them
        arch = (f"--arch={platform.split('/')[1]}",) if platform else ()
        return ("ch-image", "build", *arch, "-f", df, "-t", tag, *tgt, str(context))
    raise UsageError(f"unknown builder '{builder}' (valid: {', '.join(OCI_BUILDERS)})")


def sif_build_argv(tool: str, sif: str, definition: str, *, fakeroot: bool, force: bool = False) -> tuple[str, ...]:
    """`apptainer build` (or `singularity build`) of `definition` into `sif`, run in the build context."""
    return (tool, "build", *(("--force",) if force else ()), *(("--fakeroot",) if fakeroot else ()), sif, definition)


def exists_argv(builder: str, tag: str) -> tuple[str, ...]:
    return {"docker": ("docker", "image", "inspect", tag), "ch-image": ("ch-image", "list", tag)}.get(
        builder, ("podman", "image", "exists", tag))


def push_argv(builder: str, ref: str, digestfile: Path) -> tuple[str, ...]:
    if builder in ("podman", "buildah"):
        return (builder, "push", *tls_flags(ref), "--digestfile", str(digestfile), ref, f"docker://{ref}")
    if builder == "docker":
        return ("docker", "push", ref)
    raise UsageError(f"--push needs podman, buildah or docker (not {builder})")


def inspect_argv(ref: str) -> tuple[str, ...]:
    return ("skopeo", "inspect", "--raw", *tls_flags(ref), f"docker://{ref}")


def find_builder(fmt: str = "docker", requested: str | None = None) -> str:
    """The requested builder if installed, else the first working one for the format."""
    choices = SIF_BUILDERS if fmt == "apptainer" else OCI_BUILDERS
    if requested:
        if requested not in choices:
            raise UsageError(f"builder '{requested}' cannot build the {fmt} format (use one of {', '.join(choices)})")
        need(requested, f"build the {fmt} image")
        return requested
    probes = {"docker": ("docker", "buildx", "inspect"), "podman": ("podman", "--version"),
              "buildah": ("buildah", "--version"), "ch-image": ("ch-image", "--version"),
              "apptainer": ("apptainer", "--version"), "singularity": ("singularity", "--version")}
    for name in choices:
        if shutil.which(name) and succeeds(probes[name]):
            return name
    if fmt == "apptainer":
        raise ToolMissing("cannot build the Apptainer definition here: neither apptainer nor singularity is on PATH "
                          "(they are not packaged for Debian 12); build the SIF where Apptainer is installed "
                          "(the image workflow does) or use --format docker")
    raise ToolMissing("no image builder found: install podman (or buildah, docker with buildx, charliecloud's ch-image)")


def inspect_local(builder: str, tag: str) -> tuple[int, str]:
    if builder == "docker":
        out = quiet(("docker", "image", "inspect", "--format", "{{.Size}} {{.Id}}", tag), "inspect", text=True)
    elif builder == "ch-image":
        return 0, ""
    else:
        out = quiet(("podman", "image", "inspect", "--format", "{{.Size}} {{.Digest}}", tag), "inspect", text=True)
    size, _, digest = out.stdout.strip().partition(" ")
    return int(size or 0), digest


def target_platform(arch: str, machine: str, binfmt: Path = Path("/proc/sys/fs/binfmt_misc")) -> str | None:
    """The --platform of a build of the site's images on this machine (`machine`, as platform.machine()
    says): None natively; the site's platform where a QEMU binfmt handler runs its RUN steps; otherwise
    a one-line UsageError."""
    native = {"x86_64": ("x86_64", "amd64"), "aarch64": ("aarch64", "arm64"), "ppc64le": ("ppc64le",)}
    if machine in native.get(arch, (arch,)):
        return None
    if (binfmt / f"qemu-{arch}").exists():
        return PLATFORM.get(arch, arch)     # emulated: correct, several times slower for the compiles
    raise UsageError(f"the site's images are {PLATFORM.get(arch, arch)} and this machine is {machine}: build on an "
                     f"{arch} machine, or register QEMU for {arch} (Debian: apt-get install qemu-user-static "
                     "binfmt-support) and build emulated")
