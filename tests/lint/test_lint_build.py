"""A fixed Dockerfile still builds: the smelly local-site file (a few apt packages and one small
pinned pip package on the local base image) after `gen-recipe lint --unsafe-fixes`, built with podman.
Slow (~1 minute: apt-get and pip inside the build)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from generator.cli import main as cli

from .helpers import FIXTURES

CA = "/etc/ssl/certs/ca-certificates.crt"


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman not found on PATH (needed to build the fixed "
                                                              "Dockerfile)")
def test_fixed_dockerfile_builds_and_runs_as_non_root(tmp_path, capsys, local_base_image):
    text = (FIXTURES / "build" / "local.Dockerfile").read_text(encoding="utf-8")
    path = tmp_path / "Dockerfile"
    path.write_text(text.replace("FROM localhost/debian:bookworm", f"FROM {local_base_image}"), encoding="utf-8")
    rc = cli.main(["lint", "--unsafe-fixes", "--no-backup", "--format", "json", str(path)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and [f["rule"] for f in doc["findings"]] == ["DL3008"]      # unpinned apt: no fix at all
    assert sorted(f["rule"] for f in doc["fixed"] if f["unsafe"]) == ["DL3015", "GR003"]
    tag = f"localhost/gen-recipe-lint-test:{os.getpid()}"
    secret = ["--secret", f"id=ca,src={CA}"] if os.path.exists(CA) else []
    try:
        build = subprocess.run(["podman", "build", "-q", *secret, "-t", tag, "-f", str(path), str(tmp_path)],
                               capture_output=True, text=True, timeout=900)
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
        run = subprocess.run(["podman", "run", "--rm", tag, "sh", "-c",
                              "id -u; python3 -c 'import six, tqdm; print(tqdm.__version__)'; ls /var/lib/apt/lists"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["10001", "4.66.5"]     # non-root, pinned package, no apt lists
    finally:
        subprocess.run(["podman", "rmi", "-f", tag], capture_output=True, timeout=120)
