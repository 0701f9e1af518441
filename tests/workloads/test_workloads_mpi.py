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
    # which library each rank loaded, as a full path, and how mpirun reached it (Open MPI 4: PMIx)
    assert rec["mpi_library_paths"] and all("/libmpi.so.40" in p for p in rec["mpi_library_paths"]), rec
    assert [r["mpi_library_paths"] for r in rec["evidence"]["per_rank"]] == [rec["mpi_library_paths"]] * 2
    assert rec["pmi"] == ["pmix"]
    # both ranks' measuring threads: seconds on a CPU and waiting for one (the suite's fitness check)
    assert rec["ran_s"] > 0 and rec["waited_s"] >= 0 and rec["ran_s"] <= 2 * rec["measured_s"] + 0.5


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


def test_library_paths_and_pmi_from_maps_and_environment():
    from workloads.mpi import mpi_library_paths, pmi_in_use
    files = {"/opt/cray/pe/mpich/8.1.31/ofi/gnu/9.1/lib/libmpi_gnu_91.so.12.0.0", "/usr/lib64/libmpi.so.12.1.1",
             "/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.2", "/x/lib/libmpi_abi.so.1", "/usr/lib/libmpifort.so.12",
             "/usr/lib/x86_64-linux-gnu/libfabric.so.1", "/x/libmpi.so.40.30.2", "/x/libmpi.so",
             "/usr/lib/libmpi_cxx.so.40", "/usr/lib/libmpi_mpifh.so.40"}
    assert mpi_library_paths(files) == ["/opt/cray/pe/mpich/8.1.31/ofi/gnu/9.1/lib/libmpi_gnu_91.so.12.0.0",
                                        "/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.2", "/usr/lib64/libmpi.so.12.1.1",
                                        "/x/lib/libmpi_abi.so.1", "/x/libmpi.so", "/x/libmpi.so.40.30.2"]
    assert pmi_in_use({"PMIX_RANK": "0", "PMI_FD": "3"}) == "pmix"
    assert pmi_in_use({"PMI_FD": "9", "PMI_RANK": "0"}) == "pmi-fd"
    assert pmi_in_use({"PMI_PORT": "n1:4000"}) == "pmi-port"
    assert pmi_in_use({}) == "none"
