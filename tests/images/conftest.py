"""Fixtures of the build integration tests: a throw-away registry on 127.0.0.1 and the `local`
pytorch image, built once per session (its content-hashed tag makes later builds no-ops)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "build"                       # wheels and runtime images, kept between sessions (git-ignored)
TOOLS = ("podman", "skopeo", "docker-registry", "ch-run", "mpirun", "mmdebstrap")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="session")
def tools() -> None:
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not found on PATH (needed by the build integration tests; "
                    "see scripts/debian-packages.txt)")


@pytest.fixture(scope="session")
def run_env() -> dict[str, str]:
    """The environment runs need here: ch-run wants $USER, mpirun refuses root without consent,
    the bare run's python3 is the project venv's, and a nested pytest is a session of its own (with
    pytest-xdist's worker variables, pytest-benchmark turns itself off)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}   # a nested pytest is no worker
    env.setdefault("USER", "root" if os.geteuid() == 0 else str(os.geteuid()))
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # launch scripts' kernel caches: a folder of this session's, not /tmp/gen-recipe-cache-$USER, which any earlier
    # run on this machine (or a container as another user) may own (the scripts refuse a folder not theirs)
    env["GEN_RECIPE_KERNEL_CACHE"] = tempfile.mkdtemp(prefix="gen-recipe-kernels-tests-")
    return env


@pytest.fixture(scope="session")
def registry(tools, tmp_path_factory):
    """Debian's docker-registry on a free port of 127.0.0.1 (minimal config, RUNTIMES.md §4)."""
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = root / "config.yml"
    config.write_text(f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {root / 'data'}}}\n"
                      f"  delete: {{enabled: true}}\nhttp: {{addr: 127.0.0.1:{port}}}\n")
    with open(root / "registry.log", "wb") as log:
        proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/v2/")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def local_site():
    from generator.model import site
    return site.load("local")


# The smallest image gen-recipe builds for `local`: the site's base and a command. For the tests of how an image
# travels (export, checksum, certificate, a launch script that unpacks it), where what the image holds is not
# what is tested: its build, export and unpacking take seconds where the pytorch image's take minutes.
TINY_APP = """schema = 1
name = "tiny"
description = "The site's base image and a command (gen-recipe's image delivery tests)"
base = "none"

[run]
command = ["python3", "-c", "print('tiny')"]

[workload]
command = ["python3", "-c", "import json, os; print(json.dumps({'rate': 1.0, 'rank': int(os.environ['OMPI_COMM_WORLD_RANK'])}))"]
json_key = "rate"
unit = "items/s"
better = "higher"
tolerance = 0.15
"""


@pytest.fixture(scope="session")
def tiny_app(tools, local_base_image, tmp_path_factory) -> Path:
    """An app file of the tiny image (TINY_APP); `gen-recipe build --recipe` builds it in seconds."""
    path = tmp_path_factory.mktemp("tiny") / "app.toml"
    path.write_text(TINY_APP)
    return path


@pytest.fixture(scope="session")
def local_build(tools, local_base_image, local_site):
    """The `local` pytorch image, built through build_image (a no-op when its tag exists)."""
    from generator.images import oci
    return oci.build_image(local_site, "pytorch", cache_dir=CACHE)
