"""The runtime registry: one `Platform` entry per container runtime, carrying everything the project
knows about it (ReFrame calls these container platforms): its name, binary, pure command builder, image
form, GPU and device flags, how `gen-recipe detect` finds it (`VersionProbe`) and, where the suite and
`gen-recipe build` can make its image from a local podman build, that local form (converted by
`generator.images.convert`). The site schema's runtime names are this table's keys; the launch scripts,
detection, conversion and the suite read the entries. Adding a runtime is one entry here plus its tests
(docs/architecture.md).

The builders are pure: (site, image, command, options) → `Command`. A `Command` is what a caller runs:
`argv`, the environment to export first (`env`: Apptainer's APPTAINERENV_* / APPTAINER_BINDPATH /
APPTAINER_CONTAINLIBS, variables that Sarus copies in), options for the launcher line (`launcher_args`:
the CSCS container engine's `srun --environment=NAME`), files to write first (`files`: the engine's EDF)
and one-off set-up commands (`setup`: a user-space runtime's execution mode, `ch-fromhost --nvidia`).
Nothing here runs anything or reads the machine: tests compare the results with golden files,
`generator.run.launch` prints them into batch scripts and `build`/the suite run them with subprocess.

Values may reference host variables (`$CRAY_MPICH_ROOTDIR/gtl/lib`, `${SCRATCH}`): a launch
script expands them; Python callers use `generator.run.runtimes.expand()`.

Modes: *bind* mounts the host MPI, libfabric and their dependencies at the paths of
`site.container.bind` and sets `site.container.bind.env`; *hybrid* uses the container's own MPI,
one container per rank started by the host launcher.

This module imports nothing of the project: the site model (`generator.model.site`) imports it for the
runtime names, so the builders name the site's type without importing it.
"""

from __future__ import annotations

import functools
import re
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Site = Any   # generator.model.site.Site, which imports this table (its type named, not imported: no cycle)


@dataclass(frozen=True, kw_only=True)
class Options:
    """What a run asks of the runtime beyond the site's defaults."""

    mode: str = "hybrid"                      # bind | hybrid
    gpus: int = 0                             # GPUs per node the run uses (0: none passed in)
    mpi: bool = False                         # one of several ranks started by an MPI launcher
    ranks_per_node: int = 0                   # with mpi: ranks per node when the caller knows it (ch-run --join-ct)
    binds: tuple[str, ...] = ()               # extra SRC[:DST] mounts
    env: Mapping[str, str] = field(default_factory=dict)   # extra environment inside the container
    allow_root: bool = False                  # runs as root: udocker --allow-root, podman ranks --user=0
    execmode: str = "P1"                      # udocker execution mode (P1 = PRoot, as in the IFCA study)
    interactive: bool = False                 # keep stdin open (workloads' --serve mode reads it)
    cgroup_parent: str = ""                   # podman/docker: where the container's cgroup goes ("": the runtime's own)
    host_cgroupns: bool = False               # podman/docker: the host's cgroup namespace (the container sees where it is)


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # export before running argv
    launcher_args: tuple[str, ...] = ()                   # for the launcher line (srun ...)
    files: Mapping[str, str] = field(default_factory=dict)  # write before running: path → text
    setup: tuple[tuple[str, ...], ...] = ()               # run once before (per node)

    def __post_init__(self) -> None:  # read-only views, whatever the builder passed
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "env", types.MappingProxyType(dict(self.env)))
        object.__setattr__(self, "files", types.MappingProxyType(dict(self.files)))

    def standalone(self) -> tuple[str, ...]:
        """argv for a run without a launcher (the container engine still needs srun)."""
        return ("srun", *self.launcher_args, *self.argv) if self.launcher_args else self.argv


# Host namespaces a hybrid MPI rank needs in an OCI runtime (Red Hat's podman + mpirun recipe).
MPI_NAMESPACES = ("--ipc=host", "--net=host", "--pid=host")
# Launcher variables an OCI container must be given explicitly (podman expands the wildcards).
MPI_PASS_ENV = ("OMPI_*", "PMIX_*", "PMI_*", "SLURM_*")
# Open MPI's session directory (the PMIx server's socket) is under /tmp, owned by the launching user.
MPI_SESSION_BIND = "/tmp:/tmp"
# Install prefixes shared with everything else on a host: an MPI there has no prefix of its own.
SYSTEM_PREFIXES = ("", "/", "/usr", "/usr/local")
# Where the suite and `gen-recipe build` keep images converted for Charliecloud and udocker.
LOCAL_IMAGE_DIR = Path("build") / "images"


def split_bind(spec: str) -> tuple[str, str]:
    """'SRC[:DST]' → (SRC, DST); DST defaults to SRC."""
    src, _, dst = spec.partition(":")
    return src, dst or src


# Where each per-user kernel cache a torch job writes goes (under one node-local folder per job): Inductor's
# and Triton's (torch.compile), and the GPU stack's own JIT caches.
KERNEL_CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}
STACK_CACHES = {"rocm": {"MIOPEN_USER_DB_PATH": "miopen", "MIOPEN_CUSTOM_CACHE_DIR": "miopen"},
                "cuda": {"CUDA_CACHE_PATH": "cuda"}}


def kernel_cache_env(site: Site, root: str) -> dict[str, str]:
    """The kernel caches' variables of `site`'s GPU stack, each a folder under `root` (each library makes
    its folder when it first writes)."""
    return {k: f"{root}/{v}" for k, v in {**KERNEL_CACHES, **STACK_CACHES.get(site.gpu.stack, {})}.items()}


CACHE_BIND = "${GEN_RECIPE_KERNEL_BIND}"     # what a launch script mounts for the caches (launch.script sets it)


def cache_binds(site: Site, runtime: str, bind: str = CACHE_BIND) -> tuple[str, ...]:
    """What a container must mount to see the kernel caches' folder (`bind`: the script's choice, the site's
    node-local folder or a folder the user named). A runtime that does not share the host's /tmp mounts `bind`
    whatever the site mounts in every run: the folder the user named is not among those (the node-local folder
    may be, mounted twice then, which the runtimes take). Runtimes that share /tmp (Apptainer, Singularity,
    Charliecloud) need nothing where the node-local folder is /tmp or the site mounts it in every run, and see
    a folder of the user's only where they mount it anyway (docs/launch.md)."""
    if not PLATFORMS[runtime].shares_tmp:
        return (bind,)
    tmp = site.host.local_tmp
    return () if tmp == "/tmp" or any(split_bind(b)[0] == tmp for b in site.container.binds) else (tmp,)


def oci_volume(spec: str) -> str:
    """A bind as podman's/docker's `-v` takes it: SRC alone there is an anonymous volume at SRC, not the host's
    folder, so SRC becomes SRC:SRC."""
    return spec if ":" in spec else f"{spec}:{spec}"


def site_binds(site: Site, opts: Options) -> tuple[str, ...]:
    """The bind-mode paths, then the paths mounted in every run; extras from `opts` are not included."""
    binds = (site.container.bind.paths if opts.mode == "bind" else ()) + site.container.binds
    return tuple(dict.fromkeys(binds))


def libraries(site: Site, opts: Options) -> tuple[str, ...]:
    return site.container.bind.libraries if opts.mode == "bind" else ()


def container_env(site: Site, opts: Options, *, bind_env: bool = True) -> dict[str, str]:
    """Environment inside the container: the fabric's collectives settings, the site's, the bind-mode
    one (unless the runtime sets that itself: `bind_env=False`), then the run's own."""
    env = dict(site.fabric.collectives.env) | dict(site.container.env)
    if opts.mode == "bind" and bind_env:
        env.update(site.container.bind.env)
    env.update(opts.env)
    return env


# GPU flags that bind the host's GPU user-space libraries ahead of the image's: given only where the two are one
# release series (Site.gpu_user_space). --nv stays: it binds the driver's libraries, which only the host has.
HOST_LIBRARY_FLAGS = ("--rocm",)


def _gpu(runtime: str, site: Site, opts: Options) -> tuple[str, ...]:
    return gpu_flags(site, runtime) if opts.gpus else ()


def gpu_flags(site: Site, runtime: str) -> tuple[str, ...]:
    """The runtime's flags that give a container the site's GPUs."""
    flags = PLATFORMS[runtime].gpu_flags.get(site.gpu.vendor, ())
    host_libraries = site.gpu_user_space().host_libraries
    return tuple(f for f in flags if host_libraries or f not in HOST_LIBRARY_FLAGS)


def _gpu_setup(runtime: str, site: Site, opts: Options, image: str) -> tuple[tuple[str, ...], ...]:
    make = PLATFORMS[runtime].gpu_setup.get(site.gpu.vendor) if opts.gpus else None
    return (make(image),) if make else ()


def _devices(runtime: str, site: Site) -> tuple[str, ...]:
    flag = PLATFORMS[runtime].device_flag
    return tuple(f"{flag}={d}" for d in site.fabric.devices) if flag else ()


def _interactive(runtime: str, opts: Options) -> tuple[str, ...]:
    flag = PLATFORMS[runtime].interactive_flag
    return (flag,) if flag and opts.interactive else ()


# -- one builder per runtime --------------------------------------------------------------

def apptainer(site: Site, image: str, command: Sequence[str], opts: Options, name: str = "apptainer") -> Command:
    """`apptainer exec`: binds and bind-mode libraries through APPTAINER_BINDPATH/_CONTAINLIBS and
    the environment through APPTAINERENV_* (the OLCF recipe); SINGULARITY* for Singularity."""
    prefix = name.upper()
    env: dict[str, str] = {}
    binds = site_binds(site, opts)
    if binds:
        env[f"{prefix}_BINDPATH"] = ",".join(binds)
    if libraries(site, opts):
        env[f"{prefix}_CONTAINLIBS"] = ",".join(libraries(site, opts))
    env.update({f"{prefix}ENV_{k}": v for k, v in container_env(site, opts).items()})
    extra = ("--bind", ",".join(opts.binds)) if opts.binds else ()
    return Command((name, "exec", *_gpu(name, site, opts), *extra, image, *command), env)


def singularity(site: Site, image: str, command: Sequence[str], opts: Options) -> Command:
    return apptainer(site, image, command, opts, name="singularity")


def charliecloud(site: Site, image: str, command: Sequence[str], opts: Options) -> Command:
    """`ch-run`: the image's own environment (/ch/environment) via a bare --set-env, then ours;
    `--join` puts the ranks of a node in one namespace so that the MPI's shared-memory single-copy
    works (docs/runtimes.md §7), in bind mode too: the host's MPICH reads its peers' memory with
    process_vm_readv, refused across user namespaces (docs/bind.md). ch-run binds the host /dev
    itself. Bind destinations must exist in the image (images are mounted read-only)."""
    binds = (*site_binds(site, opts), *libraries(site, opts), *opts.binds)
    argv = ["ch-run"]
    for b in binds:
        argv += ["-b", b]
    argv.append("--set-env")
    argv += [f"--set-env={k}={v}" for k, v in container_env(site, opts).items()]
    if opts.mpi:        # --join-ct: ch-run cannot guess it under Hydra (MPICH's and Intel MPI's mpiexec)
        argv += ["--join", *([f"--join-ct={opts.ranks_per_node}"] if opts.ranks_per_node else [])]
    return Command((*argv, image, "--", *command), setup=_gpu_setup("charliecloud", site, opts, image))


def udocker(site: Site, image: str, command: Sequence[str], opts: Options) -> Command:
    """`udocker run --hostenv --hostauth --user=$USER`: `image` is a created container name (the
    host's account, as the image's numeric USER is unknown to --hostauth); the execution mode is
    set once with `udocker setup --execmode` (and `--nvidia` for NVIDIA GPUs)."""
    root = ("--allow-root",) if opts.allow_root else ()
    setup = [("udocker", *root, "setup", f"--execmode={opts.execmode}", image)]
    if opts.gpus and site.gpu.vendor == "nvidia":
        setup.append(("udocker", *root, "setup", "--nvidia", image))
    argv = ["udocker", *root, "run", "--nobanner", "--hostenv", "--hostauth", "--user=$USER"]
    for b in (*site_binds(site, opts), *libraries(site, opts), *opts.binds):
        argv += ["-v", b]
    argv += [f"--env={k}={v}" for k, v in container_env(site, opts).items()]
    return Command((*argv, image, *command), setup=tuple(setup))


def podman_hpc(site: Site, image: str, command: Sequence[str], opts: Options) -> Command:
    """`podman-hpc run`: in bind mode its `--mpi` module mounts the host Cray MPICH, the Slingshot
    devices and sets their environment (`--cuda-mpi` adds the GTL preload), so the site's
    bind paths and bind env are that module's, not repeated here."""
    argv = ["podman-hpc", "run", "--rm", *_interactive("podman-hpc", opts)]
    if opts.mode == "bind":
        argv.append("--cuda-mpi" if opts.gpus and site.gpu.vendor == "nvidia" and site.mpi.gpu_aware else "--mpi")
    else:
        if site.mpi.flavour == "openmpi" and site.mpi.pmi != "none":
            argv.append(f"--openmpi-{site.mpi.pmi}")
        argv += _devices("podman-hpc", site)
    argv += _gpu("podman-hpc", site, opts)
    for b in (*site.container.binds, *opts.binds):
        argv += ["-v", oci_volume(b)]
    argv += [f"--env={k}={v}" for k, v in container_env(site, opts, bind_env=False).items()]
    return Command((*argv, image, *command))


def sarus(site: Site, image: str, command: Sequence[str], opts: Options) -> Command:
    """`sarus run`: `--mpi` swaps in the host MPI (bind mode); Sarus copies the host environment
    into the container, so the environment is exported before the command."""
    argv = ["sarus", "run"]
    if opts.mode == "bind":
        argv.append("--mpi")
    argv += _devices("sarus", site)
    for b in (*site_binds(site, opts), *libraries(site, opts), *opts.binds):
        src, dst = split_bind(b)
        argv.append(f"--mount=type=bind,source={src},destination={dst}")
    return Command((*argv, image, *command), container_env(site, opts))


def edf_image(ref: str) -> str:
    """An OCI reference in Enroot's form: 'ghcr.io/o/img:tag' → 'ghcr.io#o/img:tag'."""
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return ref


_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_str(s: str) -> str:
    """`s` as a TOML basic string: backslash, quote and every control character escaped (TOML 1.0)."""
    return '"' + re.sub(r'[\\"\x00-\x1f\x7f]', lambda m: _TOML_ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), s) + '"'


def toml_key(s: str) -> str:
    """`s` as a TOML key: bare when it may be, else quoted."""
    return s if re.fullmatch(r"[A-Za-z0-9_-]+", s) else toml_str(s)


def edf(site: Site, image: str, opts: Options) -> str:
    """The CSCS container engine's environment definition file (TOML)."""
    lines = [f"image = {toml_str(edf_image(image) if not image.startswith('/') else image)}"]
    mounts = [*site_binds(site, opts), *libraries(site, opts), *opts.binds]
    if mounts:
        lines.append("mounts = [" + ", ".join(toml_str(m if ":" in m else f"{m}:{m}") for m in mounts) + "]")
    env = container_env(site, opts)
    if env:
        lines += ["", "[env]", *(f"{toml_key(k)} = {toml_str(v)}" for k, v in env.items())]
    if site.container.annotations:
        lines += ["", "[annotations]", *(f"{toml_str(k)} = {toml_str(v)}"
                                        for k, v in site.container.annotations.items())]
    return "\n".join(lines) + "\n"


def edf_name(image: str) -> str:
    """A file-name-safe EDF name from the image: 'ghcr.io/o/pytorch-alps:0.1.0-ab' → 'pytorch-alps-0.1.0-ab'."""
    last = image.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.-]", "-", last.split("@")[0].removesuffix(".sqsh").removesuffix(".sqfs"))


def ce(site: Site, image: str, command: Sequence[str], opts: Options) -> Command:
    """The CSCS container engine: an EDF in ~/.edf named after the image, `srun --environment=NAME`;
    mounts, environment and the hook annotations (site.container.annotations) live in the EDF."""
    name = edf_name(image)
    return Command(tuple(command), launcher_args=(f"--environment={name}",),
                   files={f"${{HOME}}/.edf/{name}.toml": edf(site, image, opts)})


def oci(site: Site, image: str, command: Sequence[str], opts: Options, name: str = "podman") -> Command:
    """`podman run` / `docker run`: --rm, mounts, environment, devices. An MPI rank gets the host
    namespaces, the launcher's variables, the host /tmp (Open MPI's session directory) and the host
    user (root: --user=0; rootless podman: --userns=keep-id), else it cannot reach the PMIx server."""
    argv = [name, "run", "--rm", *_interactive(name, opts)]
    argv += [f"--cgroup-parent={opts.cgroup_parent}"] if opts.cgroup_parent else []
    argv += ["--cgroupns=host"] if opts.host_cgroupns else []
    binds = [*site_binds(site, opts), *opts.binds]
    if opts.mpi:
        argv += MPI_NAMESPACES
        binds.append(MPI_SESSION_BIND)
    if opts.mpi or opts.binds:          # writes into the caller's folders (the kernel caches): as the caller
        if opts.allow_root:
            argv.append("--user=0")
        elif name == "podman":
            argv.append("--userns=keep-id")
    if opts.mpi and name == "podman":
        argv += [f"--env={pattern}" for pattern in MPI_PASS_ENV]
    argv += _gpu(name, site, opts)
    argv += _devices(name, site)
    for b in dict.fromkeys(oci_volume(b) for b in binds):
        argv += ["-v", b]
    for lib in libraries(site, opts):
        argv += ["-v", f"{lib}:{lib}:ro"]
    argv += [f"--env={k}={v}" for k, v in container_env(site, opts).items()]
    return Command((*argv, image, *command))


def docker(site: Site, image: str, command: Sequence[str], opts: Options) -> Command:
    return oci(site, image, command, opts, name="docker")


def udocker_env(image_dir: Path | str = LOCAL_IMAGE_DIR) -> dict[str, str]:
    """The environment udocker needs for the containers `gen-recipe` makes under `image_dir`
    (docs/runtimes.md §6): its own directory there and, for the P1 mode, Debian's PRoot through a
    wrapper without `-k`. A str is a launch script's expression (`${PWD}/build/images`), kept as it is."""
    home = (image_dir / "udocker").absolute() if isinstance(image_dir, Path) else f"{image_dir}/udocker"
    return {"UDOCKER_DIR": str(home), "UDOCKER_USE_PROOT_EXECUTABLE": f"{home}/proot-nok"}


@dataclass(frozen=True, kw_only=True)
class VersionProbe:
    """How `gen-recipe detect` finds a runtime: a read-only command that prints its version."""

    key: str                                  # the command as detect shows it; names its recorded output
    argv: tuple[str, ...] = ()                # what runs, when it is not the key's words
    version: str = ""                         # regular expression whose first group is the version
    parser: str = ""                          # else: a parser of generator.detect.parsers for its output
    clue: str = ""                            # the fact it gives when not the runtime's own (runtimes.<clue>): detect.facts combines
    also: tuple[str, ...] = ()                # other probes whose output may name it (a compatibility link)
    scratch_env: Mapping[str, str] = field(default_factory=dict)  # writes into $HOME even for --version: these
                                              # variables point into detect's scratch directory (relative paths)
    preference: int = 0                       # detect's default runtime: the one found with the lowest

    @property
    def command(self) -> tuple[str, ...]:
        return self.argv or tuple(self.key.split())


@dataclass(frozen=True, kw_only=True)
class Platform:
    """Everything the project knows about one container runtime (ReFrame calls these container platforms).

    Adding a runtime is one entry in PLATFORMS plus its tests (docs/architecture.md)."""

    name: str
    binary: str                                       # the program that must be on PATH to run it
    build: Callable[[Site, str, Sequence[str], Options], Command]   # the pure command builder
    image: str                                        # what it runs: sif | oci | directory | container | edf
    pull: str                                         # how a pushed image {ref} becomes {image}, said in launch scripts
    probe: VersionProbe                               # how `gen-recipe detect` finds it
    gpu_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # by GPU vendor
    gpu_setup: Mapping[str, Callable[[str], tuple[str, ...]]] = field(default_factory=dict)  # set-up by vendor
    device_flag: str = ""                             # hides the host /dev: fabric devices one by one
    interactive_flag: str = ""                        # closes stdin unless asked
    local_image: str = ""                             # the image form generator.images.convert makes from a local
                                                      # podman build (oci | directory | container); "" = needs --image
    local_env: Callable[..., Mapping[str, str]] = lambda image_dir=LOCAL_IMAGE_DIR: {}  # environment the locally
                                                      # made images (under image_dir) need
    shares_tmp: bool = False                          # the host's /tmp is the container's by default
    inherits_fds: bool = True                         # a rank in it keeps the launcher's open files (Hydra's PMI_FD)
    makes_mount_points: bool = True                   # a bind's destination missing in the image is made at run time
                                                      # (False: the image is mounted read-only, the image must hold it)

    @property
    def built_here(self) -> bool:
        """gen-recipe build makes the image this runtime runs (a SIF, or a local form); else it is pulled by reference."""
        return self.image == "sif" or bool(self.local_image)


_SIF = "sif"
_BARE_VERSION = r"^\s*([0-9]+\.[0-9]+\S*)\s*$"                # tools that print the version alone
PLATFORMS: Mapping[str, Platform] = {p.name: p for p in (
    # GPU flags missing below: Charliecloud and the user-space runtime see the host /dev and get NVIDIA libraries
    # by a set-up step; Sarus and the container engine enable their NVIDIA hook themselves.
    Platform(name="apptainer", binary="apptainer", build=apptainer, image=_SIF,
             pull="apptainer pull {image} oras://{ref}",
             probe=VersionProbe(key="apptainer --version", version=r"apptainer version (\S+)",
                                also=("singularity --version",), preference=1),
             gpu_flags={"amd": ("--rocm",), "nvidia": ("--nv",)}, shares_tmp=True),     # its default binds: /tmp
    Platform(name="singularity", binary="singularity", build=singularity, image=_SIF,
             pull="singularity pull {image} docker://{ref}",     # the OCI image; oras:// is in no site's docs
             probe=VersionProbe(key="singularity --version", parser="singularity_version", preference=2),
             gpu_flags={"amd": ("--rocm",), "nvidia": ("--nv",)}, shares_tmp=True),
    Platform(name="charliecloud", binary="ch-run", build=charliecloud, image="directory",
             pull="ch-image pull {ref} && ch-convert -i ch-image {ref} {image}",
             probe=VersionProbe(key="ch-run --version", version=_BARE_VERSION, preference=6),
             gpu_setup={"nvidia": lambda image: ("ch-fromhost", "--nvidia", image)}, local_image="directory",
             shares_tmp=True,                    # ch-run shares the host's /tmp unless --private-tmp
             makes_mount_points=False),          # ch-run -b: "images are read-only by default", DST must exist
    Platform(name="udocker", binary="udocker", build=udocker, image="container",
             pull="udocker pull {ref} && udocker create --name={image} {ref}",
             probe=VersionProbe(key="udocker --version", argv=("udocker", "--allow-root", "--version"),
                                version=r"^version:\s*(\S+)", scratch_env={"HOME": "", "UDOCKER_DIR": ".udocker"},
                                preference=7),
             local_image="container", local_env=udocker_env),
    Platform(name="podman-hpc", binary="podman-hpc", build=podman_hpc, image="oci",
             pull="podman-hpc pull {ref}",
             inherits_fds=False, probe=VersionProbe(key="podman-hpc --version", parser="podman_hpc_version", preference=5),
             gpu_flags={"amd": ("--device=/dev/kfd", "--device=/dev/dri"), "nvidia": ("--gpu",)},
             device_flag="--device", interactive_flag="--interactive"),
    Platform(name="sarus", binary="sarus", build=sarus, image="oci", pull="sarus pull {ref}",
             probe=VersionProbe(key="sarus --version", version=_BARE_VERSION, preference=4),
             device_flag="--device"),
    # found by its Slurm plugin (srun --help) with enroot: generator.detect.facts combines the two
    Platform(name="ce", binary="srun", build=ce, image="edf",
             pull="",                                   # the engine imports {image} when the job starts
             probe=VersionProbe(key="enroot version", version=_BARE_VERSION, clue="enroot", preference=3)),
    # found by its client with a daemon socket: generator.detect.facts combines the two
    Platform(name="docker", binary="docker", build=docker, image="oci", pull="docker pull {ref}",
             inherits_fds=False, probe=VersionProbe(key="docker --version", parser="docker_version", clue="docker_client", preference=9),
             gpu_flags={"amd": ("--device=/dev/kfd", "--device=/dev/dri", "--group-add=video"),
                        "nvidia": ("--gpus=all",)},
             device_flag="--device", interactive_flag="--interactive"),
    Platform(name="podman", binary="podman", build=oci, image="oci",
             pull="podman pull {ref}",
             inherits_fds=False, probe=VersionProbe(key="podman --version", version=r"podman version (\S+)", preference=8),
             gpu_flags={"amd": ("--device=/dev/kfd", "--device=/dev/dri", "--group-add=keep-groups"),
                        "nvidia": ("--device=nvidia.com/gpu=all",)},          # CDI (nvidia-ctk cdi generate)
             device_flag="--device", interactive_flag="--interactive", local_image="oci"),
)}
NAMES: tuple[str, ...] = tuple(PLATFORMS)
# The order in which `gen-recipe detect` prefers a runtime found as the site's default.
DETECT_ORDER: tuple[str, ...] = tuple(sorted(PLATFORMS, key=lambda n: PLATFORMS[n].probe.preference))


# -- the runtimes' own command lines, as their sources define them (runtime_cli.toml) ------------------------

@dataclass(frozen=True)
class Cli:
    """The run-style subcommand of a runtime at one version: its options (name -> takes a value), the global
    options before it, and the source they were read from. A rehearsal's stub checks command lines with it."""

    subcommand: str
    options: Mapping[str, bool]
    global_options: Mapping[str, bool]
    source: str
    bind_options: tuple[str, ...] = ()   # the options that take bind mounts (SRC[:DST[:OPTS]], comma lists)
    bind_env: tuple[str, ...] = ()       # the environment variables that do


@functools.cache
def _cli_table() -> Mapping[str, Any]:
    return tomllib.loads((resources.files("generator.model") / "runtime_cli.toml").read_text(encoding="utf-8"))


def documented_cli(runtime: str, version: str) -> Cli | None:
    """The documented command line of `runtime` at `version` (the entry of that version, else of the same
    major.minor series), or None where runtime_cli.toml has none."""
    entries = _cli_table().get(runtime, {})
    series = ".".join(version.split(".")[:2])
    key = version if version in entries else next((v for v in entries if v.startswith(series + ".")), None)
    if key is None:
        return None
    e, binds = entries[key], _cli_table().get("binds", {}).get(runtime, {})
    return Cli(e["subcommand"], types.MappingProxyType(dict(e["options"])),
               types.MappingProxyType(dict(e.get("global", {}))), e["source"],
               tuple(binds.get("options", ())), tuple(binds.get("env", ())))


def edf_keys() -> tuple[str, ...]:
    """The top-level keys of the CSCS container engine's environment definition file (its documentation)."""
    return tuple(_cli_table()["ce"]["edf_keys"])
