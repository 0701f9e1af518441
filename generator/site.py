"""The site model: `sites/<name>.toml` → frozen dataclasses, validated.

`load(name_or_path)` is the only entry point. Every problem is reported as a `SiteError`
naming the file, the dotted key and a fix; nothing here prints or exits.

The schema is the dataclasses below: each field's type decides how it is checked
(`Literal` = one of a fixed set, `Version` = a dotted version string, tuples = arrays,
nested dataclasses = tables). Field metadata carries an example used in error hints and in
the `new-site` template.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal, Optional, Union

from .errors import SiteError, UsageError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

SCHEMA_VERSION = 1


class Version(str):
    """A version string such as 4.1.0, 2021.9, 1.15.2.0 or 4.1.4-3+b1 (distro package)."""

    PATTERN = re.compile(r"^\d+(\.\d+){0,3}([-+~][0-9A-Za-z.+~-]+)?$")

    @property
    def parts(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.split(r"[-+~]", self, maxsplit=1)[0].split("."))

    def series(self, n: int = 2) -> str:
        """The first n numeric components: Version('8.1.31').series() == '8.1'."""
        return ".".join(str(p) for p in self.parts[:n])


def _f(example, default=dataclasses.MISSING, doc: str = ""):
    """A field with an example (for hints and the template) and a one-line doc."""
    meta = {"example": example, "doc": doc}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    if isinstance(default, (list, dict)):
        raise TypeError("use tuples / None for mutable defaults")
    return field(default=default, metadata=meta)


Arch = Literal["x86_64", "aarch64", "ppc64le"]
Scheduler = Literal["slurm", "pbs", "torque", "lsf", "none"]
Launcher = Literal["srun", "mpirun", "mpiexec", "aprun", "none"]
Internet = Literal["yes", "no", "proxy", "unknown"]
GpuVendor = Literal["amd", "nvidia", "intel", "none"]
GpuStack = Literal["rocm", "cuda", "none"]
MpiFlavour = Literal["cray-mpich", "mpich", "intel-mpi", "openmpi", "none"]
MpiAbi = Literal["mpich", "openmpi", "none"]
Fabric = Literal["slingshot", "omnipath", "infiniband", "ethernet"]
Provider = Literal["cxi", "psm2", "opx", "verbs", "ucx", "tcp"]
RuntimeName = Literal["apptainer", "singularity", "charliecloud", "udocker", "podman-hpc",
                      "sarus", "ce", "docker", "podman"]
MpiMode = Literal["bind", "hybrid"]
Distro = Literal["ubuntu", "debian", "rockylinux"]
MpiSource = Literal["source", "distro", "vendor"]
Pmi = Literal["pmi2", "pmix", "none"]

# Facts that decide which combinations can work at all.
ABI_OF_FLAVOUR: Mapping[str, str] = {"cray-mpich": "mpich", "mpich": "mpich", "intel-mpi": "mpich",
                                     "openmpi": "openmpi", "none": "none"}
PROVIDERS_OF_FABRIC: Mapping[str, tuple[str, ...]] = {
    "slingshot": ("cxi", "tcp"),
    "omnipath": ("psm2", "opx", "tcp"),
    "infiniband": ("ucx", "verbs", "tcp"),
    "ethernet": ("tcp",),
}
STACK_OF_VENDOR: Mapping[str, tuple[str, ...]] = {"amd": ("rocm",), "nvidia": ("cuda",),
                                                  "intel": ("none",), "none": ("none",)}
FABRICS_OF_FLAVOUR: Mapping[str, tuple[str, ...]] = {"cray-mpich": ("slingshot",)}
WORKLOADS = ("cnn", "gan3d", "resnet", "mnist", "llm", "mpi_latency", "mpi_bandwidth",
             "mpi_allreduce", "startup")


@dataclass(frozen=True, kw_only=True)
class Facts:
    """Common to every fact table: which public documents the facts came from."""

    sources: tuple[str, ...] = _f(("F1",), (), "tags from [sources] backing the facts of this table")
    unverified: tuple[str, ...] = _f(("os_version",), (), "keys of this table not confirmed by a public document")


@dataclass(frozen=True, kw_only=True)
class Host(Facts):
    os: str = _f("sles", doc="host operating system")
    os_version: str = _f("15.4", doc="host operating system version")
    arch: Arch = _f("x86_64", "x86_64")
    cpu: str = _f("AMD EPYC 7A53 (64 cores)", "", "CPU model per node")
    cores_per_node: int = _f(64, 0)
    scheduler: Scheduler = _f("slurm")
    launcher: Launcher = _f("srun")
    internet: Internet = _f("no", "unknown", "can compute nodes reach the internet")
    proxy: str = _f("http://proxy.example.org:3128/", "", "HTTP(S) proxy for compute nodes")
    modules: tuple[str, ...] = _f(("PrgEnv-gnu",), (), "modules loaded for bare and container runs alike")


@dataclass(frozen=True, kw_only=True)
class Gpu(Facts):
    vendor: GpuVendor = _f("amd", "none")
    model: str = _f("MI250X", "")
    count_per_node: int = _f(8, 0, "GPUs (GCDs) per node as the scheduler counts them")
    arch: str = _f("gfx90a", "", "offload target: gfx90a, sm_80, ...")
    stack: GpuStack = _f("rocm", "none")
    version: Optional[Version] = _f("6.2.4", None, "ROCm or CUDA version used on the host")
    driver: str = _f("580.105.08", "", "GPU driver version")


@dataclass(frozen=True, kw_only=True)
class Mpi(Facts):
    flavour: MpiFlavour = _f("cray-mpich")
    version: Optional[Version] = _f("8.1.31", None, "exact host MPI version")
    abi: Optional[MpiAbi] = _f("mpich", None, "ABI family; derived from the flavour when left out")
    install_path: str = _f("/opt/cray/pe/mpich/8.1.31", "", "host MPI install prefix")
    gpu_aware: bool = _f(True, False)
    pmi: Pmi = _f("pmi2", "none", "PMI the launcher speaks to the MPI (srun --mpi=...)")
    modules: tuple[str, ...] = _f(("cray-mpich-abi/8.1.31",), (), "modules that provide the host MPI")


@dataclass(frozen=True, kw_only=True)
class FabricFacts(Facts):
    kind: Fabric = _f("slingshot")
    provider: Provider = _f("cxi")
    libfabric_version: Optional[Version] = _f("1.15.2.0", None, "host libfabric version")
    libfabric_path: str = _f("/opt/cray/libfabric/1.15.2.0", "", "host libfabric prefix")
    ucx_version: Optional[Version] = _f("1.15.0", None, "host UCX version")
    devices: tuple[str, ...] = _f(("/dev/cxi*",), (), "device files the fabric needs in the container")


@dataclass(frozen=True, kw_only=True)
class Runtime(Facts):
    name: RuntimeName = _f("apptainer")
    version: Version = _f("1.3.6")
    modules: tuple[str, ...] = _f(("olcf-container-tools", "apptainer-enable-mpi"), ())
    mpi_modes: tuple[MpiMode, ...] = _f(("bind", "hybrid"), ("hybrid",), "MPI modes this runtime supports here")


@dataclass(frozen=True, kw_only=True)
class BindMode(Facts):
    paths: tuple[str, ...] = _f(("/opt/cray", "/var/spool/slurmd"), (), "host paths mounted in bind mode")
    libraries: tuple[str, ...] = _f(("/usr/lib64/libcxi.so.1",), (), "single host libraries injected")
    env: Mapping[str, str] = _f({"LD_LIBRARY_PATH": "/opt/cray/pe/lib64"}, None, "environment set in bind mode")


@dataclass(frozen=True, kw_only=True)
class Container(Facts):
    runtime: RuntimeName = _f("apptainer", doc="default runtime (one of [[runtimes]])")
    mpi_mode: MpiMode = _f("bind", "hybrid", "bind = host MPI mounted in; hybrid = container MPI matching the host")
    binds: tuple[str, ...] = _f(("/lustre/orion",), (), "paths mounted in every run (src[:dst])")
    env: Mapping[str, str] = _f({"OMP_NUM_THREADS": "7"}, None, "environment of every container run")
    annotations: Mapping[str, str] = _f({"com.hooks.cxi.enabled": "true"}, None,
                                        "runtime annotations (CSCS container engine hooks in the EDF)")
    bind: BindMode = _f({}, None)


@dataclass(frozen=True, kw_only=True)
class BaseImages:
    devel: str = _f("rocm/dev-ubuntu-22.04:6.2.4", doc="image the build stage starts from")
    runtime: str = _f("rocm/dev-ubuntu-22.04:6.2.4", doc="image the runtime stage starts from")
    distro: Distro = _f("ubuntu")
    distro_version: Version = _f("22.04")
    bootstrap: Literal["docker", "localimage", "oras", "library"] = _f("docker", "docker",
                                                                        "Apptainer bootstrap agent for these images")


@dataclass(frozen=True, kw_only=True)
class Software(Facts):
    """Versions of what the images carry. Recipes take every version from here."""

    mpi_source: MpiSource = _f("source", "source", "build the container MPI from source, take the distro's or the vendor's")
    mpi_version: Optional[Version] = _f("3.4.3", None, "container MPI version; derived from the host MPI when left out")
    libfabric: Optional[Version] = _f("1.22.0", None, "libfabric built into the image")
    libcxi: str = _f("release/shs-13.0.0", "", "HPE shs-libcxi / cassini-headers / cxi-driver release tag (cxi provider)")
    ucx: Optional[Version] = _f("1.15.0", None, "UCX built into the image (infiniband)")
    aws_ofi: Optional[Version] = _f("1.14.0", None, "aws-ofi-nccl/rccl plugin (NCCL/RCCL over libfabric)")
    python: str = _f("python3", "python3", "interpreter of the base image")
    torch: Version = _f("2.5.1")
    torch_index: str = _f("https://download.pytorch.org/whl/rocm6.2", "", "pip index with torch for the GPU stack")
    torch_wheel: str = _f("wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "",
                          "torch wheel in the build context, bind-mounted (offline builds)")
    mpi4py: Version = _f("4.0.1")
    transformers: Optional[Version] = _f("4.46.3", None)
    ollama: Optional[Version] = _f("0.5.7", None)
    osu: Version = _f("7.5")
    pip_cert_secret: bool = _f(True, False, "pass the host CA bundle to pip as a build secret (TLS-intercepting proxy)")
    distro_pins: Mapping[str, str] = _f({"openmpi-bin": "4.1.4-3+b1"}, None, "exact distro package versions")
    user: str = _f("app", "app", "non-root user the runtime stage ends with")


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """ReFrame-style performance reference: container/bare ratio within [ref+lower, ref+upper]."""

    reference: float = _f(1.0)
    lower: float = _f(-0.05)
    upper: float = _f(0.10)
    unit: str = _f("ratio")


@dataclass(frozen=True, kw_only=True)
class Site:
    schema: int = _f(1)
    name: str = _f("mysite")
    description: str = _f("My cluster: 2x EPYC + 4x A100 per node, InfiniBand HDR")
    aliases: tuple[str, ...] = _f(("mysite-ng",), ())
    host: Host = _f({})
    gpu: Gpu = _f({})
    mpi: Mpi = _f({})
    fabric: FabricFacts = _f({})
    runtimes: tuple[Runtime, ...] = _f(({},))
    container: Container = _f({})
    images: Mapping[str, BaseImages] = _f({"rocm": {}})
    software: Software = _f({})
    tolerances: Mapping[str, Tolerance] = _f({"cnn": [1.0, -0.05, 0.1, "ratio"]}, None)
    sources: Mapping[str, str] = _f({"F1": "Frontier User Guide, https://docs.olcf.ornl.gov/systems/frontier_user_guide.html"})
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

    @property
    def apptainer(self) -> Runtime | None:
        """The site's Apptainer or Singularity runtime, if it has one."""
        return next((r for r in self.runtimes if r.name in ("apptainer", "singularity")), None)


# ---------------------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------------------

def _is_optional(tp) -> tuple[bool, object]:
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return True, args[0]
    return False, tp


def _describe(value) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
             list: "an array", dict: "a table"}
    return f"{names.get(type(value), type(value).__name__)} {value!r}" if not isinstance(value, (list, dict)) \
        else names[type(value)]


def _example(meta) -> str:
    ex = meta.get("example")
    if isinstance(ex, str):
        return f'"{ex}"'
    if isinstance(ex, bool):
        return "true" if ex else "false"
    if isinstance(ex, tuple):
        return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else "{ ... }" for x in ex) + "]"
    return repr(ex)


class _Loader:
    """Turns a parsed TOML document into dataclasses, or raises SiteError."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, problem: str, hint: str = "") -> typing.NoReturn:
        raise SiteError(self.path, key, problem, hint)

    def value(self, tp, raw, key: str, meta: Mapping):
        optional, tp = _is_optional(tp)
        if raw is None and optional:
            return None
        origin = typing.get_origin(tp)
        if dataclasses.is_dataclass(tp):
            if tp is Tolerance and isinstance(raw, list):
                return self.tolerance(raw, key)
            if not isinstance(raw, dict):
                self.fail(key, f"expected a table, got {_describe(raw)}", f"write [{key}] with its keys")
            return self.table(tp, raw, key)
        if origin is Literal:
            choices = typing.get_args(tp)
            if not isinstance(raw, str):
                self.fail(key, f"expected one of {', '.join(choices)}, got {_describe(raw)}")
            if raw not in choices:
                self.fail(key, f"'{raw}' is not one of {', '.join(choices)}", did_you_mean(raw, choices))
            return raw
        if tp is Version:
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                self.fail(key, f"expected a version string, got {_describe(raw)}", f'quote it: {key.rsplit(".", 1)[-1]} = "{raw}"')
            if not isinstance(raw, str) or not Version.PATTERN.match(raw):
                self.fail(key, f"{raw!r} is not a version", f"write e.g. {_example(meta)}")
            return Version(raw)
        if origin is tuple:
            item_tp = typing.get_args(tp)[0]
            if not isinstance(raw, list):
                self.fail(key, f"expected an array, got {_describe(raw)}", f"write e.g. {key.rsplit('.', 1)[-1]} = {_example(meta)}")
            return tuple(self.value(item_tp, item, f"{key}[{i}]", {}) for i, item in enumerate(raw))
        if origin in (Mapping, dict, typing.get_origin(Mapping[str, str])):
            val_tp = typing.get_args(tp)[1]
            if not isinstance(raw, dict):
                self.fail(key, f"expected a table, got {_describe(raw)}")
            return types.MappingProxyType({k: self.value(val_tp, v, f"{key}.{k}", {}) for k, v in raw.items()})
        if tp is bool:
            if not isinstance(raw, bool):
                self.fail(key, f"expected true or false, got {_describe(raw)}", "write true or false without quotes")
            return raw
        if tp is int:
            if isinstance(raw, bool) or not isinstance(raw, int):
                self.fail(key, f"expected an integer, got {_describe(raw)}", "write a whole number without quotes")
            if raw < 0:
                self.fail(key, f"expected a non-negative integer, got {raw}")
            return raw
        if tp is float:
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                self.fail(key, f"expected a number, got {_describe(raw)}", "write a number without quotes")
            return float(raw)
        if tp is str:
            if not isinstance(raw, str):
                self.fail(key, f"expected a string, got {_describe(raw)}", f'quote it: "{raw}"')
            return raw
        raise TypeError(f"unsupported schema type {tp!r}")  # pragma: no cover - schema bug

    def table(self, cls, raw: Mapping, prefix: str):
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
        for k in raw:
            if k not in fields:
                self.fail(f"{prefix}.{k}" if prefix else k, "unknown key", did_you_mean(k, fields))
        kwargs = {}
        for name, f in fields.items():
            key = f"{prefix}.{name}" if prefix else name
            if name in raw:
                kwargs[name] = self.value(hints[name], raw[name], key, f.metadata)
            elif f.default is dataclasses.MISSING:
                if dataclasses.is_dataclass(_is_optional(hints[name])[1]):
                    kwargs[name] = self.table(hints[name], {}, key)
                else:
                    self.fail(key, "missing required key", f"add e.g. {name} = {_example(f.metadata)}")
            elif f.default is None and typing.get_origin(hints[name]) is Mapping:
                kwargs[name] = types.MappingProxyType({})
            elif f.default is None and dataclasses.is_dataclass(_is_optional(hints[name])[1]):
                kwargs[name] = self.table(_is_optional(hints[name])[1], {}, key)
        return cls(**kwargs)

    def tolerance(self, raw: list, key: str) -> Tolerance:
        if len(raw) != 4 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw[:3]) \
                or not isinstance(raw[3], str):
            self.fail(key, "expected [reference, lower, upper, unit]", 'write e.g. [1.0, -0.05, 0.10, "ratio"]')
        return Tolerance(reference=float(raw[0]), lower=float(raw[1]), upper=float(raw[2]), unit=raw[3])


def _check(site: Site, fail) -> None:
    """Cross-field rules: combinations that cannot work."""
    if site.schema != SCHEMA_VERSION:
        fail("schema", f"schema {site.schema} is not supported", f"this gen-recipe reads schema = {SCHEMA_VERSION}")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", site.name):
        fail("name", f"'{site.name}' is not a valid site name", "use lower-case letters, digits, '-' and '_'")
    if site.gpu.stack not in STACK_OF_VENDOR[site.gpu.vendor]:
        fail("gpu.stack", f"{site.gpu.stack} does not fit {site.gpu.vendor} GPUs",
             f"use {' or '.join(STACK_OF_VENDOR[site.gpu.vendor])}")
    if site.gpu.stack != "none":
        if site.gpu.version is None:
            fail("gpu.version", f"missing the {site.gpu.stack} version", 'add e.g. version = "6.2.4"')
        if site.gpu.count_per_node < 1:
            fail("gpu.count_per_node", "a GPU stack needs at least one GPU per node", "set count_per_node = 1 or more")
    if site.gpu.stack not in site.images:
        fail("images", f"no base images for the GPU stack '{site.gpu.stack}'", f"add an [images.{site.gpu.stack}] table")
    for stack in site.images:
        if stack not in typing.get_args(GpuStack):
            fail(f"images.{stack}", "unknown GPU stack", did_you_mean(stack, typing.get_args(GpuStack)))
    abi = ABI_OF_FLAVOUR[site.mpi.flavour]
    if site.mpi.abi is not None and site.mpi.abi != abi:
        fail("mpi.abi", f"{site.mpi.flavour} has the {abi} ABI, not {site.mpi.abi}", f'write abi = "{abi}" or leave it out')
    if site.mpi.flavour != "none" and site.mpi.version is None:
        fail("mpi.version", f"missing the exact {site.mpi.flavour} version", 'add e.g. version = "4.1.0"')
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
    for i, name in enumerate(names):
        if name in names[:i]:
            fail(f"runtimes[{i}].name", f"runtime '{name}' is listed twice", "keep one [[runtimes]] table per runtime")
    if site.container.runtime not in names:
        fail("container.runtime", f"'{site.container.runtime}' is not in [[runtimes]]", did_you_mean(site.container.runtime, names))
    if site.container.mpi_mode == "bind":
        if site.mpi.flavour == "none":
            fail("container.mpi_mode", "bind mode needs a host MPI", 'use mpi_mode = "hybrid" or set [mpi]')
        if site.container.mpi_mode not in site.runtime().mpi_modes:
            fail("container.mpi_mode", f"runtime {site.container.runtime} does not support bind mode here",
                 f"use one of {', '.join(site.runtime().mpi_modes)}")
    for k in site.tolerances:
        if k not in WORKLOADS:
            fail(f"tolerances.{k}", "unknown workload", did_you_mean(k, WORKLOADS))
    for k, tol in site.tolerances.items():
        if not tol.lower <= 0 <= tol.upper:
            fail(f"tolerances.{k}", "lower must be <= 0 <= upper", "e.g. [1.0, -0.05, 0.10, \"ratio\"]")
    tables = [("host", site.host), ("gpu", site.gpu), ("mpi", site.mpi), ("fabric", site.fabric),
              ("container", site.container), ("container.bind", site.container.bind), ("software", site.software)]
    tables += [(f"runtimes[{i}]", r) for i, r in enumerate(site.runtimes)]
    for key, table in tables:
        for tag in table.sources:
            if tag not in site.sources:
                fail(f"{key}.sources", f"source '{tag}' is not in [sources]", did_you_mean(tag, site.sources))
        fieldnames = [f.name for f in dataclasses.fields(table)]
        for name in table.unverified:
            if name not in fieldnames:
                fail(f"{key}.unverified", f"'{name}' is not a key of [{key}]", did_you_mean(name, fieldnames))


def parse(text: str, path: str) -> Site:
    """Parse and validate the text of a site file; `path` is used in messages."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"line {m.group(1)}, column {m.group(2)}" if m else "syntax"
        raise SiteError(path, where, "invalid TOML: " + re.sub(r"\s*\(at .*\)$", "", msg),
                        "fix the TOML syntax") from None
    loader = _Loader(path)
    site = loader.table(Site, raw, "")
    site = dataclasses.replace(site, path=path)
    _check(site, loader.fail)
    return site


def builtin_names() -> dict[str, str]:
    """Shipped site names (and aliases) → canonical name."""
    names = {}
    for entry in sorted(resources.files("generator.sites").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml") and not entry.name.startswith("_"):
            name = entry.name[:-5]
            names[name] = name
            raw = tomllib.loads(entry.read_text(encoding="utf-8"))
            for alias in raw.get("aliases", []):
                names[alias] = name
    return names


def load(name_or_path: str) -> Site:
    """Load a shipped site by name or alias, or a site file by path."""
    if name_or_path.endswith(".toml") or "/" in name_or_path or Path(name_or_path).is_file():
        path = Path(name_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SiteError(str(path), "", f"cannot read site file: {exc.strerror}",
                            "check the path, or give a site name (gen-recipe --list-sites)") from None
        except UnicodeDecodeError:
            raise SiteError(str(path), "", "not a UTF-8 text file", "a site file is TOML text") from None
        return parse(text, str(path))
    names = builtin_names()
    if name_or_path not in names:
        raise UsageError(f"unknown site '{name_or_path}' ({did_you_mean(name_or_path, names)}); "
                         "the path of your own site TOML works too")
    canonical = names[name_or_path]
    entry = resources.files("generator.sites") / f"{canonical}.toml"
    site = parse(entry.read_text(encoding="utf-8"), f"sites/{canonical}.toml")
    if site.name != canonical:
        raise SiteError(site.path, "name", f"'{site.name}' differs from the file name", f'write name = "{canonical}"')
    return site
