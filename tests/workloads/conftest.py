"""Fixtures for the workloads tests: run `python -m workloads.<name>` in a subprocess with
PYTHONPATH pointing at a directory that holds only the workloads package (generator.recipe.payload)."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from generator.recipe import payload

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = payload.pythonpath()
STUBS = Path(__file__).resolve().parent / "stubs"
MPIRUN = shutil.which("mpirun")

REQUIRED = {
    "workload": str, "schema": int, "metric": str, "unit": str, "higher_is_better": bool,
    "steps": int, "device": str, "world_size": int, "rank": int, "python": str, "seed": int,
    "wall_s": float, "startup_s": float,
}
NULLABLE = {"value": float, "time_per_step_s": float, "batch_size": int, "torch": str}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workload_env(extra_path=(), **overrides):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, extra_path), str(PAYLOAD)])
    env["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"
    env["MASTER_PORT"] = str(free_port())
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "SLURM_PROCID", "SLURM_NTASKS",
              "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
              "OMPI_MCA_btl"):
        env.pop(k, None)
    env.update(overrides)
    return env


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        self.lines = lines
        self.json = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None

    def __repr__(self):
        return f"<rc={self.rc} stdout={self.stdout[-2000:]!r} stderr={self.stderr[-3000:]!r}>"


def command(name, *args, mpi_ranks=None):
    cmd = [sys.executable, "-m", f"workloads.{name}", *map(str, args)]
    if mpi_ranks:
        cmd = [MPIRUN, "-np", str(mpi_ranks), "--allow-run-as-root", "--oversubscribe", *cmd]
    return cmd


def run_workload(name, *args, env=None, timeout=240, mpi_ranks=None):
    proc = subprocess.run(command(name, *args, mpi_ranks=mpi_ranks), capture_output=True,
                          text=True, env=env or workload_env(), timeout=timeout, cwd=REPO)
    return Result(proc)


def check_schema(record, workload, *, positive=("value", "wall_s", "startup_s")):
    assert record["workload"] == workload
    assert record["schema"] == 1
    for key, typ in REQUIRED.items():
        assert key in record, key
        value = record[key]
        assert isinstance(value, typ) or (typ is float and isinstance(value, int)), (key, value)
    for key, typ in NULLABLE.items():
        assert key in record, key
        value = record[key]
        assert value is None or isinstance(value, typ) or (typ is float and isinstance(value, int)), \
            (key, value)
    for key in positive:
        assert record[key] is not None and record[key] > 0, (key, record[key])
    assert record["wall_s"] >= record["startup_s"]
    assert record["rank"] == 0


@pytest.fixture
def wl():
    """Namespace of helpers, so tests need no import of this conftest."""
    class WL:
        pass
    h = WL()
    h.run = run_workload
    h.env = workload_env
    h.check = check_schema
    h.command = command
    h.stubs = STUBS
    h.repo = REPO
    h.free_port = free_port
    return h


@pytest.fixture
def need_mpirun():
    if MPIRUN is None:
        pytest.skip("mpirun not on PATH")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py not importable")
