"""Pushing to a registry and reading the manifest back to verify the pushed digest."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from generator.errors import UsageError
from generator.model.site import Site
from generator.images.builders import inspect_argv, push_argv
from generator.images.process import BuildFailed, PushNotVerified, need, quiet, stream
from generator.images.tags import registry_host, retarget


def verify_push(ref: str, digest: str) -> None:
    """Read the manifest back from the registry; its sha256 must be `digest`."""
    need("skopeo", f"verify the pushed digest of {ref}")
    proc = subprocess.run(inspect_argv(ref), capture_output=True)
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise PushNotVerified(f"pushed {ref} but could not read it back to verify {digest}: "
                              + (last[-1][:300] if last else f"skopeo exited {proc.returncode}"))
    served = "sha256:" + hashlib.sha256(proc.stdout).hexdigest()
    if served != digest:
        raise PushNotVerified(f"pushed {ref} as {digest}, but the registry serves manifest {served}: "
                              "the push was not stored as sent (another push to the same tag, or a proxy rewriting it)")


def push(builder: str, local: str, remote: str, progress: Callable[[str], None]) -> str:
    if remote != local:
        quiet(("docker" if builder == "docker" else "podman", "tag", local, remote), f"tag {remote}")
    with tempfile.TemporaryDirectory(prefix="gen-recipe-push-") as tmp:
        digestfile = Path(tmp) / "digest"
        stream(push_argv(builder, remote, digestfile), progress, f"push {remote}")
        if builder == "docker":
            out = quiet(("docker", "image", "inspect", "--format", "{{json .RepoDigests}}", remote), "inspect", text=True)
            repo = remote.rsplit(":", 1)[0]
            digests = [d.split("@", 1)[1] for d in json.loads(out.stdout) if d.startswith(repo + "@")]
            if not digests:
                raise BuildFailed(f"docker push {remote} reported no digest")
            return digests[0]
        return digestfile.read_text().strip()


def push_target(site: Site, local: str, push: bool | str | None, registry: str | None) -> str | None:
    if not push:
        return None
    dest = push if isinstance(push, str) else registry
    if dest:
        return retarget(local, dest)
    if registry_host(local) in ("localhost", "docker.io"):
        raise UsageError(f"--push needs --registry HOST[/PATH] (the tag {local} names no registry to push to)")
    return local
