"""The two-node Slurm cluster of these tests: up once per session under build/minicluster-tests/
(its own ports, apart from a cluster a user runs under build/minicluster/), down at the end."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from generator.dev import minicluster

REPO = Path(__file__).resolve().parents[2]
STATE = REPO / "build" / "minicluster-tests"


def missing() -> str | None:
    """Why the cluster cannot run here, or None."""
    tools = [t for t in minicluster.TOOLS + ("sbatch", "srun", "scancel", "squeue")
             if not shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
    if tools:
        return f"{', '.join(tools)} not found (apt-get install {minicluster.PACKAGES}; see scripts/debian-packages.txt)"
    if os.geteuid() != 0:
        return "slurmd needs root to start job steps"
    return None


@pytest.fixture(scope="session")
def cluster() -> minicluster.Status:
    why = missing()
    if why:
        pytest.skip(why)
    try:
        yield minicluster.up(STATE)
    finally:
        minicluster.down(STATE)


@pytest.fixture(scope="session")
def slurm_env(cluster) -> dict[str, str]:
    """For sbatch/srun: SLURM_CONF of the test cluster, the venv's python3 first on PATH (torch, mpi4py)."""
    env = minicluster.slurm_env(cluster.root)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.setdefault("USER", "root" if os.geteuid() == 0 else str(os.geteuid()))
    return env


@pytest.fixture(scope="session")
def workloads_dir() -> Path:
    """The directory holding the workloads package (what a bare script puts on PYTHONPATH)."""
    return next(d for d in (REPO, REPO / "recipes") if (d / "workloads" / "__init__.py").is_file())


@pytest.fixture(scope="session")
def charliecloud_image() -> str:
    """The pytorch image of `local` (what `local-slurm` runs: the same machine, the same stack; the
    other tests build it too) as a Charliecloud directory: built with podman (a no-op when its
    content-hashed tag exists; about 5 minutes the first time), unpacked once into build/images/."""
    tools = [t for t in ("podman", "ch-run", "mmdebstrap") if not shutil.which(t)]
    if tools:
        pytest.skip(f"{', '.join(tools)} not found (needed to build and run the local-slurm image)")
    from generator.model import site
    from generator.images import convert, oci
    s = site.load("local")
    built = oci.build_image(s, "pytorch", cache_dir=REPO / "build")
    return convert.runtime_image(s, built.ref, "charliecloud", cache_dir=REPO / "build" / "images")
