"""Command-line contract of the workloads package: listing, bad arguments, exit codes,
imports without torch, the launcher-environment logic and the MPI transport classifier."""

import subprocess
import sys

import pytest

NAMES = ["cnn", "gan3d", "resnet", "mnist", "llm", "mpi"]


def test_package_lists_workloads(wl):
    proc = subprocess.run([sys.executable, "-m", "workloads"], capture_output=True, text=True,
                          env=wl.env(), check=True)
    lines = proc.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == NAMES
    assert all(len(line.split("\t")) == 2 and line.split("\t")[1] for line in lines)


def test_modules_import_without_torch(wl):
    code = ("import sys; sys.modules['torch'] = None\n"
            "import importlib\n"
            f"for m in {['workloads'] + ['workloads.' + n for n in NAMES + ['common', 'dist', 'train', '__main__']]}:\n"
            "    importlib.import_module(m)\n"
            "print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=wl.env())
    assert proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize("name", NAMES)
def test_help(wl, name):
    proc = subprocess.run(wl.command(name, "--help"), capture_output=True, text=True, env=wl.env())
    assert proc.returncode == 0
    for option in ("--seed", "--steps", "--warmup", "--json-out", "--threads"):
        assert option in proc.stdout
    if name != "mpi":
        assert "--serve" in proc.stdout and "--device" in proc.stdout


BAD = [
    ("cnn", ["--image-size", "100"], "multiple of 64"),
    ("cnn", ["--steps", "-3"], "--steps"),
    ("cnn", ["--mode", "horovod"], "--mode"),
    ("cnn", ["--steps", "5", "--epochs", "1"], "not both"),
    ("gan3d", ["--batch-size", "0"], "--batch-size"),
    ("mnist", ["--no-such-option"], "unrecognized"),
    ("resnet", ["--model", "vgg16"], "--model"),
    ("llm", ["--hidden-size", "64", "--heads", "5"], "multiple"),
    ("llm", ["--device", "cpu", "--gpus", "2"], "--gpus"),
    ("mpi", ["--sizes", "1,zero"], "--sizes"),
    ("mpi", ["--iters", "x"], "--iters"),
]


@pytest.mark.parametrize("name,args,needle", BAD, ids=[f"{n}-{a[0]}" for n, a, _ in BAD])
def test_bad_arguments_exit_2_with_one_line(wl, name, args, needle):
    res = wl.run(name, *args)
    assert res.rc == 2, res
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"{name}: error:") and needle in lines[0], lines[0]
    assert "Traceback" not in res.stderr


def test_forced_cuda_without_gpu_exits_77(wl):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    res = wl.run("mnist", "--device", "cuda", "--steps", "1")
    assert res.rc == 77, res
    assert res.stderr.strip().splitlines()[-1].startswith("mnist: cannot run here:")
    assert "cuda" in res.stderr and res.stdout == ""


# ------------------------------------------------------------- launcher environment

def test_dist_launcher_environments():
    from workloads import dist
    assert dist.from_env({}) is None
    info = dist.from_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    assert (info.rank, info.world_size, info.local_rank, info.launcher) == (3, 8, 1, "torchrun")
    info = dist.from_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1"})
    assert (info.rank, info.world_size, info.local_rank, info.launcher) == (5, 16, 1, "slurm")
    info = dist.from_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "16",  # mpirun inside sbatch
                          "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "0"})
    assert (info.rank, info.world_size, info.launcher) == (2, 4, "openmpi")
    info = dist.from_env({"PMI_RANK": "7", "PMI_SIZE": "8", "MPI_LOCALRANKID": "3"})
    assert (info.rank, info.world_size, info.local_rank, info.launcher) == (7, 8, 3, "pmi")
    info = dist.from_env({"PMI_RANK": "7", "PMI_SIZE": "8", "PALS_LOCAL_RANKID": "2"})
    assert info.local_rank == 2
    info = dist.from_env({"PMI_RANK": "7", "PMI_SIZE": "8"})
    assert info.local_rank == 7


def test_dist_master_address():
    from workloads import dist
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "node7", "MASTER_PORT": "1234"}
    info = dist.detect(env)
    assert (info.master_addr, info.master_port) == ("node7", 1234)
    info = dist.detect({"RANK": "0", "WORLD_SIZE": "1"})
    assert (info.master_addr, info.master_port) == ("127.0.0.1", 29500)
    assert dist.first_slurm_host("nid[001-004,007],login1") == "nid001"
    assert dist.first_slurm_host("gpu12") == "gpu12"


# ------------------------------------------------------------- MPI transport classifier

def _ev(**kw):
    ev = {"libraries": [], "mca_components": [], "fabric_provider_libs": [], "shm_segments": 0,
          "shm_segment_kinds": [], "tcp_peer_connections": 0, "env": {}}
    ev.update(kw)
    return ev


def test_mpi_classify():
    from workloads.mpi import classify, parse_sizes
    ompi = "Open MPI v5.0.3, package: Open MPI"
    assert classify(ompi, _ev(mca_components=["pml_ucx"]), False, 4)[:2] == ("ucx", "ucx")
    t, net, _ = classify(ompi, _ev(mca_components=["pml_cm", "mtl_ofi"],
                                   libraries=["libfabric.so.1", "libcxi.so.1"]), False, 4)
    assert (t, net) == ("ofi:cxi", "ofi:cxi")
    t, net, _ = classify(ompi, _ev(mca_components=["pml_ob1", "btl_tcp", "btl_vader"],
                                   tcp_peer_connections=2), False, 4)
    assert (t, net) == ("tcp", "tcp")
    t, net, _ = classify(ompi, _ev(mca_components=["pml_ob1", "btl_tcp", "btl_vader"],
                                   shm_segments=2), True, 2)
    assert (t, net) == ("shm", "tcp")
    cray = "MPI VERSION    : CRAY MPICH version 8.1.28"
    t, net, _ = classify(cray, _ev(libraries=["libmpi_cray.so.12", "libfabric.so.1"],
                                   env={"FI_PROVIDER": "cxi"}), False, 8)
    assert (t, net) == ("ofi:cxi", "ofi:cxi")
    t, net, _ = classify(cray, _ev(libraries=["libmpi_cray.so.12", "libfabric.so.1"],
                                   env={"FI_PROVIDER": "tcp"}), False, 8)
    assert t == "ofi:tcp"
    assert classify(cray, _ev(libraries=["libfabric.so.1", "libcxi.so.1"]), True, 2)[0] == "shm"
    assert parse_sizes("1,4k,2M") == [1, 4096, 2 * 1024 * 1024]
