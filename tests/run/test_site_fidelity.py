"""What the sites' own documentation asks of a run, checked in every generated launch script and image.

Each pinned fact names its source (the site TOMLs' [sources] and docs/sites/<site>.md carry the
details and the date checked)."""

from __future__ import annotations

import re

import pytest

from generator.run import launch, runtimes
from generator.recipe import render
from generator.model import site as site_mod
from tests.helpers import account

SITES = sorted(set(site_mod.builtin_names().values()))
IMAGE = "img"   # a fixed image name: the default one renders the recipe for its content hash


def _script(s, runtime: str, mode: str, bare: bool = False, nodes: int = 2) -> str:
    return launch.script(s, launch.Job(runtime=runtime, mode=mode, bare=bare, nodes=nodes, image=None if bare else IMAGE,
                                       account=account(s), workloads_dir="/w"))


def _modules(text: str) -> set[str]:
    return {m for ln in text.splitlines() if ln.startswith("module load ") for m in ln.split()[2:]}


def _runs(kinds=("hybrid", "bind")):
    for name in SITES:
        s = site_mod.load(name)
        for rt in s.runtimes:
            for mode in rt.mpi_modes:
                if mode in kinds and not (mode == "bind" and s.mpi.flavour == "none"):
                    yield pytest.param(name, rt.name, mode, id=f"{name}-{rt.name}-{mode}")


@pytest.mark.parametrize("name,runtime,mode", list(_runs(("hybrid",))))
def test_hybrid_scripts_load_no_host_mpi_bind_machinery(name, runtime, mode):
    """A hybrid run uses the container's MPI: no host-MPI module, no module that mounts the host MPI
    in, no bind-mode library, path or loader variable."""
    s = site_mod.load(name)
    text = _script(s, runtime, mode)
    loaded = _modules(text)
    if s.host.launcher not in launch.MPI_LAUNCHERS:     # else the host's mpirun starts the containers
        assert not loaded & set(s.mpi.modules), f"{name}: the hybrid script loads the host MPI's modules"
    assert not loaded & set(s.runtime(runtime).bind_modules), f"{name}: the hybrid script loads bind machinery"
    for lib in s.container.bind.libraries:
        assert lib not in text, f"{name}: the hybrid script carries bind mode's {lib}"
    for key in set(s.container.bind.env) - set(s.container.env) - set(s.fabric.collectives.env):
        if key in runtimes.host_mpi_env(s) and s.host.launcher in launch.MPI_LAUNCHERS:   # the host's own mpiexec
            assert s.container.bind.env[key] not in text, f"{name}: the hybrid script sets bind mode's {key}"
        else:
            assert f"{key}=" not in text, f"{name}: the hybrid script sets bind mode's {key}"
    for path in s.container.bind.paths:
        assert not re.search(rf"(BINDPATH|--bind|-v|--mount)[= ][^\n]*{re.escape(path)}", text), path
    assert "CONTAINLIBS" not in text and "LD_PRELOAD" not in text


def test_bind_mode_keeps_its_machinery():
    """The other side of the split: LUMI's bind script does what the bindings module does (binds and
    loader path) and loads the host MPI; it needs no user-installed module."""
    s = site_mod.load("lumi")
    bind, hybrid = _script(s, "singularity", "bind"), _script(s, "singularity", "hybrid")
    # LUMI-EasyBuild-contrib singularity-bindings-24.03.eb: depends on cray-mpich-abi/8.1.29, sets
    # SINGULARITY_BIND (47 entries, from /opt/cray to /run/cxi) and SINGULARITYENV_LD_LIBRARY_PATH
    assert "cray-mpich-abi/8.1.29" in _modules(bind) and "singularity-bindings" not in _modules(bind)
    binds = re.search(r"^export SINGULARITY_BINDPATH=(\S+)$", bind, re.M).group(1).split(",")
    assert len(binds) == 47 and binds[:3] == ["/opt/cray", "/var/spool", "/etc/host.conf"] and binds[-1] == "/run/cxi"
    assert "/opt/cray/pe/gcc-libs/libstdc++.so.6:/usr/lib64/libstdc++.so.6" in binds
    assert {"/usr/lib64/libcxi.so.1", "/usr/lib64/libjansson.so.4", "/usr/lib64/libjson-c.so.3"} <= set(binds)
    assert "export SINGULARITYENV_LD_LIBRARY_PATH=/lib64:/opt/cray/pe/mpich/8.1.29/ofi/gnu/12.3/lib-abi-mpich:" in bind
    assert "cray-mpich-abi/8.1.29" not in _modules(hybrid) and "SINGULARITY_BINDPATH=/opt/cray" not in hybrid
    # the bare twin of a hybrid run uses the host MPI, so it loads it
    assert "cray-mpich-abi/8.1.29" in _modules(_script(s, "singularity", "hybrid", bare=True))


SLINGSHOT_GPU = [n for n in SITES if site_mod.load(n).fabric.kind == "slingshot"
                 and site_mod.load(n).gpu.stack != "none"]


def test_the_slingshot_gpu_sites_are_the_expected_ones():
    assert SLINGSHOT_GPU == ["alps", "frontier", "lumi", "odo", "perlmutter"]


@pytest.mark.parametrize("name", SLINGSHOT_GPU)
@pytest.mark.parametrize("fmt", ["docker", "apptainer"])
def test_slingshot_images_force_the_collectives_plugin(name, fmt):
    """OLCF's PyTorch guide: without NCCL_NET_PLUGIN "the plugin will not be used"; the image points it at
    its aws-ofi build. Alps: the engine's hook brings the site's plugin (CSCS resource-hook page)."""
    s = site_mod.load(name)
    text = render.recipe_text(s, "pytorch", fmt)
    lib = {"rocm": "librccl-net.so", "cuda": "libnccl-net.so"}[s.gpu.stack]
    if s.fabric.collectives.plugin == "image":
        assert re.search(rf"NCCL_NET_PLUGIN=\"?/usr/local/aws-ofi/lib/{lib}", text), name
    else:
        assert name == "alps" and "NCCL_NET_PLUGIN" not in text
        edf = _script(s, "ce", "hybrid")
        assert '"com.hooks.aws_ofi_nccl.enabled" = "true"' in edf


@pytest.mark.parametrize("name,runtime,mode", [p for p in _runs() if p.values[0] in SLINGSHOT_GPU])
def test_slingshot_scripts_set_the_sites_collectives_settings(name, runtime, mode):
    """Every container script and its bare twin carry the site's recommended NCCL/CXI settings, and the
    scheduler option they need."""
    s = site_mod.load(name)
    box, bare = _script(s, runtime, mode), _script(s, runtime, mode, bare=True)
    for k, v in s.fabric.collectives.env.items():
        assert re.search(rf"{k}[=\"' ]+{re.escape(v)}", box), (name, k)
        assert f"export {k}={v}" in bare, (name, k)
    if s.fabric.collectives.env.get("FI_CXI_RDZV_PROTO") == "alt_read":
        assert "#SBATCH --network=disable_rdzv_get" in box and "#SBATCH --network=disable_rdzv_get" in bare


def test_pinned_collectives_facts():
    # OLCF "PyTorch on Frontier" (olcf-user-docs software/analytics/pytorch_frontier.rst, 2026-07-07), the
    # RCCL-over-CXI block; HPE shs-ccl-docs ccl_env.sh has the same list (with userfaultfd).
    frontier = site_mod.load("frontier").fabric.collectives
    assert dict(frontier.env) == {
        "NCCL_CROSS_NIC": "1", "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_SOCKET_IFNAME": "hsn0,hsn1,hsn2,hsn3",
        "HSA_FORCE_FINE_GRAIN_PCIE": "1", "FI_MR_CACHE_MONITOR": "kdreg2", "FI_CXI_DISABLE_HOST_REGISTER": "1",
        "FI_CXI_DEFAULT_CQ_SIZE": "131072", "FI_CXI_RDZV_PROTO": "alt_read", "FI_CXI_RDZV_EAGER_SIZE": "0",
        "FI_CXI_RDZV_THRESHOLD": "0", "FI_CXI_RDZV_GET_MIN": "0", "FI_CXI_DEFAULT_TX_SIZE": "2048",
        "FI_CXI_RX_MATCH_MODE": "hybrid"}
    assert frontier.sbatch == ("--network=disable_rdzv_get",)
    # LUMI: Getting Started with AI workshop 09_Extreme_scale_AI/README.md (2025-10-02) and the LUMI
    # PyTorch page (lumi-userguide software/packages/pytorch.md, 2024-05-21)
    lumi = site_mod.load("lumi").fabric.collectives.env
    assert lumi["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3" and lumi["NCCL_NET_GDR_LEVEL"] == "PHB"
    assert lumi["CXI_FORK_SAFE"] == lumi["CXI_FORK_SAFE_HP"] == lumi["FI_CXI_DISABLE_CQ_HUGETLB"] == "1"
    # NERSC podman-hpc etc/modules.d/nccl.yaml (the --nccl module, 2025-05-30)
    assert dict(site_mod.load("perlmutter").fabric.collectives.env) == {
        "FI_CXI_DISABLE_HOST_REGISTER": "1", "FI_MR_CACHE_MONITOR": "userfaultfd", "NCCL_CROSS_NIC": "1",
        "NCCL_SOCKET_IFNAME": "hsn", "NCCL_NET_GDR_LEVEL": "PHB"}


def test_pinned_frontier_host_facts():
    # OLCF Frontier User Guide, System Updates 2026-05-26: "Upgrade OS to SLES15 SP7" and "Upgrade Slingshot
    # Host Software to 14.0.0, which includes libfabric/2.3.1"; "libfabric/1.15.2.0 has been removed".
    s = site_mod.load("frontier")
    assert (s.host.os, s.host.os_version) == ("sles", "15.7")
    assert (s.fabric.libfabric_version, s.fabric.libfabric_path) == ("2.3.1", "/opt/cray/libfabric/2.3.1")
    # OLCF gpu_aware_mpi_example/submit624.sbatch: bind mode by exports, not by the experimental modules
    assert s.runtime().modules == s.runtime().bind_modules == ()
    assert s.container.bind.env["LD_PRELOAD"] == "$CRAY_MPICH_ROOTDIR/gtl/lib/libmpi_gtl_hsa.so.0"


def test_air_gapped_sites_check_the_image_file_before_the_job():
    """SuperMUC-NG has no internet (PASC 2020: images built elsewhere, copied in): the script runs the
    exported file, and checks it against its .sha256 before the launcher line; its bare twin does not."""
    s = site_mod.load("supermuc")
    assert s.host.internet == "no" and s.container.image_from == "file"
    text = launch.script(s, launch.Job(nodes=2, account=account(s)))
    check = text.index('sha256sum --check --strict --quiet "$(basename "$image_file").sha256"')
    assert "image_file=pytorch-supermuc.tar.gz" in text and "exit 1" in text[check:]
    assert check < text.index('ch-convert -i tar -o dir "$image_file" "$image"') < text.index("mpiexec -n 2")
    assert '--join --join-ct=1 "${image:-}" -- python3' in text
    assert "sha256sum" not in launch.script(s, launch.Job(nodes=2, bare=True, workloads_dir="/w", account=account(s)))
    registry_sites = [n for n in SITES if site_mod.load(n).container.image_from == "registry"]
    assert all("sha256sum" not in _script(site_mod.load(n), site_mod.load(n).container.runtime,
                                          site_mod.load(n).container.mpi_mode) for n in registry_sites)


def test_one_rank_per_gpu_layout_follows_the_sites_examples():
    # OLCF "PyTorch on Frontier" (pytorch_frontier.rst lines 496-497): srun -N2 -n16 -c7 --gpus-per-task=1 --gpu-bind=closest
    frontier = _script(site_mod.load("frontier"), "apptainer", "hybrid")
    assert "--ntasks-per-node=8 --cpus-per-task=7 --gpus-per-task=1 --gpu-bind=closest" in frontier
    # LUMI AI Guide 05-multi-gpu-and-node/run_ddp_srun.sh: --cpus-per-task=7 and srun --cpu-bind=v,mask_cpu=...
    lumi = _script(site_mod.load("lumi"), "singularity", "hybrid")
    assert "--cpus-per-task=7" in lumi and "--cpu-bind=v,mask_cpu=0x00fe000000000000,0xfe00000000000000," in lumi
    # CSCS Slurm page, "One rank per GPU": --ntasks-per-node=4 --gpus-per-task=1
    assert "--ntasks-per-node=4 --gpus-per-task=1" in _script(site_mod.load("alps"), "ce", "hybrid")
    # Leonardo (unverified in its site file): 32 cores / 4 GPUs per Booster node (CINECA user guide)
    assert "--ntasks-per-node=4 --cpus-per-task=8 " in _script(site_mod.load("leonardo"), "singularity", "hybrid")
    # one rank per node (fewer ranks than GPUs): no per-GPU binding, the node's GPUs as before
    few = launch.script(site_mod.load("frontier"), launch.Job(tasks_per_node=1, image=IMAGE, account="abc123"))
    assert "--gpus-per-task" not in few and "srun --nodes=1 --ntasks-per-node=1 --gpus-per-node=8" in few


@pytest.mark.parametrize("name", SLINGSHOT_GPU)
def test_gpu_aware_libfabric_and_mpich_where_the_sites_require_them(name):
    """GPU collectives and GPU-aware MPI hand GPU buffers to libfabric: CSCS's libfabric recipe
    (--with-cuda --enable-cuda-dlopen), the LUMI AI Factory's (--with-rocr=/opt/rocm), Spack's libfabric
    +cuda/+rocm. CSCS's MPICH page: MPICH built "with CUDA support" (Alps' MPICH 4.3.1); the MPICH 3.4.3 of
    the cray-mpich 8 sites stays without (GPU-aware MPI there is bind mode, the host's)."""
    s = site_mod.load(name)
    for fmt in ("docker", "apptainer"):
        text = render.recipe_text(s, "pytorch", fmt)
        libfabric = next(ln for ln in text.splitlines() if "--prefix=/usr/local/libfabric" in ln)
        if s.gpu.stack == "cuda":
            assert "--with-cuda=/usr/local/cuda" in libfabric and "--enable-cuda-dlopen" in libfabric
        else:
            assert "--with-rocr=/opt/rocm" in libfabric
        mpich = next(ln for ln in text.splitlines() if "--prefix=/usr/local/mpich" in ln)
        if name == "alps":
            assert "--with-cuda=/usr/local/cuda" in mpich and "--with-cuda-sm=90" in mpich     # GH200 = sm_90
            # CSCS's MPICH page: MPICH "must be built with both libfabric and xpmem"; its user library is built
            # from a checksummed release (Spack's xpmem 2.6.3), under upstream's name libxpmem.so.0
            assert "--with-xpmem=/usr" in mpich and "-soname,libxpmem.so.0" in text
            assert "ee239a32269f33234cdbdb94db29c12287862934c0784328d34aff82a9fa8b54" in text
        else:
            assert "--with-cuda=" not in mpich and "--with-hip" not in mpich
        # libcxi as CSCS's mpich-gpu Containerfile (--with-cuda=/usr/local/cuda) and the LUMI AI Factory's
        # libfabric Containerfile (--with-rocm=/opt/rocm) build it
        libcxi = next(ln for ln in text.splitlines() if "--prefix=/usr/local/cxi" in ln)
        want = "--with-cuda=/usr/local/cuda" if s.gpu.stack == "cuda" else "--with-rocm=/opt/rocm"
        assert want in libcxi and "--without-" + ("rocm" if s.gpu.stack == "cuda" else "cuda") in libcxi


def test_other_fabrics_keep_their_libfabric_as_it_was():
    text = render.recipe_text(site_mod.load("supermuc"), "pytorch", "docker")
    assert "--with-cuda" not in text and "--with-rocr" not in text


def test_ch_run_join_is_told_the_ranks_per_node():
    """Charliecloud's ch-run --join guesses the peer count from OMPI_COMM_WORLD_LOCAL_SIZE or Slurm's
    variables (ch-run docs, "Multiple processes in the same container with --join"); under Intel MPI's
    Hydra (SuperMUC-NG: mpiexec -ppn) none is set, so the script passes --join-ct itself."""
    text = launch.script(site_mod.load("supermuc"), launch.Job(nodes=2, tasks_per_node=4, account="pn12ab"))
    assert "mpiexec -n 8 -ppn 4 ch-run" in text and "--join --join-ct=4" in text


@pytest.mark.parametrize("name", ["ifca", "forhlr2"])
def test_udocker_mpi_runs_bind_the_host_tmp(name):
    """udocker user manual, "4. Running MPI jobs" (indigo-dc/udocker docs/user_manual.md, 848a7fe):
    `mpiexec -np 128 udocker run ... --hostenv --hostauth --user=<user> -v /tmp ...`."""
    text = _script(site_mod.load(name), "udocker", "hybrid")
    assert re.search(r"udocker (--allow-root )?run --nobanner --hostenv --hostauth \S+ -v /tmp ", text), text
