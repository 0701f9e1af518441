"""Build a recipe's image for a site, tag it by content, push it and verify the pushed digest.

    gen-recipe build --site SITE --recipe NAME [--format docker|apptainer] [--tag REF] [--target STAGE]
                     [--push] [--registry HOST[/PATH]] [--builder podman|buildah|docker|ch-image|apptainer]

The tag is `<registry>/<recipe>-<site>:<version>-<12 hex>`, the hex a hash of the Dockerfile
text and of what gen-recipe puts in the build context, so an unchanged rebuild finds the tag and
does nothing. The builder's output streams to stderr, prefixed; one summary line goes to stdout.
`--push` pushes, then reads the manifest back with `skopeo inspect --raw` and checks that its
sha256 is the pushed digest. Credentials come from the environment or the builder's own login
(`podman login`, `docker login`): nothing here writes them anywhere.

For the benchmark suite: `build_image()` → `BuildResult`, `runtime_image()` (a built image as
Charliecloud or udocker need it), `ensure_base_image()` (the `local` site's offline base).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import __version__, catalog, recipes as _recipes, render, site as site_mod
from .errors import GenRecipeError, UsageError
from .site import Site

DEFAULT_REGISTRY = "localhost/gen-recipe"
CACHE_DIR = Path("build")                       # contexts, wheels, runtime images
OCI_BUILDERS = ("docker", "podman", "buildah", "ch-image")     # tried in this order
SIF_BUILDERS = ("apptainer", "singularity")
# Registries served over plain HTTP on this machine (RUNTIMES.md §4).
INSECURE_HOSTS = ("localhost", "127.0.0.1", "[::1]")
DEBIAN_SUITES = {"11": "bullseye", "12": "bookworm", "13": "trixie"}
BASE_PACKAGES = ("python3", "ca-certificates", "passwd")
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


class BuildFailed(GenRecipeError):
    """A builder, push or conversion step failed."""

    exit_code = 1


class PushNotVerified(GenRecipeError):
    """The registry does not serve what was pushed."""

    exit_code = 1


class ToolMissing(GenRecipeError):
    """A needed program is not installed here."""

    exit_code = 2


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    ref: str             # the pushed reference when pushed, else the local tag (a SIF path for apptainer)
    digest: str          # sha256:... (registry manifest digest when pushed)
    size_bytes: int
    seconds: float
    cached: bool         # the tag existed: nothing was built


def stderr_progress(line: str) -> None:
    print(f"  | {line}", file=sys.stderr, flush=True)


# -- deterministic tags -------------------------------------------------------------------------

def workloads_dir() -> Path:
    return Path(_recipes.__file__).parent / "workloads"


def context_manifest(site: Site) -> list[tuple[str, str]]:
    """(path in the build context, content id) for what gen-recipe puts there: each workloads file
    by its sha256, the site's wheel by its file name (PyPI never reuses a file name, and the tag
    can then be computed where the 190 MB wheel is not downloaded)."""
    root = workloads_dir()
    items = [(f"workloads/{f.relative_to(root).as_posix()}", hashlib.sha256(f.read_bytes()).hexdigest())
             for f in sorted(root.rglob("*")) if _wanted(f, root)]
    if site.software.torch_wheel:
        items.append((site.software.torch_wheel, "file:" + Path(site.software.torch_wheel).name))
    return items


def _wanted(path: Path, root: Path) -> bool:
    rel = path.relative_to(root)
    return path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", ".pyo")


def content_hash(text: str, site: Site) -> str:
    h = hashlib.sha256(b"gen-recipe build context 1\0" + text.encode())
    for path, content in context_manifest(site):
        h.update(f"\0{path}\0{content}".encode())
    return h.hexdigest()[:12]


def default_ref(site: Site, recipe: str, *, registry: str = DEFAULT_REGISTRY, target: str | None = None,
                fmt: str = "docker") -> str:
    """The tag `gen-recipe build` gives (or pushes as, with --registry)."""
    text = render.render(site, recipe, fmt)
    tag = f"{__version__}-{content_hash(text, site)}" + (f"-{target}" if target else "") \
        + ("-sif" if fmt == "apptainer" else "")
    return f"{registry.rstrip('/')}/{recipe}-{site.name}:{tag}"


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


# -- argv builders (pure) ---------------------------------------------------------------------------

def build_argv(builder: str, context: Path, tag: str, *, target: str | None = None, secret: str | None = None,
               cache_from: str | None = None, cache_to: str | None = None) -> tuple[str, ...]:
    df = str(context / "Dockerfile")
    tgt = ("--target", target) if target else ()
    sec = ("--secret", f"id=ca,src={secret}") if secret else ()
    if builder in ("podman", "buildah"):
        return (builder, "build", "--layers", "-f", df, "-t", tag, *tgt, *sec, str(context))
    if builder == "docker":
        cache = (*(("--cache-from", cache_from) if cache_from else ()), *(("--cache-to", cache_to) if cache_to else ()))
        return ("docker", "buildx", "build", "--load", "--progress=plain", "-f", df, "-t", tag, *tgt, *sec, *cache,
                str(context))
    if builder == "ch-image":  # no RUN --mount secrets in ch-image: the Dockerfile must not need them
        return ("ch-image", "build", "-f", df, "-t", tag, *tgt, str(context))
    raise UsageError(f"unknown builder '{builder}' (valid: {', '.join(OCI_BUILDERS)})")


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


# -- running things -----------------------------------------------------------------------------------

def _need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise ToolMissing(f"{tool} not found on PATH (needed to {why})")
    return path


def _stream(argv: Sequence[str], progress: Callable[[str], None], what: str, *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None) -> None:
    """Run argv, passing each output line to `progress`; BuildFailed names the last line."""
    last = ""
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", cwd=cwd, env=None if env is None else dict(env), bufsize=1)
    except FileNotFoundError:
        raise ToolMissing(f"{argv[0]} not found on PATH (needed to {what})") from None
    assert proc.stdout is not None
    for raw in proc.stdout:
        text = raw.rstrip("\n")
        progress(text)
        last = text.strip() or last
    rc = proc.wait()
    if rc != 0:
        raise BuildFailed(f"{what} failed: {argv[0]} exited {rc}" + (f" ({last[:300]})" if last else ""))


def _quiet(argv: Sequence[str], what: str, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(list(argv), capture_output=True, **kw)
    except FileNotFoundError:
        raise ToolMissing(f"{argv[0]} not found on PATH (needed to {what})") from None
    if proc.returncode != 0:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode(errors="replace")
        last = [ln for ln in err.strip().splitlines() if ln.strip()]
        raise BuildFailed(f"{what} failed: {argv[0]} exited {proc.returncode}" + (f" ({last[-1][:300]})" if last else ""))
    return proc


def _ok(argv: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=60).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False


def find_builder(fmt: str = "docker", requested: str | None = None) -> str:
    """The requested builder if installed, else the first working one for the format."""
    choices = SIF_BUILDERS if fmt == "apptainer" else OCI_BUILDERS
    if requested:
        if requested not in choices:
            raise UsageError(f"builder '{requested}' cannot build the {fmt} format (use one of {', '.join(choices)})")
        _need(requested, f"build the {fmt} image")
        return requested
    probes = {"docker": ("docker", "buildx", "inspect"), "podman": ("podman", "--version"),
              "buildah": ("buildah", "--version"), "ch-image": ("ch-image", "--version"),
              "apptainer": ("apptainer", "--version"), "singularity": ("singularity", "--version")}
    for name in choices:
        if shutil.which(name) and _ok(probes[name]):
            return name
    if fmt == "apptainer":
        raise ToolMissing("cannot build the Apptainer definition here: neither apptainer nor singularity is on PATH "
                          "(they are not packaged for Debian 12); build the SIF where Apptainer is installed "
                          "(the image workflow does) or use --format docker")
    raise ToolMissing("no image builder found: install podman (or buildah, docker with buildx, charliecloud's ch-image)")


# -- build context ---------------------------------------------------------------------------------------

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
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        _stream(wheel_argv(wheel, path.parent), progress, f"download {wheel}")
        if not path.is_file():
            raise BuildFailed(f"pip download did not produce {wheel} (site.software.torch_wheel); "
                              "point pip at an index or find-links that has it")
    return path


def prepare_context(site: Site, recipe: str, fmt: str, dest: Path, cache_dir: Path,
                    progress: Callable[[str], None]) -> str:
    """Fill `dest` with the recipe text and what it needs; returns the text."""
    text = render.render(site, recipe, fmt)
    (dest / ("Dockerfile" if fmt == "docker" else f"{recipe}.def")).write_text(text, encoding="utf-8")
    root = workloads_dir()
    shutil.copytree(root, dest / "workloads", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    if site.software.torch_wheel:
        src = fetch_wheel(site, cache_dir, progress)
        target = dest / site.software.torch_wheel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, target)
        except OSError:
            shutil.copy2(src, target)
    return text


# -- base image of the local site ---------------------------------------------------------------------

def ensure_base_image(site: Site, *, builder: str = "podman", progress: Callable[[str], None] = stderr_progress) -> str:
    """The site's base image; `localhost/` ones are made offline when missing: mmdebstrap minbase
    of the site's Debian release with python3, ca-certificates and passwd, then `podman import`
    (or `docker import`). Returns the devel base image name."""
    store = "docker" if builder == "docker" else "podman"
    for image in dict.fromkeys((site.base.devel, site.base.runtime)):
        if not image.startswith("localhost/") or _ok(exists_argv(store, image)):
            continue
        suite = DEBIAN_SUITES.get(site.base.distro_version.split(".")[0]) if site.base.distro == "debian" else None
        if not suite:
            raise ToolMissing(f"cannot make {image} offline: only Debian base images are made here "
                              f"(site {site.name} has {site.base.distro} {site.base.distro_version})")
        _need("mmdebstrap", f"make the base image {image}")
        with tempfile.TemporaryDirectory(prefix="gen-recipe-base-") as tmp:
            tar = Path(tmp) / f"{suite}.tar"
            progress(f"making {image}: mmdebstrap {suite} (offline, from the host's apt sources)")
            _stream(("mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", suite, str(tar)),
                    progress, f"make the base image {image}")
            _stream((store, "import", "--change", 'CMD ["/bin/bash"]', str(tar), image), progress, f"import {image}")
    return site.base.devel


# -- build, push, verify -------------------------------------------------------------------------------

def verify_push(ref: str, digest: str) -> None:
    """Read the manifest back from the registry; its sha256 must be `digest`."""
    _need("skopeo", f"verify the pushed digest of {ref}")
    proc = subprocess.run(inspect_argv(ref), capture_output=True)
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise PushNotVerified(f"pushed {ref} but could not read it back to verify {digest}: "
                              + (last[-1][:300] if last else f"skopeo exited {proc.returncode}"))
    served = "sha256:" + hashlib.sha256(proc.stdout).hexdigest()
    if served != digest:
        raise PushNotVerified(f"pushed {ref} as {digest}, but the registry serves manifest {served}: "
                              "the push was not stored as sent (another push to the same tag, or a proxy rewriting it)")


def _inspect_local(builder: str, tag: str) -> tuple[int, str]:
    if builder == "docker":
        out = _quiet(("docker", "image", "inspect", "--format", "{{.Size}} {{.Id}}", tag), "inspect", text=True)
    elif builder == "ch-image":
        return 0, ""
    else:
        out = _quiet(("podman", "image", "inspect", "--format", "{{.Size}} {{.Digest}}", tag), "inspect", text=True)
    size, _, digest = out.stdout.strip().partition(" ")
    return int(size or 0), digest


def _push(builder: str, local: str, remote: str, progress: Callable[[str], None]) -> str:
    if remote != local:
        _quiet(("docker" if builder == "docker" else "podman", "tag", local, remote), f"tag {remote}")
    with tempfile.TemporaryDirectory(prefix="gen-recipe-push-") as tmp:
        digestfile = Path(tmp) / "digest"
        _stream(push_argv(builder, remote, digestfile), progress, f"push {remote}")
        if builder == "docker":
            out = _quiet(("docker", "image", "inspect", "--format", "{{json .RepoDigests}}", remote), "inspect", text=True)
            repo = remote.rsplit(":", 1)[0]
            digests = [d.split("@", 1)[1] for d in json.loads(out.stdout) if d.startswith(repo + "@")]
            if not digests:
                raise BuildFailed(f"docker push {remote} reported no digest")
            return digests[0]
        return digestfile.read_text().strip()


def _push_target(site: Site, local: str, push: bool | str | None, registry: str | None) -> str | None:
    if not push:
        return None
    dest = push if isinstance(push, str) else registry
    if dest:
        return retarget(local, dest)
    if registry_host(local) in ("localhost", "docker.io"):
        raise UsageError(f"--push needs --registry HOST[/PATH] (the tag {local} names no registry to push to)")
    return local


def build_image(site: Site, recipe: str, *, tag: str | None = None, push: bool | str | None = None,
                target: str | None = None, progress: Callable[[str], None] = stderr_progress,
                builder: str | None = None, registry: str | None = None, cache_dir: Path = CACHE_DIR,
                cache_from: str | None = None, cache_to: str | None = None) -> BuildResult:
    """Build `recipe` for `site` as an OCI image (skipped when the tag exists) and, with `push`
    (True, or the registry HOST[/PATH] as a string), push it and verify the pushed digest."""
    catalog.load(recipe)
    start = time.monotonic()
    local = tag or default_ref(site, recipe, target=target)
    remote = _push_target(site, local, push, registry)
    builder = find_builder("docker", builder)
    cached = _ok(exists_argv(builder, local))
    if cached:
        progress(f"{local} exists: nothing to build")
    else:
        ensure_base_image(site, builder=builder, progress=progress)
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="context-", dir=cache_dir) as ctx:
            prepare_context(site, recipe, "docker", Path(ctx), cache_dir, progress)
            secret = ca_bundle() if site.software.pip_cert_secret and builder != "ch-image" else None
            _stream(build_argv(builder, Path(ctx), local, target=target, secret=secret, cache_from=cache_from,
                               cache_to=cache_to), progress, f"{builder} build of {local}")
    size, digest = _inspect_local(builder, local)
    ref = local
    if remote:
        digest = _push(builder, local, remote, progress)
        verify_push(remote, digest)
        ref = remote
    return BuildResult(ref=ref, digest=digest, size_bytes=size, seconds=time.monotonic() - start, cached=cached)


def build_sif(site: Site, recipe: str, *, out: Path | None = None, push: bool | str | None = None,
              progress: Callable[[str], None] = stderr_progress, builder: str | None = None,
              registry: str | None = None, cache_dir: Path = CACHE_DIR) -> BuildResult:
    """Build the Apptainer definition into a SIF (`<recipe>-<site>.sif`); push it with ORAS."""
    catalog.load(recipe)
    start = time.monotonic()
    ref = default_ref(site, recipe, fmt="apptainer")
    remote = _push_target(site, ref, push, registry)
    tool = find_builder("apptainer", builder)
    sif = (out or Path(f"{recipe}-{site.name}.sif")).absolute()
    stamp = sif.with_name(sif.name + ".tag")
    cached = sif.is_file() and stamp.is_file() and stamp.read_text().strip() == ref
    if cached:
        progress(f"{sif} is {ref}: nothing to build")
    else:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="context-", dir=cache_dir) as ctx:
            prepare_context(site, recipe, "apptainer", Path(ctx), cache_dir, progress)
            fakeroot = ("--fakeroot",) if os.geteuid() != 0 else ()
            _stream((tool, "build", "--force", *fakeroot, str(sif), f"{recipe}.def"), progress,
                    f"{tool} build of {sif.name}", cwd=Path(ctx))
        stamp.write_text(ref + "\n")
    blob = "sha256:" + _file_sha256(sif)
    if remote:
        _stream((tool, "push", str(sif), f"oras://{remote}"), progress, f"push {remote}")
        _need("skopeo", f"verify the pushed SIF {remote}")
        raw = subprocess.run(inspect_argv(remote), capture_output=True)
        layers = [layer.get("digest") for layer in json.loads(raw.stdout or b"{}").get("layers", [])] \
            if raw.returncode == 0 else []
        if blob not in layers:
            raise PushNotVerified(f"pushed {remote} but the registry's manifest does not list the SIF {blob}")
        digest, ref = "sha256:" + hashlib.sha256(raw.stdout).hexdigest(), remote
    else:
        digest, ref = blob, str(sif)
    return BuildResult(ref=ref, digest=digest, size_bytes=sif.stat().st_size, seconds=time.monotonic() - start,
                       cached=cached)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- what a runtime needs from a built image ------------------------------------------------------------

def _safe_name(ref: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", ref.rsplit("/", 1)[-1].replace("@sha256:", "-"))


def runtime_image_name(site: Site, ref: str, runtime: str, *, cache_dir: Path = CACHE_DIR / "images") -> str:
    """What `runtime_image` returns for `ref`, without making it (pure)."""
    if runtime == "charliecloud":
        return str(cache_dir / _safe_name(ref))
    if runtime == "udocker":
        return _safe_name(ref).replace(".", "_")    # udocker refuses '.' in container names
    return ref


def udocker_env(cache_dir: Path = CACHE_DIR / "images") -> dict[str, str]:
    """The environment udocker runs need for containers made by `runtime_image` (RUNTIMES.md §6):
    its own directory under the cache and, for the P1 mode, Debian's PRoot through a wrapper without `-k`."""
    home = (cache_dir / "udocker").absolute()
    return {"UDOCKER_DIR": str(home), "UDOCKER_USE_PROOT_EXECUTABLE": str(home / "proot-nok")}


PROOT_WRAPPER = """#!/bin/bash
# udocker always passes -k <kernel release>; Debian's proot 5.1 then fails to load libraries (RUNTIMES.md §6)
args=(); while [ $# -gt 0 ]; do [ "$1" = -k ] && { shift 2; continue; }; args+=("$1"); shift; done
exec /usr/bin/proot "${args[@]}"
"""


def runtime_image(site: Site, ref: str, runtime: str, *, cache_dir: Path = CACHE_DIR / "images",
                  progress: Callable[[str], None] = stderr_progress) -> str:
    """Turn a podman image `ref` into what `runtime` runs, reusing what exists:
    charliecloud → an unpacked directory image (podman export + /ch/environment, RUNTIMES.md §5 B);
    udocker → a created container name (udocker load of an uncompressed OCI layout from podman save;
    a docker-archive loads but cannot be created from), exec mode P1; run it with `udocker_env()`;
    podman and the other OCI runtimes → `ref`."""
    name = runtime_image_name(site, ref, runtime, cache_dir=cache_dir)
    if runtime == "charliecloud":
        return _charliecloud_dir(ref, Path(name), progress)
    if runtime == "udocker":
        return _udocker_container(ref, name, cache_dir, progress)
    if runtime in SIF_BUILDERS:
        raise ToolMissing(f"{runtime} not available to convert {ref} (use build_sif, or {runtime} pull docker://...)")
    return ref


def _charliecloud_dir(ref: str, dest: Path, progress: Callable[[str], None]) -> str:
    if (dest / "ch" / "environment").is_file():
        return str(dest)
    _need("podman", f"unpack {ref} for ch-run")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        progress(f"unpacking {ref} into {dest} (podman export)")
        cid = _quiet(("podman", "create", "--read-only", ref, "/bin/true"), f"create a container of {ref}",
                     text=True).stdout.strip()
        try:
            with subprocess.Popen(("podman", "export", cid), stdout=subprocess.PIPE) as exp:
                tar = subprocess.run(("tar", "-x", "-C", str(tmp)), stdin=exp.stdout, capture_output=True)
            if exp.returncode or tar.returncode:
                raise BuildFailed(f"podman export of {ref} failed: {tar.stderr.decode(errors='replace').strip()[-300:]}")
        finally:
            subprocess.run(("podman", "rm", "-f", cid), capture_output=True)
        env = _quiet(("podman", "image", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", ref),
                     f"inspect {ref}", text=True).stdout
        (tmp / "ch").mkdir(exist_ok=True)
        (tmp / "ch" / "environment").write_text(env)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(dest)


def _udocker_container(ref: str, name: str, cache_dir: Path, progress: Callable[[str], None]) -> str:
    udocker = shutil.which("udocker") or str(Path(sys.executable).with_name("udocker"))
    if not Path(udocker).exists():
        raise ToolMissing("udocker not found (pip install udocker)")
    env = {**os.environ, **udocker_env(cache_dir)}
    home = Path(env["UDOCKER_DIR"])
    (home / "lib").mkdir(parents=True, exist_ok=True)
    (home / "lib" / "VERSION").write_text("1.2.11\n")    # use host tools, skip the udockertools download
    wrapper = home / "proot-nok"
    if not wrapper.exists():
        wrapper.write_text(PROOT_WRAPPER)
        wrapper.chmod(0o755)
    root = ("--allow-root",) if os.geteuid() == 0 else ()
    u = (udocker, *root)
    if subprocess.run((*u, "inspect", name), capture_output=True, env=env).returncode == 0:
        return name
    image = f"localhost/gen-recipe-udocker/{name.lower()}:latest"   # a tagged name: a digest ref saves without one
    _quiet(("podman", "tag", ref, image), f"tag {ref} for udocker")
    try:
        with tempfile.TemporaryDirectory(prefix="udocker-load-", dir=cache_dir) as tmp:
            layout, archive = Path(tmp) / "oci", Path(tmp) / "image.tar"
            progress(f"loading {ref} into udocker (podman save --format oci-dir --uncompressed, udocker load)")
            _quiet(("podman", "save", "--format", "oci-dir", "--uncompressed", "-o", str(layout), image),
                   f"podman save {ref}")       # uncompressed: half the time of an oci-archive (no gzip)
            _quiet(("tar", "-cf", str(archive), "-C", str(layout), "."), f"archive {ref} for udocker")
            shutil.rmtree(layout)
            _quiet((*u, "load", "-i", str(archive)), f"udocker load {ref}", env=env)
    finally:
        # name the tag to drop: a bare `podman untag IMAGE` drops every name, `ref` included
        subprocess.run(("podman", "untag", image, image), capture_output=True)
    _quiet((*u, "create", f"--name={name}", image), f"udocker create {name}", env=env)
    # P1 (PRoot, through the wrapper): R1 with the host runc runs, but udocker 1.3.17 then exits 1 even on success
    _quiet((*u, "setup", "--execmode=P1", name), f"udocker setup {name}", env=env)
    return name


# -- command line -----------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", default="local", help="site name or path to a site TOML (default: local)")
    parser.add_argument("--recipe", default="pytorch", help="recipe to build (default: pytorch)")
    parser.add_argument("--format", choices=("docker", "apptainer"), default="docker",
                        help="docker: OCI image; apptainer: SIF (default: docker)")
    parser.add_argument("--tag", default=None, help="image reference (default: content-hashed, "
                        f"{DEFAULT_REGISTRY}/<recipe>-<site>:<version>-<hash>)")
    parser.add_argument("--target", default=None, help="build only up to this stage (e.g. devel)")
    parser.add_argument("--push", action="store_true", help="push to --registry and verify the pushed digest")
    parser.add_argument("--registry", default=os.environ.get("GEN_RECIPE_REGISTRY") or None,
                        help="HOST[/PATH] to push to (default: $GEN_RECIPE_REGISTRY)")
    parser.add_argument("--builder", choices=(*OCI_BUILDERS, *SIF_BUILDERS), default=None,
                        help="builder (default: the first working of docker buildx, podman, buildah, ch-image; "
                             "apptainer/singularity for --format apptainer)")
    parser.add_argument("--cache-from", default=None, help="buildx --cache-from (e.g. type=gha)")
    parser.add_argument("--cache-to", default=None, help="buildx --cache-to (e.g. type=gha,mode=max)")
    parser.add_argument("--out", type=Path, default=None, help="SIF path for --format apptainer "
                        "(default: <recipe>-<site>.sif)")


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def run(args: argparse.Namespace) -> int:
    site = site_mod.load(args.site)
    push = (args.registry or True) if args.push else None
    if args.format == "apptainer":
        if args.tag or args.target:
            raise UsageError("--tag and --target apply to --format docker (use --out for the SIF path)")
        result = build_sif(site, args.recipe, out=args.out, push=push, builder=args.builder, registry=args.registry)
    else:
        result = build_image(site, args.recipe, tag=args.tag, push=push, target=args.target, builder=args.builder,
                             registry=args.registry, cache_from=args.cache_from, cache_to=args.cache_to)
    verb = "up to date" if result.cached else "built"
    pushed = ", pushed and verified" if args.push else ""
    print(f"{verb}{pushed}: {result.ref} {result.digest} {_size(result.size_bytes)} in {result.seconds:.1f} s")
    return 0


__all__ = ["BuildResult", "build_image", "build_sif", "default_ref", "ensure_base_image", "runtime_image",
           "runtime_image_name", "udocker_env"]
