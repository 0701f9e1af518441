"""The site model: `sites/<name>.toml` → frozen dataclasses, validated.

`load(name_or_path)` is the only entry point. Every problem is reported as a `SiteError`
naming the file, the dotted key and a fix; nothing here prints or exits.

The site schema is the dataclasses below, checked by the schema engine (`generator.model.schema`):
each field's type decides how it is checked, and `fact(...)` metadata carries an example used in
error hints and in the `new-site` template. Cross-field rules (combinations that cannot work) are
`_check`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal, Optional

from workloads.registry import TOLERANCE_KEYS

from generator.errors import UNPRINTABLE, SiteError, UsageError, did_you_mean
from generator.model import options, providers, runtimes
from generator.model.schema import (KINDS, Loader, Version, fact, is_optional, read_file, read_toml, shown,
                                    tomllib)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

SCHEMA_VERSION = 1


# What a string value may look like, by kind: every value that reaches a shell, a Dockerfile line or
# a file name is one of these (checked at load; the sinks quote as well). `$NAME`/`${NAME}` host-variable
# references are allowed where scripts expand them (paths, binds); shell metacharacters never are.


Arch = Literal["x86_64", "aarch64", "ppc64le"]
Scheduler = Literal["slurm", "pbs", "torque", "lsf", "none"]
Launcher = Literal["srun", "mpirun", "mpiexec", "aprun", "none"]
Internet = Literal["yes", "no", "proxy", "unknown"]
GpuVendor = Literal["amd", "nvidia", "intel", "none"]
GpuStack = Literal["rocm", "cuda", "none"]
MpiFlavour = Literal["cray-mpich", "mpich", "intel-mpi", "openmpi", "none"]
MpiAbi = Literal["mpich", "openmpi", "none"]
Fabric = Literal["slingshot", "omnipath", "infiniband", "ethernet"]
Provider = Literal[providers.NAMES]                 # the fabric provider registry's entries
RuntimeName = Literal[runtimes.NAMES]               # the runtime registry's entries
MpiMode = Literal["bind", "hybrid"]
Distro = Literal["ubuntu", "debian", "rockylinux"]
MpiSource = Literal["source", "distro", "vendor"]
Pmi = Literal["pmi2", "pmix", "none"]

# Facts that decide which combinations can work at all.
ABI_OF_FLAVOUR: Mapping[str, str] = {"cray-mpich": "mpich", "mpich": "mpich", "intel-mpi": "mpich",
                                     "openmpi": "openmpi", "none": "none"}
PROVIDERS_OF_FABRIC: Mapping[str, tuple[str, ...]] = {f: providers.on_fabric(f) for f in typing.get_args(Fabric)}
STACK_OF_VENDOR: Mapping[str, tuple[str, ...]] = {"amd": ("rocm",), "nvidia": ("cuda",),
                                                  "intel": ("none",), "none": ("none",)}
FABRICS_OF_FLAVOUR: Mapping[str, tuple[str, ...]] = {"cray-mpich": ("slingshot",)}
# Base image distributions (name, major release) → hpccm's distro keyword. Debian is apt-based and close
# enough to the Ubuntu release of the same era for hpccm's package names.
HPCCM_DISTRO: Mapping[tuple[str, str], str] = {
    ("ubuntu", "20"): "ubuntu20", ("ubuntu", "22"): "ubuntu22", ("ubuntu", "24"): "ubuntu24",
    ("debian", "11"): "ubuntu20", ("debian", "12"): "ubuntu22", ("debian", "13"): "ubuntu24",
    ("rockylinux", "8"): "rockylinux8", ("rockylinux", "9"): "rockylinux9",
}
# Versions that name source releases (download URLs, hpccm's version parsing): components they need.
MIN_PARTS: Mapping[str, int] = {"software.libfabric": 2, "software.ucx": 3, "software.aws_ofi": 2, "software.xpmem": 3,
                                "software.mpi_version": 2, "software.osu": 2, "software.mpi4py": 2,
                                "software.torch": 2, "software.ollama": 3, "software.transformers": 2}
MPI_VERSION_PARTS: Mapping[str, tuple[int, str]] = {"openmpi": (3, "4.1.4"), "mpich": (2, "4.1.2"),
                                                    "cray-mpich": (3, "8.1.31"), "intel-mpi": (2, "2021.13")}


@dataclass(frozen=True, kw_only=True)
class Facts:
    """Common to every fact table: which public documents the facts came from."""

    sources: tuple[str, ...] = fact(("F1",), (), "tags from [sources] backing the facts of this table", kind="tag")
    unverified: tuple[str, ...] = fact(("os_version",), (), "keys of this table not confirmed by a public document", kind="field")


@dataclass(frozen=True, kw_only=True)
class Host(Facts):
    os: str = fact("sles", doc="host operating system", kind="word")
    os_version: str = fact("15.4", doc="host operating system version", kind="word")
    arch: Arch = fact("x86_64", "x86_64")
    cpu: str = fact("AMD EPYC 7A53 (64 cores)", "", "CPU model per node")
    cores_per_node: int = fact(64, 0)
    threads_per_core: int = fact(2, 1, "hardware threads per core, each a CPU to Slurm")
    scheduler: Scheduler = fact("slurm", doc="the batch system; its policy is [scheduler]")
    launcher: Launcher = fact("srun")
    internet: Internet = fact("no", "unknown", "can compute nodes reach the internet")
    proxy: str = fact("http://proxy.example.org:3128/", "", "HTTP(S) proxy for compute nodes", kind="url")
    modules: tuple[str, ...] = fact(("PrgEnv-gnu",), (), "modules loaded for bare and container runs alike", kind="module")
    local_tmp: str = fact("/tmp", "/tmp", "a writable node-local folder on the compute nodes: jobs keep their kernel "
                          "caches there (torch.compile's Inductor and Triton, MIOpen, CUDA's JIT cache)", kind="path")
    rank_binding: tuple[str, ...] = fact(("--cpus-per-task=7", "--gpus-per-task=1", "--gpu-bind=closest"), (),
                                       "srun options of the site's one-rank-per-GPU examples (cores, GPU binding); "
                                       "they replace --gpus-per-node on the srun line; binding and distribution options "
                                       "only (generator/model/options.py)", kind="option")


@dataclass(frozen=True, kw_only=True)
class TimeBin:
    """A wall-time limit that holds for jobs of up to `max_nodes` nodes (a site whose limit falls with the job's
    size: Frontier's "Job Priority by Node Count" bins)."""

    max_nodes: int = fact(91, doc="the bin's largest job, in nodes (the bin starts after the previous bin's)")
    max_time: str = fact("02:00:00", doc="longest wall time of a job in the bin, [D-]HH:MM:SS", kind="walltime")


@dataclass(frozen=True, kw_only=True)
class Partition:
    """A partition (Slurm) or queue (PBS) as the site documents it."""

    name: str = fact("batch", doc="partition (queue) name", kind="word")
    gpus: bool = fact(True, False, "its nodes have GPUs")
    default: bool = fact(True, False, "a job that names no partition lands here")
    max_nodes: int = fact(9472, 0, "most nodes one job may ask for (0: not stated)")
    max_time: str = fact("12:00:00", "", "longest wall time of a job, [D-]HH:MM:SS ('': not stated)", kind="walltime")
    shared: bool = fact(False, False, "jobs share its nodes: a job gets only the CPUs (and memory) it asks for")
    time_by_nodes: tuple[TimeBin, ...] = fact(({"max_nodes": 91, "max_time": "02:00:00"},
                                               {"max_nodes": 183, "max_time": "06:00:00"}), (),
                                              "wall-time limits by job size, smallest jobs first (beyond the last bin: "
                                              "max_time)")

    def max_time_for(self, nodes: int) -> tuple[str, str]:
        """The longest wall time of a job of `nodes` nodes here and why ("": not stated): the size bin's
        limit ("1-91 nodes"), else the partition's."""
        low = 1
        for b in self.time_by_nodes:
            if nodes <= b.max_nodes:
                return b.max_time, f"{low}-{b.max_nodes} nodes"
            low = b.max_nodes + 1
        return self.max_time, ""


@dataclass(frozen=True, kw_only=True)
class Qos:
    """A Slurm quality of service a user may ask for."""

    name: str = fact("debug", doc="QOS name", kind="word")
    default: bool = fact(False, False, "applied to a job that names no QOS")
    max_time: str = fact("02:00:00", "", "longest wall time of a job, [D-]HH:MM:SS ('': not stated)", kind="walltime")
    max_nodes: int = fact(0, 0, "most nodes one job may ask for (0: not stated)")
    max_jobs: int = fact(1, 0, "jobs one user may have in it, in any state (0: not stated)")


REFUSALS = ("account", "constraint", "partition")       # what [scheduler] refusals may quote a message for


@dataclass(frozen=True, kw_only=True)
class SchedulerPolicy(Facts):
    """What the site's scheduler asks of a job (the batch system itself is host.scheduler): where GPU jobs and
    short test runs go, which QOS and constraint they need, the account, node sharing and the options and
    set-up lines of the site's own job templates. Launch scripts, the suite's jobs and the rehearsal cluster
    (gen-recipe minicluster up --shape SITE) all follow it."""

    partitions: tuple[Partition, ...] = fact(({"name": "batch", "gpus": True, "default": True},), (),
                                             "the partitions (queues) jobs may use")
    job_partition: str = fact("batch", "", "partition of the site's jobs, one with GPUs on a GPU site ('': the default one)",
                              kind="word")
    debug_partition: str = fact("", "", "partition of short test runs, gen-recipe launch --debug ('': as other jobs)",
                                kind="word")
    qos: tuple[Qos, ...] = fact(({"name": "debug", "max_time": "02:00:00", "max_jobs": 1},), (), "QOS a user may ask for")
    job_qos: str = fact("regular", "", "QOS of jobs, where the site's default QOS is not meant for them ('': the default)",
                        kind="word")
    debug_qos: str = fact("debug", "", "QOS of short test runs, gen-recipe launch --debug", kind="word")
    lists_complete: bool = fact(True, False, "partitions and qos list every one the site has: launch refuses another "
                                "name (a typo), with the nearest; else another is taken as given, with a note")
    constraint: str = fact("gpu", "", "node feature every job must ask for (--constraint)", kind="word")
    account: Literal["required", "optional"] = fact("required", "optional",
                                                   "whether the scheduler refuses a job that names no account (-A)")
    account_name: str = fact("project ID", "", "what the site calls the account")
    account_example: str = fact("ABC123", "", "an account written as the site writes them", kind="word")
    cpus_per_gpu: int = fact(8, 0, "on shared nodes: CPUs a job's allocation asks for per GPU (0: the launcher's own)")
    mem_per_gpu: str = fact("120G", "", "on shared nodes: memory a job's allocation asks for per GPU", kind="word")
    options: tuple[str, ...] = fact(("--export=NONE",), (), "options every job of the site's templates carries "
                                    "(--export, --get-user-env, --exclusive, --hint, --requeue, --clusters, --licenses)",
                                    kind="option")
    setup: tuple[str, ...] = fact(("slurm_setup",), (), "modules the site's job templates load first", kind="module")
    refusals: Mapping[str, str] = fact({"account": "Job violates accounting/QOS policy"}, None,
                                       "the scheduler's documented message for a job without an account, the "
                                       "constraint or a partition (keys: account, constraint, partition)")

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)

    @property
    def default_partition(self) -> Partition | None:
        return next((p for p in self.partitions if p.default), None)

    def qos_named(self, name: str) -> Qos | None:
        return next((q for q in self.qos if q.name == name), None)


@dataclass(frozen=True, kw_only=True)
class Gpu(Facts):
    vendor: GpuVendor = fact("amd", "none")
    model: str = fact("MI250X", "")
    count_per_node: int = fact(8, 0, "GPUs (GCDs) per node as the scheduler counts them")
    arch: str = fact("gfx90a", "", "offload target: gfx90a, sm_80, ...", kind="word")
    stack: GpuStack = fact("rocm", "none")
    version: Optional[Version] = fact("6.2.4", None, "ROCm or CUDA version used on the host")
    driver: str = fact("580.105.08", "", "GPU driver version", kind="word")


@dataclass(frozen=True, kw_only=True)
class Mpi(Facts):
    flavour: MpiFlavour = fact("cray-mpich")
    version: Optional[Version] = fact("8.1.31", None, "exact host MPI version")
    abi: Optional[MpiAbi] = fact("mpich", None, "ABI family; derived from the flavour when left out")
    install_path: str = fact("/opt/cray/pe/mpich/8.1.31", "", "host MPI install prefix", kind="path")
    gpu_aware: bool = fact(True, False)
    pmi: Pmi = fact("pmi2", "none", "PMI the launcher speaks to the MPI (srun --mpi=...)")
    modules: tuple[str, ...] = fact(("cray-mpich-abi/8.1.31",), (), "modules that provide the host MPI", kind="module")
    setup: Literal["modules", "prefix"] = fact("prefix", "modules", "how the host MPI gets on the paths: its modules "
                                              "(or the site's default environment), or from install_path where nothing "
                                              "sets it up (launch scripts and the suite put its bin first on PATH and its "
                                              "lib on LD_LIBRARY_PATH)")


@dataclass(frozen=True, kw_only=True)
class Collectives(Facts):
    """NCCL/RCCL over the fabric: who brings the network plugin, and the settings the site recommends."""

    plugin: Literal["image", "hook"] = fact("image", "image", "the network plugin of GPU collectives: the image's "
                                          "aws-ofi build (NCCL_NET_PLUGIN points at it) or a runtime hook's")
    env: Mapping[str, str] = fact({"NCCL_SOCKET_IFNAME": "hsn0,hsn1,hsn2,hsn3"}, None, "environment of every run, "
                                "bare and container alike (NCCL_*, FI_CXI_*)", kind="value", keys="env")
    sbatch: tuple[str, ...] = fact(("--network=disable_rdzv_get",), (), "sbatch options those settings need "
                                 "(--network, --switches, --gpu-bind, --gres-flags)",
                                 kind="option")


@dataclass(frozen=True, kw_only=True)
class FabricFacts(Facts):
    kind: Fabric = fact("slingshot")
    provider: Provider = fact("cxi")
    libfabric_version: Optional[Version] = fact("1.15.2.0", None, "host libfabric version")
    libfabric_path: str = fact("/opt/cray/libfabric/1.15.2.0", "", "host libfabric prefix", kind="path")
    ucx_version: Optional[Version] = fact("1.15.0", None, "host UCX version")
    devices: tuple[str, ...] = fact(("/dev/cxi*",), (), "device files the fabric needs in the container", kind="path")
    collectives: Collectives = fact({}, None)


@dataclass(frozen=True, kw_only=True)
class Runtime(Facts):
    name: RuntimeName = fact("apptainer")
    version: Version = fact("1.3.6")
    modules: tuple[str, ...] = fact(("apptainer",), (), "modules this runtime needs in every mode", kind="module")
    bind_modules: tuple[str, ...] = fact(("olcf-container-tools", "apptainer-enable-mpi"), (),
                                       "modules that mount the host MPI in: bind mode only", kind="module")
    mpi_modes: tuple[MpiMode, ...] = fact(("bind", "hybrid"), ("hybrid",), "MPI modes this runtime supports here")


@dataclass(frozen=True, kw_only=True)
class BindMode(Facts):
    paths: tuple[str, ...] = fact(("/opt/cray", "/var/spool/slurmd"), (), "host paths mounted in bind mode", kind="path")
    libraries: tuple[str, ...] = fact(("/usr/lib64/libcxi.so.1",), (), "single host libraries injected", kind="path")
    env: Mapping[str, str] = fact({"LD_LIBRARY_PATH": "/opt/cray/pe/lib64"}, None, "environment set in bind mode", kind="text", keys="env")


@dataclass(frozen=True, kw_only=True)
class Container(Facts):
    runtime: RuntimeName = fact("apptainer", doc="default runtime (one of [[runtimes]])")
    mpi_mode: MpiMode = fact("bind", "hybrid", "bind = host MPI mounted in; hybrid = container MPI matching the host")
    image_from: Literal["registry", "file"] = fact("file", "registry", "how images reach the compute nodes: pulled "
                                                 "from a registry, or a file copied in (air-gapped sites: gen-recipe "
                                                 "build --export), checked against its .sha256 when the job starts")
    build: Literal["user", "fakeroot", "none"] = fact("user", "user", "how an image is made at the site: by a "
                                                     "plain user (user; Apptainer >= 1.1 and SingularityCE >= 4 "
                                                     "need no flag), with --fakeroot "
                                                     "(fakeroot; Singularity 3.x), or not at all (none: it is pulled "
                                                     "from a registry, or copied in as a file)")
    binds: tuple[str, ...] = fact(("/lustre/orion",), (), "paths mounted in every run (src[:dst])", kind="path")
    env: Mapping[str, str] = fact({"OMP_NUM_THREADS": "7"}, None, "environment of every container run", kind="text", keys="env")
    annotations: Mapping[str, str] = fact({"com.hooks.cxi.enabled": "true"}, None,
                                        "runtime annotations (CSCS container engine hooks in the EDF)", kind="text", keys="key")
    bind: BindMode = fact({}, None)


@dataclass(frozen=True, kw_only=True)
class BaseImages:
    devel: str = fact("rocm/dev-ubuntu-22.04:6.2.4", doc="image the build stage starts from", kind="image")
    runtime: str = fact("rocm/dev-ubuntu-22.04:6.2.4", doc="image the runtime stage starts from", kind="image")
    distro: Distro = fact("ubuntu")
    distro_version: Version = fact("22.04")
    bootstrap: Literal["docker", "localimage", "oras", "library", "oci-archive"] = fact(
        "docker", "docker", "Apptainer bootstrap agent for these images (oci-archive: localhost/ images, saved from "
        "podman's store into the build context by gen-recipe build)")
    version: Optional[Version] = fact("6.2.4", None, "the GPU stack's version these images carry (ROCm, CUDA); "
                                    "read from the devel image's tag when left out (AMD's rocm/* and NVIDIA's "
                                    "nvidia/cuda images only)")

    @staticmethod
    def qualified(image: str) -> str:
        """`image` with its registry: a short name (`ubuntu:22.04`, `rocm/dev-ubuntu-22.04:6.2.4`) means Docker Hub
        to Docker and to Apptainer's docker agent, but podman and buildah resolve it through registries.conf, and
        without unqualified-search registries (Debian's default) stop at "short-name ... did not resolve"
        (containers-registries.conf(5), "Short-Name Aliasing"). A first component with a dot or a port, or
        `localhost`, names the registry already."""
        first, slash, _ = image.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            return image
        return f"docker.io/{image}" if slash else f"docker.io/library/{image}"

    def source(self, image: str) -> str:
        """What a definition's `From:` says for `image`: the image, or with `oci-archive` the archive's file in
        the build context (localhost/debian:bookworm -> localhost-debian-bookworm.oci.tar)."""
        return re.sub(r"[^A-Za-z0-9._-]", "-", image) + ".oci.tar" if self.bootstrap == "oci-archive" else image

    def tagged_version(self) -> Version | None:
        """The GPU stack's version in the devel image's tag, for the images whose tags say it: AMD's rocm/*
        (rocm/dev-ubuntu-22.04:6.2.2) and NVIDIA's nvidia/cuda (nvidia/cuda:12.8.1-devel-ubuntu22.04)."""
        found = STACK_TAG.fullmatch(self.devel)
        return Version(found.group(1)) if found else None

    def stack_version(self) -> Version | None:
        """`version`, else the one the devel image's tag says."""
        return self.version if self.version is not None else self.tagged_version()


@dataclass(frozen=True, kw_only=True)
class Software(Facts):
    """Versions of what the images carry. Recipes take every version from here."""

    mpi_source: MpiSource = fact("source", "source", "build the container MPI from source, take the distro's or the vendor's")
    mpi_version: Optional[Version] = fact("3.4.3", None, "container MPI version; derived from the host MPI when left out")
    libfabric: Optional[Version] = fact("1.22.0", None, "libfabric built into the image")
    libcxi: str = fact("release/shs-13.0.0", "", "HPE shs-libcxi / cassini-headers / cxi-driver release tag (cxi provider)", kind="module")
    ucx: Optional[Version] = fact("1.15.0", None, "UCX built into the image (infiniband)")
    aws_ofi: Optional[Version] = fact("1.14.0", None, "aws-ofi-nccl/rccl plugin (NCCL/RCCL over libfabric)")
    xpmem: Optional[Version] = fact("2.6.3", None, "XPMEM user library for the container MPICH's shared memory "
                                  "(the host has the kernel module)")
    python: str = fact("python3", "python3", "interpreter of the base image", kind="path")
    torch: Version = fact("2.5.1")
    torch_index: str = fact("https://download.pytorch.org/whl/rocm6.2", "", "pip index with torch for the GPU stack", kind="url")
    torch_wheel: str = fact("wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "",
                          "torch wheel in the build context, bind-mounted (offline builds)", kind="relpath")
    mpi4py: Version = fact("4.0.1")
    numpy: Version = fact("2.2.6", "2.2.6", "NumPy beside torch (the image's and the bare twin's): most applications' "
                          "first import, torch.from_numpy; 2.2.x has wheels for Python 3.10 to 3.13. The build checks "
                          "that torch takes it (torch.from_numpy)")
    transformers: Optional[Version] = fact("4.46.3", None)
    ollama: Optional[Version] = fact("0.7.0", None)
    osu: Version = fact("7.5")
    pip_cert_secret: bool = fact(True, False, "pass the host CA bundle to pip as a build secret (TLS-intercepting proxy)")
    distro_pins: Mapping[str, str] = fact({"openmpi-bin": "4.1.4-3+b1"}, None, "exact distro package versions", kind="pin", keys="package")
    user: str = fact("app", "app", "non-root user the runtime stage ends with", kind="user")


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """ReFrame-style performance reference: container/bare ratio within [ref+lower, ref+upper]."""

    reference: float = fact(1.0)
    lower: float = fact(-0.05)
    upper: float = fact(0.10)
    unit: str = fact("ratio", kind="word")

    @classmethod
    def from_array(cls, raw: list, key: str, fail) -> Tolerance:
        """The array form `[reference, lower, upper, unit]` of a site file's [tolerances]."""
        if len(raw) != 4 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) <= 100
                                    and math.isfinite(x) for x in raw[:3]) \
                or not isinstance(raw[3], str) or not KINDS["word"][0].fullmatch(raw[3]):
            fail(key, "expected [reference, lower, upper, unit] with finite numbers",
                 'write e.g. [1.0, -0.05, 0.10, "ratio"]')
        return cls(reference=float(raw[0]), lower=float(raw[1]), upper=float(raw[2]), unit=raw[3])


@dataclass(frozen=True, kw_only=True)
class Site:
    schema: int = fact(1)
    name: str = fact("mysite", kind="name")
    description: str = fact("My cluster: 2x EPYC + 4x A100 per node, InfiniBand HDR")
    aliases: tuple[str, ...] = fact(("mysite-ng",), (), kind="name")
    host: Host = fact({})
    scheduler: SchedulerPolicy = fact({}, None)
    gpu: Gpu = fact({})
    mpi: Mpi = fact({})
    fabric: FabricFacts = fact({})
    runtimes: tuple[Runtime, ...] = fact(({},))
    container: Container = fact({})
    images: Mapping[str, BaseImages] = fact({"rocm": {}})
    software: Software = fact({})
    tolerances: Mapping[str, Tolerance] = fact({"cnn": [1.0, -0.05, 0.1, "ratio"]}, None)
    sources: Mapping[str, str] = fact({"F1": "Frontier User Guide, https://docs.olcf.ornl.gov/systems/frontier_user_guide.html"},
                                    kind="text", keys="tag")
    path: str = field(default="", compare=False, metadata={"internal": True})

    # -- derived facts -------------------------------------------------------------------
    @property
    def mpi_abi(self) -> str:
        return self.mpi.abi or ABI_OF_FLAVOUR[self.mpi.flavour]

    @property
    def base(self) -> BaseImages:
        """Base images for the site's GPU stack."""
        return self.images[self.gpu.stack]

    def runtime(self, name: str | None = None) -> Runtime:
        """The named runtime (default: the site's default runtime)."""
        name = name or self.container.runtime
        for rt in self.runtimes:
            if rt.name == name:
                return rt
        raise UsageError(f"runtime '{name}' is not available at site '{self.name}' "
                         f"({did_you_mean(name, [r.name for r in self.runtimes])})")

    def gpu_user_space(self) -> GpuUserSpace:
        """Whose GPU libraries containers run with, the images' or the host's (`gpu_user_space`)."""
        return gpu_user_space(self)

    @property
    def apptainer(self) -> Runtime | None:
        """The site's Apptainer or Singularity runtime (the one that runs SIF images), if it has one."""
        return next((r for r in self.runtimes if runtimes.PLATFORMS[r.name].image == "sif"), None)


# Base images whose tags name their GPU stack's version (the first group).
STACK_TAG = re.compile(r"(?:docker\.io/)?(?:rocm/[a-z0-9._-]+|nvidia/cuda):([0-9]+\.[0-9]+(?:\.[0-9]+)?)(?:[-_][A-Za-z0-9._-]*)?")

# ROCm's release series in order. AMD's "User and kernel-space support matrix" (ROCm install guide, 6.3.0,
# 2025-06-26): "forward and backward compatibility between the AMD Kernel-mode GPU Driver (KMD) and its user
# space software for +/- 2 releases" (its table: a 6.0.x driver runs 5.6.x to 6.2.x user space).
ROCM_SERIES = ("5.0", "5.1", "5.2", "5.3", "5.4", "5.5", "5.6", "5.7", "6.0", "6.1", "6.2", "6.3", "6.4",
               "7.0", "7.1", "7.2")
ROCM_RELEASES_APART = 2


@dataclass(frozen=True)
class GpuUserSpace:
    """Whose GPU user-space libraries a container runs with: the image's own, or the host's bound in
    (Apptainer/Singularity --rocm; --nv always binds the host driver's libraries)."""

    stack: str
    image: Version | None                     # the images' ROCm/CUDA
    host: Version | None                      # the host's
    host_libraries: bool                      # the runtime binds the host's GPU libraries (--rocm / --nv)
    why: str
    problem: str = ""                         # not empty: the combination cannot work


def gpu_user_space(site: Site) -> GpuUserSpace:
    """Pure: compare the site's host ROCm/CUDA (gpu.version) with its images' (images.<stack>.version)."""
    stack, host = site.gpu.stack, site.gpu.version
    image = site.images[stack].stack_version() if stack in site.images else None
    if stack == "none":
        return GpuUserSpace(stack, None, None, False, "no GPUs")
    if image is None or host is None:
        return GpuUserSpace(stack, image, host, False, "", f"the {stack} version of the images is unknown (their devel "
                            "image's tag does not say it)")
    if host.parts[0] == 0:                    # gen-recipe detect's placeholder: nothing to compare with
        return GpuUserSpace(stack, image, host, stack == "cuda", f"the host's {stack} version is not known (gpu.version "
                            f"{host}): {'--nv binds the driver' if stack == 'cuda' else 'the images bring their own ROCm'}")
    if stack == "cuda":
        if image.parts[0] > host.parts[0]:
            return GpuUserSpace(stack, image, host, True, "", f"the images' CUDA {image} needs a CUDA {image.parts[0]} "
                                f"driver; the host's is CUDA {host}")
        return GpuUserSpace(stack, image, host, True, f"the runtime gives the container the host driver's libraries (CUDA {host}); the "
                            f"images' CUDA {image} runtime runs on them (one major release: CUDA minor version "
                            "compatibility)")
    series = [".".join(map(str, v.parts[:2])) for v in (image, host)]
    unknown = [f"{who} ROCm {v}" for who, v, s in (("the images'", image, series[0]), ("the host's", host, series[1]))
               if s not in ROCM_SERIES]
    if series[0] == series[1]:
        return GpuUserSpace(stack, image, host, True, f"the host's ROCm {host} and the images' {image} are one "
                            "release series: --rocm binds the host's ROCm libraries")
    if unknown:
        return GpuUserSpace(stack, image, host, False, "", f"{' and '.join(unknown)}: not a ROCm release series this "
                            f"gen-recipe knows ({', '.join(ROCM_SERIES[:1] + ROCM_SERIES[-1:])} ... in AMD's support "
                            "matrix), so their compatibility is not known")
    if abs(ROCM_SERIES.index(series[0]) - ROCM_SERIES.index(series[1])) <= ROCM_RELEASES_APART:
        return GpuUserSpace(stack, image, host, False, f"the images' own ROCm {image} runs on the host's driver "
                            f"(ROCm {host}: within {ROCM_RELEASES_APART} releases, AMD's user and kernel-space support "
                            f"matrix); --rocm would put the host's {host} libraries ahead of the images' {image}, so "
                            "no --rocm")
    return GpuUserSpace(stack, image, host, False, "", f"the images' ROCm {image} and the host's ROCm {host} are more "
                        f"than {ROCM_RELEASES_APART} releases apart (AMD's user and kernel-space support matrix)")


# ---------------------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------------------


# host.local_tmp: mounted as it is (SRC of -v/--bind, where ':' ',' and '*' mean something) and written into EDFs
LOCAL_TMP = re.compile(r"/(?:[A-Za-z0-9_./+@-]|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*)*")


def _check(site: Site, fail) -> None:
    """Cross-field rules: combinations that cannot work."""
    if site.schema != SCHEMA_VERSION:
        fail("schema", f"schema {site.schema} is not supported", f"this gen-recipe reads schema = {SCHEMA_VERSION}")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", site.name):
        fail("name", f"'{site.name}' is not a valid site name", "use lower-case letters, digits, '-' and '_'")
    if len(site.host.local_tmp) > 256 or not LOCAL_TMP.fullmatch(site.host.local_tmp):
        fail("host.local_tmp", f"'{site.host.local_tmp[:80]}' is not an absolute folder of at most 256 characters "
             "(letters, digits, / . _ - + @, whole $VAR references; no : , * { })",
             'write e.g. "/tmp" or "/mnt/bb/$USER"')
    # (the rest of its rule, the one of every bind: _check_binds)
    if not 1 <= site.host.threads_per_core <= 8:
        fail("host.threads_per_core", f"{site.host.threads_per_core} threads per core", "write 1, 2, 4 or 8")
    if site.gpu.stack not in STACK_OF_VENDOR[site.gpu.vendor]:
        fail("gpu.stack", f"{site.gpu.stack} does not fit {site.gpu.vendor} GPUs",
             f"use {' or '.join(STACK_OF_VENDOR[site.gpu.vendor])}")
    if site.gpu.stack != "none":
        if site.gpu.version is None:
            fail("gpu.version", f"missing the {site.gpu.stack} version", 'add e.g. version = "6.2.4"')
        if site.gpu.count_per_node < 1:
            fail("gpu.count_per_node", "a GPU stack needs at least one GPU per node", "set count_per_node = 1 or more")
    for stack, images in site.images.items():
        if images.bootstrap == "oci-archive" and not all(i.startswith("localhost/") for i in (images.devel, images.runtime)):
            fail(f"images.{stack}.bootstrap", "oci-archive is for images in this machine's podman store (localhost/...)",
                 'use bootstrap = "docker" for images from a registry')
    if site.gpu.stack not in site.images:
        fail("images", f"no base images for the GPU stack '{site.gpu.stack}'", f"add an [images.{site.gpu.stack}] table")
    elif site.gpu.stack != "none":
        base, key = site.base, f"images.{site.gpu.stack}"
        tagged = base.tagged_version()
        if base.version is not None and tagged is not None and base.version != tagged:
            fail(f"{key}.version", f"{base.version} differs from the {tagged} that {key}.devel's tag says",
                 f'write version = "{tagged}", or leave it out')
        problem = gpu_user_space(site).problem if site.gpu.version is not None else ""
        if problem:
            fix = (f'write {key}.version = "X.Y.Z", the {site.gpu.stack} version the images carry'
                   if base.stack_version() is None else
                   f"take {site.gpu.stack} images that fit the host's {site.gpu.version} (or correct gpu.version)")
            fail(f"{key}.version" if base.version is not None or base.stack_version() is None else f"{key}.devel",
                 problem, fix)
    for stack in site.images:
        if stack not in typing.get_args(GpuStack):
            fail(f"images.{stack}", "unknown GPU stack", did_you_mean(stack, typing.get_args(GpuStack)))
        base = site.images[stack]
        if (base.distro, base.distro_version.split(".")[0]) not in HPCCM_DISTRO:
            known = ", ".join(f"{d} {v}" for d, v in HPCCM_DISTRO if d == base.distro)
            fail(f"images.{stack}.distro_version", f"{base.distro} {base.distro_version} is not supported",
                 f"use {known}" if known else "use ubuntu, debian or rockylinux")
    for key, least in MIN_PARTS.items():
        value = getattr(site.software, key.split(".")[1])
        if value is not None and len(value.parts) < least:
            fail(key, f"'{value}' names no release", f"write all {least} components, e.g. "
                 + ".".join(["1"] * least))
    _check_binds(site, fail)
    abi = ABI_OF_FLAVOUR[site.mpi.flavour]
    if site.mpi.abi is not None and site.mpi.abi != abi:
        fail("mpi.abi", f"{site.mpi.flavour} has the {abi} ABI, not {site.mpi.abi}", f'write abi = "{abi}" or leave it out')
    if site.mpi.flavour != "none" and site.mpi.version is None:
        fail("mpi.version", f"missing the exact {site.mpi.flavour} version", 'add e.g. version = "4.1.0"')
    if site.mpi.flavour in MPI_VERSION_PARTS and site.mpi.version is not None:
        least, example = MPI_VERSION_PARTS[site.mpi.flavour]
        if site.mpi.flavour == "intel-mpi" and site.mpi.version.parts[0] in (2018, 2019):
            least, example = 3, "2019.12.320"
        if len(site.mpi.version.parts) < least:
            fail("mpi.version", f"{site.mpi.flavour} '{site.mpi.version}' is not an exact version",
                 f'write e.g. version = "{example}"')
    allowed = PROVIDERS_OF_FABRIC[site.fabric.kind]
    if site.fabric.provider not in allowed:
        fail("fabric.provider", f"{site.fabric.provider} cannot work on {site.fabric.kind}", f"use one of {', '.join(allowed)}")
    fabrics = FABRICS_OF_FLAVOUR.get(site.mpi.flavour)
    if fabrics and site.fabric.kind not in fabrics:
        fail("mpi.flavour", f"{site.mpi.flavour} runs only on {', '.join(fabrics)}, not {site.fabric.kind}",
             "use mpich, intel-mpi or openmpi")
    names = [r.name for r in site.runtimes]
    if not names:
        fail("runtimes", "no container runtime listed", 'add a [[runtimes]] table with name and version')
    for i, rt in enumerate(site.runtimes):
        if not rt.mpi_modes:
            fail(f"runtimes[{i}].mpi_modes", "no MPI mode listed", 'write e.g. mpi_modes = ["hybrid"]')
    for i, name in enumerate(names):
        if name in names[:i]:
            fail(f"runtimes[{i}].name", f"runtime '{name}' is listed twice", "keep one [[runtimes]] table per runtime")
    if site.container.runtime not in names:
        fail("container.runtime", f"'{site.container.runtime}' is not in [[runtimes]]", did_you_mean(site.container.runtime, names))
    if site.container.build == "fakeroot" and runtimes.PLATFORMS[site.container.runtime].image != "sif":
        fail("container.build", f"--fakeroot builds are Apptainer's and Singularity's, not {site.container.runtime}'s",
             'write build = "user" or "none"')
    _check_gpu_mpi(site, fail)
    if site.container.mpi_mode == "bind":
        if site.mpi.flavour == "none":
            fail("container.mpi_mode", "bind mode needs a host MPI", 'use mpi_mode = "hybrid" or set [mpi]')
        if site.container.mpi_mode not in site.runtime().mpi_modes:
            fail("container.mpi_mode", f"runtime {site.container.runtime} does not support bind mode here",
                 f"use one of {', '.join(site.runtime().mpi_modes)}")
    for k in site.tolerances:
        if k not in TOLERANCE_KEYS:
            fail(f"tolerances.{k}", "unknown workload", did_you_mean(k, TOLERANCE_KEYS))
    for k, tol in site.tolerances.items():
        if not tol.lower <= 0 <= tol.upper:
            fail(f"tolerances.{k}", "lower must be <= 0 <= upper", "e.g. [1.0, -0.05, 0.10, \"ratio\"]")
    _check_scheduler(site, fail)
    _check_options(site, fail)
    tables = [("host", site.host), ("scheduler", site.scheduler), ("gpu", site.gpu), ("mpi", site.mpi), ("fabric", site.fabric),
              ("fabric.collectives", site.fabric.collectives), ("container", site.container),
              ("container.bind", site.container.bind), ("software", site.software)]
    tables += [(f"runtimes[{i}]", r) for i, r in enumerate(site.runtimes)]
    for key, table in tables:
        for tag in table.sources:
            if tag not in site.sources:
                fail(f"{key}.sources", f"source '{tag}' is not in [sources]", did_you_mean(tag, site.sources))
        fieldnames = [f.name for f in dataclasses.fields(table)]
        for name in table.unverified:
            if name not in fieldnames:
                fail(f"{key}.unverified", f"'{name}' is not a key of [{key}]", did_you_mean(name, fieldnames))


# GPU-aware Cray MPICH: MPICH_GPU_SUPPORT_ENABLED=1 needs the GTL library of the GPU stack loaded, which a
# container's programs are not linked to: OLCF's container examples preload it; CSCS: "if either of these are
# missing, the application will fail".
GTL_LIBRARY = {"rocm": "libmpi_gtl_hsa", "cuda": "libmpi_gtl_cuda"}


def gpu_mpi_enabled(value: str) -> bool:
    """MPICH_GPU_SUPPORT_ENABLED as Cray MPICH reads it: a number, on when not zero."""
    try:
        return int(value.strip()) != 0
    except ValueError:
        return False


def gtl_preloaded(env: Mapping[str, str], stack: str) -> bool:
    """LD_PRELOAD names the GTL library of `stack` (an element whose file name is libmpi_gtl_hsa.so[.N])."""
    gtl = GTL_LIBRARY.get(stack, "libmpi_gtl_")
    return any(re.fullmatch(re.escape(gtl) + r"[a-z]*\.so(?:\.[0-9]+)*", part.rsplit("/", 1)[-1])
               for part in re.split(r"[:\s]+", env.get("LD_PRELOAD", "")))


# The one rule of every host path a script binds (host.local_tmp, container.binds, container.bind.paths and
# .libraries, fabric.devices; the destinations too): absolute (or a whole $VAR first, which the script expands),
# normalised, not the root, not a system folder (below, any /lib*, and /usr's own folders), and inside one only
# where the key allows: bind mode mounts the host MPI's libraries and configuration (the Cray sites bind
# /usr/lib64/libcxi.so.1, /etc/hosts, /var/spool/slurmd), the kernel caches may be in /var/tmp, devices are in /dev.
SYSTEM_FOLDERS = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/var", "/boot", "/dev", "/proc", "/sys", "/root")
SYSTEM_FILES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/var")          # what a bind may be inside by default
_LEADING_VAR = re.compile(r"\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)(?=/|$)")


def bind_problem(path: str, inside: tuple[str, ...] = SYSTEM_FILES) -> str:
    """Why host path `path` may not be bound into a container ("": it may); `inside`: the system folders whose
    files or folders it may be."""
    if not (path.startswith("/") or _LEADING_VAR.match(path)):
        return "is not an absolute path"
    if os.path.normpath(path) != path or path.startswith("//"):
        return "is not normalised (no '.', '..', '//' or '/' at the end)"
    if path == "/":
        return "is the host's root folder"
    parts = path.split("/") if path.startswith("/") else ["", ""]
    top = "/lib" if re.fullmatch(r"lib[^/]*", parts[1]) else "/" + parts[1]
    if top in SYSTEM_FOLDERS and (len(parts) == 2 or top == "/usr" and len(parts) == 3):
        return "is a system folder"
    if top in SYSTEM_FOLDERS and top not in inside:
        return f"is inside /{parts[1]}, a system folder"
    return ""


# Destinations bind mode must not cover besides: the image's own folders, and /tmp (ch-run mounts the host's there).
SHARED_DESTINATIONS = ("/tmp", "/opt", "/run", "/home")


def _check_binds(site: Site, fail) -> None:
    """Every path a script binds passes `bind_problem`; bind mode's destinations are folders of their own, not inside
    /tmp (the image must hold them); a host MPI set up from its prefix (mpi.setup = "prefix") lives in an absolute
    folder of its own."""
    tmp = site.host.local_tmp
    if bind_problem(tmp, ("/var",)):
        fail("host.local_tmp", f"'{tmp[:80]}' {bind_problem(tmp, ('/var',))}", 'write e.g. "/tmp" or "/mnt/bb/$USER"')
    for i, device in enumerate(site.fabric.devices):
        problem = bind_problem(device, ("/dev",)) or ("" if device.startswith("/dev/") else "is not inside /dev")
        if problem:
            fail(f"fabric.devices[{i}]", f"'{device[:80]}' {problem}", 'write e.g. "/dev/cxi*"')
    for key, specs in (("container.binds", site.container.binds), ("container.bind.paths", site.container.bind.paths),
                       ("container.bind.libraries", site.container.bind.libraries)):
        for i, spec in enumerate(specs):
            most = 0 if key == "container.bind.libraries" else 1         # ':' a library's path does not hold
            if spec.count(":") > most:
                fail(f"{key}[{i}]", f"'{spec[:80]}' has more than {'SRC:DST' if most else 'a path'}",
                     "write SRC or SRC:DST (mount options are the runtime's)" if most else "write the library's path")
            src, _, dst = spec.partition(":")
            for side, path in (("SRC", src), ("DST", dst or src)):
                if bind_problem(path):
                    fail(f"{key}[{i}]", f"'{spec[:80]}': {side} {bind_problem(path)}",
                         'write e.g. "/lustre/orion", "${SCRATCH}:/scratch" or "/opt/cray"')
            dst = dst or src
            if key == "container.bind.paths" and ("$" in dst or dst in SHARED_DESTINATIONS or dst.startswith("/tmp/")):
                fail(f"{key}[{i}]", f"'{spec[:80]}': bind mode's destination must be a folder of its own the image "
                     "holds (not /tmp, /opt, /run, /home, nor inside /tmp; no $VAR)",
                     'write e.g. "/opt/cray" or "/opt/host-mpi:/opt/host-mpi"')
    if site.mpi.setup == "prefix":
        path = site.mpi.install_path
        if not path.startswith("/") or ":" in path or os.path.normpath(path) != path or path.rstrip("/") in \
                runtimes.SYSTEM_PREFIXES or site.mpi.flavour == "none":
            fail("mpi.setup", f'"prefix" needs mpi.install_path to be an absolute folder of the MPI\'s own, not '
                 f"'{path[:80]}'", 'write install_path = "/opt/mpich/5.0.2", or setup = "modules"')


def _check_gpu_mpi(site: Site, fail) -> None:
    """An environment that turns on Cray MPICH's GPU support preloads its GTL library, or does not turn it on: per
    MPI mode, the environments a container run gets (collectives, container, and in bind mode the bind mode's)."""
    tables = [("fabric.collectives.env", site.fabric.collectives.env), ("container.env", site.container.env)]
    for mode in ("hybrid", "bind"):
        layers = tables + ([("container.bind.env", site.container.bind.env)] if mode == "bind" else [])
        env = {k: v for _, e in layers for k, v in e.items()}
        where = next((key for key, e in reversed(layers) if "MPICH_GPU_SUPPORT_ENABLED" in e), "")
        if where and gpu_mpi_enabled(env["MPICH_GPU_SUPPORT_ENABLED"]) and not gtl_preloaded(env, site.gpu.stack):
            gtl = GTL_LIBRARY.get(site.gpu.stack, "libmpi_gtl_*")
            fail(f"{where}.MPICH_GPU_SUPPORT_ENABLED", f"GPU support of Cray MPICH is turned on ({mode} mode) without "
                 f"its GTL library ({gtl}) in LD_PRELOAD: the containers' programs are not linked to it and fail",
                 f"add LD_PRELOAD with the path of {gtl}.so.0 of the site's cray-mpich (from its documentation), "
                 "or remove MPICH_GPU_SUPPORT_ENABLED")
            return


def _check_scheduler(site: Site, fail) -> None:
    """[scheduler]: names that exist, one default, wall times Slurm reads, nothing a batch system lacks."""
    sched, kind = site.scheduler, site.host.scheduler
    policy = [f.name for f in dataclasses.fields(sched) if f.name not in ("sources", "unverified")
              and getattr(sched, f.name) not in ("", 0, (), "optional") and getattr(sched, f.name) != {}]
    if kind == "none" and policy:
        fail("scheduler", "a site without a batch system (host.scheduler = \"none\") has no scheduler policy",
             "remove [scheduler], or set host.scheduler")
    if sched.qos and kind != "slurm":
        fail("scheduler.qos", f"{kind} has no QOS", "remove [[scheduler.qos]]")
    for what, items in (("partitions", sched.partitions), ("qos", sched.qos)):
        names = [x.name for x in items]
        for i, x in enumerate(items):
            if x.name in names[:i]:
                fail(f"scheduler.{what}[{i}].name", f"'{x.name}' is listed twice", f"keep one [[scheduler.{what}]] per name")
        if sum(x.default for x in items) > 1:
            fail(f"scheduler.{what}", f"more than one default among {', '.join(names)}", "mark one default = true")
    for key, table, names in (("job_partition", "partitions", [p.name for p in sched.partitions]),
                              ("debug_partition", "partitions", [p.name for p in sched.partitions]),
                              ("job_qos", "qos", [q.name for q in sched.qos]), ("debug_qos", "qos", [q.name for q in sched.qos])):
        value = getattr(sched, key)
        if value and value not in names:
            fail(f"scheduler.{key}", f"'{value}' is not in [[scheduler.{table}]]",
                 did_you_mean(value, names) if names else f"add a [[scheduler.{table}]] table for it")
    for key in ("job_partition", "debug_partition"):
        chosen = sched.partition(getattr(sched, key)) or (sched.default_partition if key == "job_partition" else None)
        if chosen is not None and site.gpu.count_per_node and not chosen.gpus:
            fail(f"scheduler.{key}", f"partition '{chosen.name}' has no GPUs (gpus = false) and site {site.name} has",
                 f"name a partition with gpus = true as {key}")
    for k in sched.refusals:
        if k not in REFUSALS:
            fail(f"scheduler.refusals.{k}", "unknown refusal", did_you_mean(k, REFUSALS))
    if sched.constraint and kind != "slurm":
        fail("scheduler.constraint", f"{kind} takes no --constraint", "remove it (PBS: a resource of -l select)")
    for what, items in (("partitions", sched.partitions), ("qos", sched.qos)):
        for i, x in enumerate(items):
            if x.name.upper() == "DEFAULT":
                fail(f"scheduler.{what}[{i}].name", "DEFAULT is Slurm's keyword for the defaults of every entry",
                     "write the name the site gives it")
            if x.max_time and _wall_problem(x.max_time):
                fail(f"scheduler.{what}[{i}].max_time", f"{x.max_time} {_wall_problem(x.max_time)}",
                     'write the limit, e.g. "12:00:00" or "2-00:00:00"')
    for i, p in enumerate(sched.partitions):
        previous = 0
        for j, b in enumerate(p.time_by_nodes):
            key = f"scheduler.partitions[{i}].time_by_nodes[{j}]"
            if b.max_nodes <= previous:
                fail(f"{key}.max_nodes", f"{b.max_nodes} does not follow the bin before ({previous} nodes)",
                     "list the bins smallest jobs first, each max_nodes above the previous one")
            if _wall_problem(b.max_time):
                fail(f"{key}.max_time", f"{b.max_time} {_wall_problem(b.max_time)}", 'write the limit, e.g. "02:00:00"')
            if p.max_time and wall_seconds(b.max_time) > wall_seconds(p.max_time):
                fail(f"{key}.max_time", f"{b.max_time} is above the partition's max_time {p.max_time}",
                     "write the bin's own limit (the partition's max_time holds beyond the last bin)")
            if p.max_nodes and b.max_nodes > p.max_nodes:
                fail(f"{key}.max_nodes", f"{b.max_nodes} is above the partition's max_nodes {p.max_nodes}",
                     "write the bin's largest job size")
            previous = b.max_nodes
    if sched.options and kind != "slurm":
        fail("scheduler.options", f"{kind} scripts take no sbatch options", "remove them")


def _check_options(site: Site, fail) -> None:
    """The option lists that reach sbatch and srun: each item an option its key allows, by its full name
    (generator.model.options), once."""
    for key, items in (("scheduler.options", site.scheduler.options), ("host.rank_binding", site.host.rank_binding),
                       ("fabric.collectives.sbatch", site.fabric.collectives.sbatch)):
        names = [item.partition("=")[0] for item in items]
        for i, item in enumerate(items):
            problem, fix = options.problem(key, item)
            if problem:
                fail(f"{key}[{i}]", problem, fix)
            if names[i] in names[:i]:
                fail(f"{key}[{i}]", f"{names[i]} is listed twice (the program would take the last)", "keep one")


# The forms Slurm's --time takes (sbatch(1), -t/--time): "minutes", "minutes:seconds", "hours:minutes:seconds",
# "days-hours", "days-hours:minutes" and "days-hours:minutes:seconds"; after the first field, hours below 24 and
# minutes and seconds below 60 (a stricter reading, so that a typo is not taken as a longer limit than meant).
WALL_TIME = re.compile(r"(?:(?P<d>[0-9]{1,3})-(?P<dh>[01]?[0-9]|2[0-3])(?::(?P<dm>[0-5]?[0-9])(?::(?P<ds>[0-5]?[0-9]))?)?"
                       r"|(?P<a>[0-9]{1,6})(?::(?P<b>[0-5]?[0-9])(?::(?P<c>[0-5]?[0-9]))?)?)")     # ASCII digits only
WALL_TIME_FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"


def wall_seconds(wall: str) -> int | None:
    """The seconds of a wall time in any form Slurm's --time takes (WALL_TIME); None when it is none of them.
    0 ("no limit" to Slurm) is 0: callers refuse it."""
    m = WALL_TIME.fullmatch(wall)
    if m is None:
        return None
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "d" in g:
        return ((g["d"] * 24 + g["dh"]) * 60 + g.get("dm", 0)) * 60 + g.get("ds", 0)
    if "c" in g:                                        # hours:minutes:seconds
        return (g["a"] * 60 + g["b"]) * 60 + g["c"]
    return g["a"] * 60 + g.get("b", 0)                  # minutes[:seconds]


def _wall_problem(wall: str) -> str:
    """Why a site file's wall time is no limit a job can have ("": it is one)."""
    seconds = wall_seconds(wall)
    if seconds is None:
        return f"is not a wall time Slurm takes ({WALL_TIME_FORMS}; hours below 24 after a day)"
    return "" if seconds else "admits no job"


def hms(seconds: int) -> str:
    """`seconds` as HH:MM:SS (hours beyond 24): what the scripts write, in every batch system's syntax."""
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


# Keys of earlier site files and where their facts live now.
MOVED: Mapping[str, str] = {
    "host.partition": "write the partitions as [[scheduler.partitions]] and the one jobs use as scheduler.job_partition "
                      "(or mark it default = true)",
    "host.needs_account": 'write [scheduler] account = "required"',
}


def fits(key: str, value) -> bool:
    """Would `value` pass the string checks of the field at dotted `key` ('host.modules')? For writers of
    site files (detect), so that what they write loads."""
    cls, meta = Site, None
    for part in key.split("."):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if part not in fields:
            return True
        meta = fields[part].metadata
        tp = is_optional(typing.get_type_hints(cls)[part])[1]
        args = typing.get_args(tp)
        nested = tp if dataclasses.is_dataclass(tp) else next((a for a in args if dataclasses.is_dataclass(a)), None)
        if nested is None:
            break
        cls = nested
    kind = (meta or {}).get("kind", "text")
    items = value if isinstance(value, (tuple, list)) else (value,)
    return all(not isinstance(v, str) or bool(KINDS[kind][0].fullmatch(v)) for v in items)


def parse(text: str, path: str) -> Site:
    """Parse and validate the text of a site file; `path` is used in messages."""
    loader = Loader(path)
    raw = read_toml(text, path)
    for key, hint in MOVED.items():
        table, name = key.split(".")
        if isinstance(raw.get(table), dict) and name in raw[table]:
            loader.fail(key, "moved to [scheduler]", hint)
    site = loader.table(Site, raw, "")
    site = dataclasses.replace(site, path=path)
    _check(site, loader.fail)
    return site


def builtin_names() -> dict[str, str]:
    """Shipped site names (and aliases) → canonical name."""
    names = {}
    for entry in sorted(resources.files("sites").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml") and not entry.name.startswith("_"):
            name = entry.name[:-5]
            names[name] = name
            try:                          # a broken shipped file is reported when it is loaded, not by every command
                raw = tomllib.loads(entry.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError):
                continue
            aliases = raw.get("aliases", [])
            for alias in aliases if isinstance(aliases, list) else []:
                if isinstance(alias, str):
                    names[alias] = name
    return names


def load(name_or_path: str) -> Site:
    """Load a shipped site by name or alias, or a site file by path. An argument is a path when it holds
    a '/' or ends in .toml: a file named `frontier` in the current directory does not replace the shipped
    site (say ./frontier for the file)."""
    if len(name_or_path) > 4096 or UNPRINTABLE.search(name_or_path):
        raise UsageError(f"{shown(name_or_path)} is not a site name or path (gen-recipe --list-sites names the sites)")
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        path = Path(name_or_path)
        return parse(read_file(path), str(path))
    names = builtin_names()
    if name_or_path not in names:
        local = f"; a file {name_or_path} is here: say ./{name_or_path} to use it" if Path(name_or_path).is_file() else ""
        raise UsageError(f"unknown site '{name_or_path}' ({did_you_mean(name_or_path, names)}){local}; "
                         "the path of your own site TOML works too")
    canonical = names[name_or_path]
    entry = resources.files("sites") / f"{canonical}.toml"
    site = parse(entry.read_text(encoding="utf-8"), f"sites/{canonical}.toml")
    if site.name != canonical:
        raise SiteError(site.path, "name", f"'{site.name}' differs from the file name", f'write name = "{canonical}"')
    return site
