"""A safe `--fix` keeps the image: each Dockerfile of tests/fixtures/lint/equivalent/ (real-world-shaped steps on
the local base) is built with buildah as written and after `gen-recipe lint --fix`; both build, and the two
images hold the same files (path, type, mode, owner, size, content, link target) and the same metadata (user,
environment, working directory, entrypoint, command, labels) but for what the applied fixes name. What differs
between any two builds of one Dockerfile (apt's and dpkg's logs, ldconfig's cache: timestamps) is left out.
Needs buildah, podman (to read the images) and the network to deb.debian.org (apt, one download)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from generator.lint import DOCKER
from generator.lint.fix import fix_text

from .helpers import FIXTURES

CORPUS = sorted((FIXTURES / "equivalent").glob("*.Dockerfile"))
# what a fix names as removed or changed: rule -> path prefixes in the image, and image config keys
REMOVES = {"DL3009": ("var/lib/apt/lists/",), "DL3042": ("root/.cache/pip/",), "DL3032": ("var/cache/yum/",),
           "DL3040": ("var/cache/dnf/",)}
CHANGES = {"DL4006": ("Shell",)}
NOISE = ("var/log/", "var/cache/ldconfig/")       # differ between two builds of the same steps
CONFIG = ("User", "Env", "WorkingDir", "Entrypoint", "Cmd", "Labels", "Shell")


def _tree(tag: str) -> dict[str, tuple]:
    cid = subprocess.run(["podman", "create", tag, "true"], capture_output=True, text=True, check=True,
                         timeout=120).stdout.strip()
    try:
        with subprocess.Popen(["podman", "export", cid], stdout=subprocess.PIPE) as export:
            out = {}
            with tarfile.open(fileobj=export.stdout, mode="r|") as tar:
                for member in tar:
                    name = member.name.lstrip("./")
                    if name.startswith(NOISE):
                        continue
                    digest = hashlib.sha256(tar.extractfile(member).read()).hexdigest() if member.isfile() else ""
                    out[name] = (member.type, member.mode, member.uid, member.gid, member.size, digest, member.linkname)
        assert export.returncode == 0
        return out
    finally:
        subprocess.run(["podman", "rm", "-f", cid], capture_output=True, timeout=120)


def _config(tag: str) -> dict:
    inspected = json.loads(subprocess.run(["buildah", "inspect", "--type", "image", tag], capture_output=True,
                                          text=True, check=True, timeout=120).stdout)
    config = inspected["OCIv1"]["config"]
    docker = inspected.get("Docker", {}).get("config", {}) or {}
    return {**{k: config.get(k) for k in CONFIG if k != "Shell"}, "Shell": docker.get("Shell")}


def _build(text: str, tmp_path, tag: str) -> None:
    path = tmp_path / f"{tag.rsplit(':', 1)[-1]}.Dockerfile"
    path.write_text(text, encoding="utf-8")
    built = subprocess.run(["buildah", "build", "--layers", "--pull=never", "-q", "-t", tag, "-f", str(path),
                            str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]


@pytest.mark.skipif(not (shutil.which("buildah") and shutil.which("podman")),
                    reason="buildah and podman are needed to build and read the images")
@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_a_safe_fix_builds_the_same_image(path, tmp_path, local_base_image):
    assert local_base_image == "localhost/debian:bookworm"         # what the corpus's `debian:bookworm` finds
    text = path.read_text(encoding="utf-8")
    fixed, done = fix_text(text, DOCKER)
    rules = {f.rule for f in done}
    assert fixed != text and not any(f.unsafe for f in done) and rules <= {*REMOVES, *CHANGES, "DL3003", "DL3027",
                                                                           "GR002", "DL3014", "DL3015"}
    tags = [f"localhost/gen-recipe-lint-equivalence:{os.getpid()}-{n}" for n in ("written", "fixed")]
    try:
        for source, tag in zip((text, fixed), tags):
            _build(source, tmp_path, tag)
        before, after = (_tree(tag) for tag in tags)
        named = tuple(p for r in rules for p in REMOVES.get(r, ()))
        removed = sorted(p for p in before.keys() - after.keys() if not p.startswith(named))
        added = sorted(after.keys() - before.keys())
        changed = sorted(p for p in before.keys() & after.keys() if before[p] != after[p]
                         and not p.rstrip("/").startswith(tuple(n.rstrip("/") for n in named)))
        assert (removed, added, changed) == ([], [], []), f"fixes {sorted(rules)} changed the image's files"
        assert any(p.startswith(named) for p in before) or not named     # the fix removed something that was there
        config = [_config(tag) for tag in tags]
        allowed = {k for r in rules for k in CHANGES.get(r, ())}
        assert {k: v for k, v in config[0].items() if k not in allowed} == \
            {k: v for k, v in config[1].items() if k not in allowed}
    finally:
        subprocess.run(["podman", "rmi", "-f", *tags], capture_output=True, timeout=120)
