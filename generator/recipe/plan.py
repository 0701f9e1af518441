"""Site facts → what goes into the images, each choice with the facts that decided it.

`plan(site)` is the single place where site facts become build decisions: which MPI the
container carries and of which version, which libfabric providers, UCX or PSM2, the
NCCL/RCCL network plugin, and where torch comes from. Recipes build from the `Plan`;
`gen-recipe --explain` prints its `decisions`.
"""

from __future__ import annotations

from dataclasses import dataclass

from generator.errors import RecipeError
from generator.model.providers import FABRIC_PROVIDERS
from generator.model.runtimes import PLATFORMS
from generator.model.site import Site, Version, gpu_mpi_enabled

# Cray MPICH series → the MPICH release an image should build so that its libmpi.so.12
# is ABI-compatible (OLCF: cpe images 23.12-25.03 carry MPICH 3.4.3 for cray-mpich 8.1.x; the
# gpu_aware_mpi_example builds MPICH 4.1.2 for cray-mpich 9.0.x).
CRAY_MPICH_TO_MPICH = {"8.1": "3.4.3", "9.0": "4.1.2", "9.1": "4.1.2"}
CONTAINER_FLAVOUR = {"cray-mpich": "mpich", "mpich": "mpich", "intel-mpi": "intel-mpi", "openmpi": "openmpi",
                     "none": "none"}
# Fabric provider → libfabric providers to build (the fabric provider registry's entries).
LIBFABRIC_PROVIDERS = {p.name: p.libfabric for p in FABRIC_PROVIDERS.values()}
NET_PLUGIN = {"rocm": "aws-ofi-rccl", "cuda": "aws-ofi-nccl"}
MPI_LABEL = {"mpich": "MPICH", "intel-mpi": "Intel MPI", "openmpi": "Open MPI", "cray-mpich": "Cray MPICH"}
# The distribution packages of each MPI flavour (blocks.mpi.DISTRO_MPI), whose pins must agree with mpi_version.
DISTRO_MPI_PACKAGES = {"openmpi": ("libopenmpi-dev", "openmpi-bin", "libopenmpi3"),
                       "mpich": ("libmpich-dev", "mpich", "libmpich12")}
# The MPI that Debian's and Ubuntu's python3-mpi4py is built for (their default MPI on x86-64): with another
# distribution MPI, mpi4py comes from its wheel, which loads the MPI library at run time (mpi4py >= 4.0).
DISTRO_DEFAULT_MPI = "openmpi"
# Where each GPU stack lives in its base images (what CUDA-aware builds and the plugin build against).
GPU_HOME = {"rocm": "/opt/rocm", "cuda": "/usr/local/cuda"}


@dataclass(frozen=True)
class Decision:
    what: str
    value: str
    because: str
    facts: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ContainerMpi:
    flavour: str          # mpich | intel-mpi | openmpi | none
    version: Version | None
    source: str           # source | distro | vendor
    libfabric_based: bool


@dataclass(frozen=True, kw_only=True)
class Plan:
    mpi: ContainerMpi
    libfabric: Version | None
    providers: tuple[str, ...]
    libcxi: str
    psm2: bool
    ucx: Version | None
    verbs: bool
    net_plugin: str
    net_plugin_version: Version | None
    xpmem: Version | None  # the XPMEM user library the container MPICH uses within a node
    gpu_memory: str        # "cuda" / "rocm": libfabric (and MPICH where it can) take GPU buffers; "" otherwise
    mpi_gpu: str           # "cuda" / "rocm": the container MPICH is built GPU-aware; "" otherwise
    torch_index: str
    torch_wheel: str
    gpu_home: str          # the GPU stack's prefix in the base image ("" for CPU images)
    cuda_home: str         # gpu_home when the stack is CUDA: Open MPI, UCX and GDRCopy are built CUDA-aware
    pmix: str              # Open MPI's PMIx: "internal" when the launcher speaks PMIx, else ""
    mpi4py: str            # source (built against the container MPI) | distro (its python3-mpi4py) | wheel | none
    rocm_runtime: bool     # the runtime stage starts without ROCm: ROCm's libraries come from the build stage
    decisions: tuple[Decision, ...]

    @property
    def compiles(self) -> bool:
        """The build stage needs a compiler and Python headers (mpi4py from source)."""
        return self.mpi4py == "source"


def _need(site: Site, value, key: str, why: str):
    if value in (None, ""):
        raise RecipeError(f"{site.path}: software.{key}: not set, but {why} (add {key} = \"...\" under [software])")
    return value


def _container_mpi(site: Site, say) -> ContainerMpi:
    host, sw = site.mpi, site.software
    flavour = CONTAINER_FLAVOUR[host.flavour]
    if flavour == "none":
        say("container MPI", "none", "the site has no host MPI", ("mpi.flavour",))
        return ContainerMpi(flavour="none", version=None, source="distro", libfabric_based=False)
    if host.flavour == "cray-mpich":
        if sw.mpi_version:
            version = sw.mpi_version
            why = f"set by software.mpi_version; cray-mpich {host.version} has the MPICH ABI (libmpi.so.12)"
            facts = ("mpi.flavour", "mpi.version", "software.mpi_version")
        else:
            series = host.version.series(2)
            if series not in CRAY_MPICH_TO_MPICH:
                raise RecipeError(f"{site.path}: no MPICH release known to match cray-mpich {host.version} "
                                  "(set software.mpi_version to an ABI-compatible MPICH)")
            version = Version(CRAY_MPICH_TO_MPICH[series])
            why = (f"cray-mpich {series}.x has the MPICH ABI (libmpi.so.12); images for it build MPICH {version} "
                   f"with ch4:ofi and swap in the host library at run time")
            facts = ("mpi.flavour", "mpi.version")
        say("container MPI", f"MPICH {version} (ch4:ofi, dynamically linked)", why, facts)
        return ContainerMpi(flavour="mpich", version=version, source="source", libfabric_based=True)
    version = sw.mpi_version or host.version
    if sw.mpi_version and sw.mpi_source == "distro":       # the packages the image installs name the version
        pinned = {p: v for p, v in sw.distro_pins.items() if p in DISTRO_MPI_PACKAGES.get(flavour, ())}
        wrong = {p: v for p, v in pinned.items() if not v.split(":")[-1].startswith(f"{sw.mpi_version}-")}
        if wrong:
            name, pin = next(iter(wrong.items()))
            raise RecipeError(f"{site.path}: software.mpi_version {sw.mpi_version} differs from software.distro_pins."
                              f"{name} = \"{pin}\": the image installs that package (make the two agree)")
    if sw.mpi_version and sw.mpi_version != host.version and flavour == "mpich" and host.abi == "mpich":
        say("container MPI", f"MPICH {version} ({'distro packages' if sw.mpi_source == 'distro' else sw.mpi_source})",
            f"set by software.mpi_version; the host's MPICH {host.version} has the same ABI (libmpi.so.12): bind mode "
            "swaps it in at run time, hybrid mode runs the image's own", ("mpi.abi", "mpi.version", "software.mpi_version"))
        return ContainerMpi(flavour="mpich", version=version, source=sw.mpi_source, libfabric_based=True)
    if sw.mpi_version and sw.mpi_version != host.version:
        raise RecipeError(f"{site.path}: software.mpi_version {sw.mpi_version} differs from the host's "
                          f"{host.flavour} {host.version}: an image with {MPI_LABEL.get(host.flavour, host.flavour)} must carry the host's "
                          "exact version (remove software.mpi_version)")
    source = {"intel-mpi": "vendor"}.get(flavour, sw.mpi_source)
    label = MPI_LABEL[flavour]
    say("container MPI", f"{label} {version} ({'distro packages' if source == 'distro' else source})",
        f"the host runs {host.flavour} {host.version} and hybrid/bind runs need the same version in the image",
        ("mpi.flavour", "mpi.version", "software.mpi_source"))
    return ContainerMpi(flavour=flavour, version=version, source=source, libfabric_based=flavour != "openmpi")


def plan(site: Site) -> Plan:
    """Decide what the images for `site` carry."""
    decisions: list[Decision] = []

    def say(what, value, because, facts):
        decisions.append(Decision(what, value, because, tuple(facts)))

    base = site.base
    say("base images", f"{base.devel} (build) / {base.runtime} (runtime)",
        f"the site's GPU stack is {site.gpu.stack}" + (f" {site.gpu.version}" if site.gpu.version else ""),
        ("gpu.stack", "gpu.version", f"images.{site.gpu.stack}"))
    mpi = _container_mpi(site, say)
    libfabric, providers, libcxi, psm2 = _libfabric(site, mpi, say)
    ucx, verbs = _ucx(site, mpi, say)
    plugin, plugin_version = _net_plugin(site, providers, say)
    xpmem = _xpmem(site, mpi, say)
    gpu_memory, mpi_gpu = _gpu_memory(site, mpi, plugin, libcxi, say)
    _torch(site, say)
    gpu_home, cuda_home, pmix, mpi4py = _builds(site, mpi, say)
    rocm_runtime = site.gpu.stack == "rocm" and base.runtime != base.devel
    if rocm_runtime:
        say("ROCm runtime", f"the libraries the image's programs load, copied from {base.devel} to {base.runtime}",
            "AMD publishes no runtime-only ROCm image; the runtime stage starts from the distribution and takes "
            "only ROCm's runtime libraries (ldd closure and dlopen'ed ROCr), not its compilers and headers",
            (f"images.{site.gpu.stack}",))
    _delivery(site, say)
    mode = site.container.mpi_mode
    say("MPI mode", mode, "host MPI mounted into the container at run time" if mode == "bind"
        else "the container's own MPI, matching the host's, launched by the host launcher",
        ("container.mpi_mode",))
    sw = site.software
    return Plan(mpi=mpi, libfabric=libfabric, providers=providers, libcxi=libcxi, psm2=psm2, ucx=ucx,
                verbs=verbs, net_plugin=plugin, net_plugin_version=plugin_version, xpmem=xpmem, gpu_memory=gpu_memory,
                mpi_gpu=mpi_gpu, torch_index=sw.torch_index,
                torch_wheel=sw.torch_wheel, gpu_home=gpu_home, cuda_home=cuda_home, pmix=pmix, mpi4py=mpi4py,
                rocm_runtime=rocm_runtime, decisions=tuple(decisions))


BUILD_PATH = {"user": "built at the site by a plain user (gen-recipe build; Apptainer >= 1.1 and SingularityCE >= 4 "
                      "need no --fakeroot)",
              "fakeroot": "built at the site with --fakeroot (gen-recipe build adds it for a plain user)",
              "none": "not built at the site: built and pushed elsewhere (gen-recipe build --push; the image workflow), "
                      "then pulled there (gen-recipe launch --registry prints the line)"}


def _delivery(site: Site, say) -> None:
    """How images reach the site, whose GPU libraries they run with, and whether MPI is GPU-aware in them."""
    how = BUILD_PATH[site.container.build]
    if site.container.build != "none" and not PLATFORMS[site.container.runtime].built_here:
        how += (f"; {site.container.runtime} runs it from a registry: pushed (gen-recipe build --push), then pulled "
                "(gen-recipe launch --registry prints the line)")
    if site.container.image_from == "file":
        how = ("made where there is internet and copied in as one file with its .sha256 (gen-recipe build --export); "
               "the job checks it")
    say("image delivery", how, "the site's documentation says where images can be built and how they reach the "
        "compute nodes", ("container.build", "container.image_from", "container.runtime"))
    gpu = site.gpu_user_space()
    if gpu.stack != "none":
        value = {True: f"the host's {'ROCm libraries (--rocm)' if gpu.stack == 'rocm' else 'driver libraries'} "
                       f"({gpu.stack} {gpu.host}), with the images' {gpu.stack} {gpu.image}",
                 False: f"the image's own {gpu.stack} {gpu.image} (no --rocm)"}[gpu.host_libraries]
        say("GPU libraries in containers", value, gpu.why, ("gpu.version", f"images.{gpu.stack}.version",
                                                           f"images.{gpu.stack}.devel"))
    if site.mpi.flavour == "cray-mpich" and site.gpu.stack != "none":
        on = [key for key, env in (("container.env", site.container.env), ("container.bind.env", site.container.bind.env))
              if gpu_mpi_enabled(env.get("MPICH_GPU_SUPPORT_ENABLED", "0"))]
        say("GPU-aware MPI in containers", f"Cray MPICH's GPU support with its GTL library preloaded ({', '.join(on)})"
            if on else "off: MPICH_GPU_SUPPORT_ENABLED does not turn it on (GPU buffers go through the collectives library)",
            "the containers' programs are not linked to Cray MPICH's GTL library: MPICH_GPU_SUPPORT_ENABLED=1 without "
            "it preloaded fails (a site file that sets one without the other is refused)",
            tuple(f"{k}.{v}" for k in on for v in ("MPICH_GPU_SUPPORT_ENABLED", "LD_PRELOAD")) or ("mpi.flavour",))


def _libfabric(site: Site, mpi: ContainerMpi, say) -> tuple[Version | None, tuple[str, ...], str, bool]:
    """libfabric (version, providers) when the container MPI uses it; libcxi and libpsm2 for its providers."""
    sw, provider = site.software, site.fabric.provider
    providers = LIBFABRIC_PROVIDERS[provider]
    needs_libfabric = mpi.source != "distro" and (
        (mpi.flavour == "mpich") or (bool(providers) and mpi.flavour in ("intel-mpi", "openmpi")))
    libfabric = None
    if needs_libfabric:
        libfabric = _need(site, sw.libfabric, "libfabric", f"{mpi.flavour} on {site.fabric.kind} uses libfabric")
        shown = ", ".join(providers) if providers else "tcp, shm (built in)"
        say("libfabric", f"{libfabric} with providers {shown}",
            f"the fabric is {site.fabric.kind} with the {provider} provider", ("fabric.kind", "fabric.provider",
                                                                                "software.libfabric"))
    else:
        providers = ()
    libcxi = ""
    if "cxi" in providers:
        libcxi = _need(site, sw.libcxi, "libcxi", "the cxi provider needs HPE's libcxi")
        say("libcxi", libcxi, "libfabric's cxi provider (Slingshot) builds against HPE's open-source libcxi",
            ("fabric.provider", "software.libcxi"))
    psm2 = "psm2" in providers
    if psm2:
        say("libpsm2", "from the distribution (libpsm2-2)", "Omni-Path: libfabric's psm2 provider needs libpsm2 "
            "in the image (without it MPI silently falls back to TCP)", ("fabric.kind", "fabric.provider"))
    return libfabric, providers, libcxi, psm2


def _ucx(site: Site, mpi: ContainerMpi, say) -> tuple[Version | None, bool]:
    """UCX for a source-built Open MPI on InfiniBand; whether the image carries verbs."""
    ucx = None
    verbs = site.fabric.kind == "infiniband" and mpi.source != "distro"
    if mpi.flavour == "openmpi" and site.fabric.provider in ("ucx", "verbs") and mpi.source != "distro":
        ucx = _need(site, site.software.ucx, "ucx", "Open MPI on InfiniBand uses UCX")
        say("UCX", f"{ucx} (with verbs)", "Open MPI on InfiniBand reaches the HCA through UCX (pml ucx)",
            ("fabric.kind", "fabric.provider", "software.ucx"))
    return ucx, verbs


def _net_plugin(site: Site, providers: tuple[str, ...], say) -> tuple[str, Version | None]:
    """The NCCL/RCCL network plugin (aws-ofi) when GPU collectives go over Slingshot."""
    if site.gpu.stack == "none" or "cxi" not in providers:
        return "", None
    plugin = NET_PLUGIN[site.gpu.stack]
    version = _need(site, site.software.aws_ofi, "aws_ofi", f"{plugin} lets {'RCCL' if plugin.endswith('rccl') else 'NCCL'} "
                    "use libfabric")
    say("collective network plugin", f"{plugin} {version}",
        f"{'RCCL' if site.gpu.stack == 'rocm' else 'NCCL'} reaches Slingshot only through libfabric",
        ("gpu.stack", "fabric.provider", "software.aws_ofi"))
    return plugin, version


def _xpmem(site: Site, mpi: ContainerMpi, say) -> Version | None:
    """The XPMEM user library, for a container MPICH."""
    sw = site.software
    if sw.xpmem and mpi.flavour == "mpich":
        say("XPMEM", f"{sw.xpmem} user library, MPICH --with-xpmem", "MPICH's shared memory within a node goes through "
            "XPMEM (CSCS: MPICH \"must be built with both libfabric and xpmem\")", ("software.xpmem", "mpi.flavour"))
        return sw.xpmem
    if sw.xpmem:
        say("XPMEM", "not built", f"software.xpmem is for a container MPICH; this image carries {mpi.flavour}",
            ("software.xpmem", "mpi.flavour"))
    return None


def _gpu_memory(site: Site, mpi: ContainerMpi, plugin: str, libcxi: str, say) -> tuple[str, str]:
    """GPU memory in libfabric (and libcxi, and MPICH where it can) when GPU collectives go over Slingshot."""
    if not plugin:
        return "", ""
    gpu_memory, mpi_gpu = site.gpu.stack, ""
    say("libfabric GPU memory", {"cuda": "--with-cuda --enable-cuda-dlopen", "rocm": "--with-rocr"}[gpu_memory],
        "NCCL/RCCL and GPU-aware MPI hand GPU buffers to libfabric (the LUMI AI Factory, CSCS and NERSC "
        "recipes build it so; Spack's libfabric +cuda/+rocm)", ("gpu.stack", "fabric.provider"))
    if libcxi:
        say("libcxi GPU support", {"cuda": "--with-cuda", "rocm": "--with-rocm"}[gpu_memory],
            "the sites' own Slingshot container recipes build libcxi so (CSCS's mpich-gpu Containerfile, "
            "the LUMI AI Factory's libfabric Containerfile)", ("gpu.stack", "software.libcxi"))
    # Spack's mpich takes +rocm from 4.1 on (+cuda from 3.4); here both from 4.1, whose yaksa is told the
    # GPU architecture (--with-cuda-sm / --with-hip-sm) instead of guessing it on a build machine without GPUs
    if mpi.flavour == "mpich" and mpi.version.parts[:2] >= (4, 1):
        mpi_gpu = gpu_memory
        say("MPICH GPU support", {"cuda": "--with-cuda", "rocm": "--with-hip"}[mpi_gpu] + f" for {site.gpu.arch}",
            "hybrid runs pass GPU buffers to the container's MPICH (CSCS: MPICH \"with CUDA support\")",
            ("gpu.stack", "gpu.arch", "mpi.version"))
    elif mpi.flavour == "mpich":
        say("MPICH GPU support", "none", f"not built into MPICH {mpi.version} (GPU support from MPICH 4.1 on here; "
            "Spack's recipe takes ROCm from 4.1): GPU-aware MPI runs in bind mode, through the host's MPI",
            ("gpu.stack", "mpi.version"))
    return gpu_memory, mpi_gpu


def _torch(site: Site, say) -> None:
    """Where torch comes from: the site's local wheel, or its wheel index for the GPU stack."""
    sw = site.software
    if sw.torch_wheel:
        say("torch", f"{sw.torch} from the build context ({sw.torch_wheel})",
            "the site builds offline from a local wheel", ("software.torch", "software.torch_wheel"))
    else:
        _need(site, sw.torch_index, "torch_index", "torch must come from a wheel index for the GPU stack")
        say("torch", f"{sw.torch} from {sw.torch_index}", f"matches the {site.gpu.stack} stack",
            ("gpu.stack", "software.torch", "software.torch_index"))


def _builds(site: Site, mpi: ContainerMpi, say) -> tuple[str, str, str, str]:
    """Where the GPU stack lives (CUDA-aware builds), Open MPI's PMIx, and how mpi4py is built."""
    gpu_home = GPU_HOME.get(site.gpu.stack, "")
    cuda_home = gpu_home if site.gpu.stack == "cuda" else ""
    if cuda_home and mpi.source != "distro":
        say("CUDA-aware builds", f"against {cuda_home}", "the GPU stack is CUDA: the MPI, UCX and GDRCopy built "
            "into the image take CUDA device buffers", ("gpu.stack",))
    pmix = "internal" if mpi.flavour == "openmpi" and mpi.source != "distro" and site.mpi.pmi == "pmix" else ""
    if pmix:
        say("Open MPI PMIx", "the bundled (internal) PMIx", "the host launcher starts ranks over PMIx "
            "(srun --mpi=pmix)", ("mpi.pmi",))
    mpi4py = "none" if mpi.flavour == "none" else ("source" if mpi.source != "distro" else
                                                   "distro" if mpi.flavour == DISTRO_DEFAULT_MPI else "wheel")
    say("mpi4py", {"none": "none (no MPI)", "distro": "the distribution's python3-mpi4py",
                   "wheel": f"{site.software.mpi4py} from its wheel",
                   "source": f"{site.software.mpi4py}, built from source against the container MPI"}[mpi4py],
        "mpi4py's wheel loads libmpi.so.12 when it starts (the image's, or the host's bound in); the distribution's "
        f"python3-mpi4py is built for its default MPI, {DISTRO_DEFAULT_MPI}" if mpi4py == "wheel" else
        "mpi4py must be linked against the MPI the container runs", ("software.mpi4py", "software.mpi_source"))
    return gpu_home, cuda_home, pmix, mpi4py
