"""mpi: ping-pong/allreduce over mpirun -np 2, and the reported transport
(shared memory by default on one node, tcp with OMPI_MCA_btl=tcp,self)."""

import pytest

ARGS = ["--iters", "20", "--warmup", "2", "--sizes", "1,1k,64k,1M"]


def _check_mpi(wl, rec, world):
    wl.check(rec, "mpi", positive=("value", "wall_s"))
    assert rec["unit"] == "us" and rec["higher_is_better"] is False
    assert rec["world_size"] == world
    assert rec["library_version"].startswith("Open MPI")
    assert rec["sizes"] == [1, 1024, 65536, 1048576]
    assert set(rec["allreduce_us"]) == {"1", "1024", "65536", "1048576"}
    assert all(v > 0 for v in rec["allreduce_us"].values())
    ev = rec["evidence"]
    assert any(lib.startswith("libmpi") for lib in ev["libraries"])
    assert "pml_ob1" in ev["mca_components"] or "pml_ucx" in ev["mca_components"]


def test_mpi_single_rank(wl, need_mpirun):
    res = wl.run("mpi", *ARGS)
    assert res.rc == 0, res
    rec = res.json
    _check_mpi(wl, rec, 1)
    assert rec["latency_us"] is None and rec["bandwidth_MBps"] is None
    assert rec["metric"] == "allreduce_latency" and rec["transport"] == "self"


def test_mpi_two_ranks_shared_memory(wl, need_mpirun):
    res = wl.run("mpi", *ARGS, mpi_ranks=2)
    assert res.rc == 0, res
    assert len(res.lines) == 1  # rank 0 only
    rec = res.json
    _check_mpi(wl, rec, 2)
    assert rec["metric"] == "latency" and rec["value"] == rec["latency_us"]["1"]
    assert set(rec["latency_us"]) == {"1", "1024", "65536", "1048576"}
    assert set(rec["bandwidth_MBps"]) == {"65536", "1048576"}
    assert all(v > 0 for v in rec["bandwidth_MBps"].values())
    assert rec["transport"] == "shm", rec["evidence"]
    assert rec["evidence"]["shm_segments"] > 0 and rec["evidence"]["same_node"] is True


def test_mpi_two_ranks_forced_tcp(wl, need_mpirun):
    res = wl.run("mpi", *ARGS, mpi_ranks=2, env=wl.env(OMPI_MCA_btl="tcp,self"))
    assert res.rc == 0, res
    rec = res.json
    _check_mpi(wl, rec, 2)
    assert rec["transport"] == "tcp", rec["evidence"]
    assert rec["evidence"]["tcp_peer_connections"] > 0
    assert rec["evidence"]["env"]["OMPI_MCA_btl"] == "tcp,self"


def test_mpi_without_mpi4py_exits_77(wl, tmp_path):
    blocker = tmp_path / "mpi4py"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('mpi4py blocked for this test')\n")
    res = wl.run("mpi", "--iters", "1", env=wl.env(extra_path=[tmp_path]))
    assert res.rc == 77, res
    assert res.stderr.strip().splitlines()[-1].startswith("mpi: cannot run here:")
    assert "mpi4py" in res.stderr


@pytest.mark.parametrize("hexaddr,loop", [("0100007F:1F90", True), ("020200C0:0401", False),
                                           ("00000000000000000000000001000000:0016", True),
                                           ("0000000000000000FFFF00000100007F:0016", True)])
def test_loopback_detection(hexaddr, loop):
    from workloads.mpi import _hex_addr_is_loopback
    assert _hex_addr_is_loopback(hexaddr) is loop
