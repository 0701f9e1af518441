"""Unit tests of the pure per-runtime command builders (generator/run/runtimes.py)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from generator.run import runtimes as rt
from generator.model import site as site_mod
from generator.errors import UsageError

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CMD = ("python3", "-m", "workloads.cnn")


def load(name):
    return site_mod.load(name)


def with_runtime(s, name, modes=("bind", "hybrid")):
    """Site `s` with `name` as its only runtime (for runtimes no shipped site uses)."""
    runtime = dataclasses.replace(s.runtimes[0], name=name, mpi_modes=modes, modules=())
    return dataclasses.replace(s, runtimes=(runtime,), container=dataclasses.replace(s.container, runtime=name))


def test_every_runtime_of_the_site_model_has_a_builder():
    assert set(rt.RUNTIMES) == set(typing.get_args(site_mod.RuntimeName)) == set(rt.PLATFORMS)


def test_frontier_bind_is_the_olcf_recipe():
    s = load("frontier")
    c = rt.command(s, "img.sif", CMD, rt.Options(mode="bind", gpus=8, mpi=True))
    assert c.argv == ("apptainer", "exec", "--rocm", "img.sif", *CMD)
    assert c.env["APPTAINER_BINDPATH"] == "/usr/share/libdrm,/var/spool/slurmd,/opt/cray,${PWD}"
    assert c.env["APPTAINER_CONTAINLIBS"].split(",") == list(s.container.bind.libraries)
    assert c.env["APPTAINERENV_LD_PRELOAD"] == "$CRAY_MPICH_ROOTDIR/gtl/lib/libmpi_gtl_hsa.so.0"
    assert c.env["APPTAINERENV_MPICH_GPU_SUPPORT_ENABLED"] == "1"
    assert c.env["APPTAINERENV_LD_LIBRARY_PATH"].startswith("$CRAY_MPICH_ROOTDIR/gtl/lib:")


def test_frontier_hybrid_has_no_host_mpi():
    s = load("frontier")
    c = rt.command(s, "img.sif", CMD, rt.Options(mode="hybrid", gpus=0))
    assert c.argv == ("apptainer", "exec", "img.sif", *CMD)
    # the working directory, and the collectives settings (OLCF's PyTorch guide); no host library, no preload
    assert dict(c.env) == {"APPTAINER_BINDPATH": "${PWD}",
                           **{f"APPTAINERENV_{k}": v for k, v in s.fabric.collectives.env.items()}}


def test_singularity_prefix_and_nv():
    c = rt.command(load("leonardo"), "x.sif", CMD, rt.Options(gpus=4, binds=("/data:/d",)))
    assert c.argv == ("singularity", "exec", "--nv", "--bind", "/data:/d", "x.sif", *CMD)
    assert not any(k.startswith("APPTAINER") for k in c.env)


def test_charliecloud_image_env_first_join_only_for_ranks():
    s = load("local")
    one = rt.command(s, "/img", CMD)
    assert one.argv == ("ch-run", "--set-env", "--set-env=OMPI_MCA_btl_vader_single_copy_mechanism=none",
                        "/img", "--", *CMD)
    many = rt.command(s, "/img", CMD, rt.Options(mpi=True, binds=("/data",)))
    assert many.argv[:5] == ("ch-run", "-b", "/data", "--set-env", "--set-env=OMPI_MCA_btl_vader_single_copy_mechanism=none")
    assert "--join" in many.argv and many.argv.index("--join") < many.argv.index("/img")


def test_charliecloud_bind_mode_and_nvidia_setup():
    s = load("supermuc")
    c = rt.command(s, "img.sqfs", CMD, rt.Options(mode="bind", mpi=True))
    assert ("-b", "/lrz/sys:/lrz/sys") == c.argv[1:3]
    # the host MPI's ranks still read each other's memory (CMA): one namespace per node, as in hybrid mode
    assert "--join" in c.argv
    gpu = with_runtime(load("galileo"), "charliecloud", ("hybrid",))
    assert rt.command(gpu, "/img", CMD, rt.Options(gpus=2)).setup == (("ch-fromhost", "--nvidia", "/img"),)


def test_udocker_root_setup_and_user():
    s = load("ifca")
    c = rt.command(s, "pytorch-ifca", CMD, rt.Options(gpus=4))
    assert c.argv[:6] == ("udocker", "run", "--nobanner", "--hostenv", "--hostauth", "--user=$USER")
    assert c.setup == (("udocker", "setup", "--execmode=P1", "pytorch-ifca"),
                       ("udocker", "setup", "--nvidia", "pytorch-ifca"))
    root = rt.command(load("local"), "c1", CMD, rt.Options(allow_root=True, execmode="R1"), runtime="udocker")
    assert root.argv[:3] == ("udocker", "--allow-root", "run")
    assert "--env=OMPI_MCA_btl_vader_single_copy_mechanism=none" in root.argv
    assert root.setup == (("udocker", "--allow-root", "setup", "--execmode=R1", "c1"),)


def test_podman_hpc_modules_do_the_binding():
    s = load("perlmutter")
    env = tuple(f"--env={k}={v}" for k, v in s.fabric.collectives.env.items())   # podman-hpc's nccl.yaml values
    assert rt.command(s, "i", CMD, rt.Options(mode="bind", gpus=4)).argv == (
        "podman-hpc", "run", "--rm", "--cuda-mpi", "--gpu", *env, "i", *CMD)
    assert rt.command(s, "i", CMD, rt.Options(mode="bind")).argv == ("podman-hpc", "run", "--rm", "--mpi", *env, "i", *CMD)
    hybrid = rt.command(with_runtime(s, "podman-hpc"), "i", CMD, rt.Options(mode="hybrid"))
    assert "--device=/dev/cxi*" in hybrid.argv and "--mpi" not in hybrid.argv


def test_sarus_mounts_mpi_and_exported_env():
    s = with_runtime(load("lumi"), "sarus")
    c = rt.command(s, "img:1", CMD, rt.Options(mode="bind", gpus=8))
    assert c.argv[:3] == ("sarus", "run", "--mpi")
    assert "--mount=type=bind,source=/opt/cray,destination=/opt/cray" in c.argv
    assert "--mount=type=bind,source=/usr/lib64/libcxi.so.1,destination=/usr/lib64/libcxi.so.1" in c.argv
    assert "--device=/dev/cxi*" in c.argv
    assert c.env["LD_LIBRARY_PATH"] == s.container.bind.env["LD_LIBRARY_PATH"]   # the bind mode's environment


def test_container_engine_writes_an_edf():
    s = load("alps")
    c = rt.command(s, "ghcr.io/org/pytorch-alps:0.1.0-abc", CMD, rt.Options(gpus=4, mpi=True))
    assert c.argv == CMD and c.launcher_args == ("--environment=pytorch-alps-0.1.0-abc",)
    (path, text), = c.files.items()
    assert path == "${HOME}/.edf/pytorch-alps-0.1.0-abc.toml"
    edf = tomllib.loads(text)
    assert edf["image"] == "ghcr.io#org/pytorch-alps:0.1.0-abc"
    assert edf["mounts"] == ["${SCRATCH}:${SCRATCH}"]
    assert edf["annotations"] == dict(s.container.annotations)
    assert edf["env"] == dict(s.container.env)
    assert c.standalone() == ("srun", "--environment=pytorch-alps-0.1.0-abc", *CMD)


def test_podman_mpi_rank_and_gpus():
    s = load("local")
    c = rt.command(s, "img", CMD, rt.Options(mpi=True), runtime="podman")
    assert c.argv[:7] == ("podman", "run", "--rm", "--ipc=host", "--net=host", "--pid=host", "--userns=keep-id")
    assert "--env=OMPI_*" in c.argv and c.argv.count("/tmp:/tmp") == 1
    root = rt.command(s, "img", CMD, rt.Options(mpi=True, allow_root=True, interactive=True, binds=("/tmp:/tmp",)),
                      runtime="podman")
    assert root.argv[:4] == ("podman", "run", "--rm", "--interactive")
    assert "--user=0" in root.argv and root.argv.count("/tmp:/tmp") == 1
    assert "--interactive" not in rt.command(s, "img", CMD, runtime="podman").argv
    amd = with_runtime(load("frontier"), "podman", ("hybrid",))
    assert rt.command(amd, "img", CMD, rt.Options(gpus=8)).argv[3:6] == (
        "--device=/dev/kfd", "--device=/dev/dri", "--group-add=keep-groups")
    nv = with_runtime(load("leonardo"), "docker", ("hybrid",))
    d = rt.command(nv, "img", CMD, rt.Options(gpus=4, mpi=True))
    assert "--gpus=all" in d.argv and not any("*" in a for a in d.argv)


def test_unsupported_mode_is_one_line_usage_error():
    with pytest.raises(UsageError, match=r"^site perlmutter's podman-hpc supports bind; not hybrid \(use --mode bind\)$"):
        rt.command(load("perlmutter"), "i", CMD, rt.Options(mode="hybrid"))
    with pytest.raises(UsageError, match="runtime 'apptainer' is not available at site 'local'"):
        rt.command(load("local"), "i", CMD, runtime="apptainer")


def test_pure_and_immutable():
    s = load("frontier")
    a = rt.command(s, "i.sif", CMD, rt.Options(mode="bind", gpus=1))
    assert a == rt.command(s, "i.sif", CMD, rt.Options(mode="bind", gpus=1))
    with pytest.raises(TypeError):
        a.env["X"] = "1"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.argv = ()  # type: ignore[misc]


def test_expand_like_the_scripts():
    env = {"CRAY_MPICH_ROOTDIR": "/opt/cray/pe/mpich/8.1.31", "HOME": "/h"}
    assert rt.expand("$CRAY_MPICH_ROOTDIR/gtl/lib:${UNSET}:x", env) == "/opt/cray/pe/mpich/8.1.31/gtl/lib::x"
    c = rt.resolved(rt.command(load("alps"), "ghcr.io/o/p:1", CMD), env)
    assert list(c.files) == ["/h/.edf/p-1.toml"] and "${SCRATCH}" in next(iter(c.files.values()))
