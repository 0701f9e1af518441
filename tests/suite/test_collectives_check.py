"""The collectives transport check: which network NCCL/RCCL (or gloo) used, and the suite's verdict when
the container's collectives are not on the bare run's network (the GPU twin of the MPI TCP-fallback check).

The NCCL path is tested with set-up logs (tests/fixtures/nccl/, see its README); gloo with a real
two-rank run of a ddp workload."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.suite.harness import collectives_problem
from workloads import dist

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
REPO = Path(__file__).resolve().parents[2]


def _log(name: str) -> dict:
    return {"backend": "nccl", **dist.parse_nccl_log((LOGS / name).read_text())}


def test_parse_nccl_logs():
    fabric, socket, ib = _log("ofi-cxi.log"), _log("socket-fallback.log"), _log("ib.log")
    assert (fabric["network"], fabric["on_fabric"], fabric["provider"]) == ("Libfabric", True, "cxi")
    assert fabric["evidence"].endswith("NCCL INFO Using network Libfabric")
    assert (socket["network"], socket["on_fabric"], socket["provider"]) == ("Socket", False, None)
    assert (ib["network"], ib["on_fabric"]) == ("IB", True)
    silent = dist.parse_nccl_log("")
    assert silent["network"] is None and "NCCL_DEBUG=INFO" in silent["evidence"]


def test_a_forced_socket_fallback_fails_the_check():
    bare, fallback = _log("ofi-cxi.log"), _log("socket-fallback.log")
    problem = collectives_problem(bare, fallback)
    assert problem and "fell back to Socket" in problem and "Libfabric" in problem
    assert collectives_problem(bare, _log("ofi-cxi.log")) is None          # both on the fabric: passes
    assert collectives_problem(fallback, fallback) is None                  # the bare run has no fabric either
    assert "said nothing" in collectives_problem(bare, {"backend": "nccl", **dist.parse_nccl_log("")})
    assert "said nothing" in collectives_problem(bare, None)
    assert "IB" in collectives_problem(bare, _log("ib.log"))                # another network than bare metal's


def test_gloo_is_tcp_on_both_sides():
    gloo = {"backend": "gloo", "network": "tcp", "on_fabric": False, "provider": None, "evidence": "gloo"}
    assert collectives_problem(gloo, gloo) is None


def test_nccl_is_asked_to_say_which_network_unless_the_user_chose():
    env = dist.nccl_debug_env({}, 42)
    assert env["NCCL_DEBUG"] == "INFO" and "NET" in env["NCCL_DEBUG_SUBSYS"].split(",")
    assert env["NCCL_DEBUG_FILE"].endswith("workloads-nccl-42.log")
    assert dist.nccl_debug_env({"NCCL_DEBUG": "WARN"}, 42) == {}


def test_collectives_reads_the_file_nccl_wrote(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text((LOGS / "socket-fallback.log").read_text())
    got = dist.collectives_of("nccl", {"NCCL_DEBUG_FILE": str(log)})
    assert (got["backend"], got["network"], got["on_fabric"]) == ("nccl", "Socket", False)
    assert dist.collectives_of("nccl", {"NCCL_DEBUG_FILE": str(tmp_path / "absent")})["network"] is None
    assert dist.collectives_of("gloo", {"GLOO_SOCKET_IFNAME": "hsn0"})["evidence"].endswith("GLOO_SOCKET_IFNAME=hsn0)")


def test_a_ddp_run_reports_its_collectives(tmp_path):
    """Two ranks of mnist on the CPU (gloo), started as torchrun would: rank 0's record says gloo over TCP."""
    pytest.importorskip("torch")
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(29700 + os.getpid() % 200), "PYTHONPATH": str(REPO)}
        procs.append(subprocess.Popen([sys.executable, "-m", "workloads.mnist", "--mode", "ddp", "--steps", "1",
                                       "--warmup", "0", "--batch-size", "2", "--threads", "1", "--limit-samples", "8"],
                                      env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    import json
    rec = json.loads([ln for ln in outs[0][0].splitlines() if ln.startswith("{")][-1])
    assert rec["backend"] == "gloo" and rec["world_size"] == 2
    assert rec["collectives"]["network"] == "tcp" and rec["collectives"]["on_fabric"] is False
