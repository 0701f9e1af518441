"""Observations -> the machine's facts, each with how it was found, or why it was not.

`decide(observations)` is pure: it picks among the clues of all probes (in table order, the
first wins), derives what needs several clues (ABI, fabric provider, launcher, PMI) and notes
contradictions between sources as warnings. Nothing is guessed: a fact without evidence is a
`Fact` whose value is None and whose `how` says what was tried.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from generator.model.site import ABI_OF_FLAVOUR, PROVIDERS_OF_FABRIC, STACK_OF_VENDOR, Site, Version
from generator.detect.runner import Observation
from generator.model.providers import preferred
from generator.model.runtimes import PLATFORMS
from generator.detect.table import RUNTIME_ORDER

MISSING = ("not found", "not there")
PROVIDER_PREFERENCE = {f: preferred(f) for f in PROVIDERS_OF_FABRIC}
MPI_MODULE = re.compile(r"^(cray-mpich|openmpi|open-mpi|ompi|intel-mpi|impi|intel-oneapi-mpi|mpich|mvapich|hpcx)",
                        re.IGNORECASE)
# Which probe names the install prefix of each flavour.
INSTALL_PATH_FROM = {"cray-mpich": "environment", "intel-mpi": "environment", "openmpi": "ompi_info",
                     "mpich": "mpichversion"}


@dataclass(frozen=True)
class Fact:
    key: str       # dotted schema key ("mpi.version") or an extra one ("gpu.cuda_driver")
    value: object  # None: not detected
    how: str       # "<probe>: <output line>", or why it was not detected

    @property
    def detected(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class DetectedFacts:
    """What `gen-recipe detect` found on a machine (or, via facts_of_site, what a site declares)."""

    facts: Mapping[str, Fact]
    warnings: tuple[str, ...] = ()
    origin: str = "this machine"    # shown in messages: "this machine" or a site file's path
    observations: tuple[Observation, ...] = field(default=(), compare=False, repr=False)

    def get(self, key: str) -> Fact:
        return self.facts.get(key) or Fact(key, None, "not probed")

    def value(self, key: str):
        return self.get(key).value

    @property
    def runtimes(self) -> dict[str, str]:
        """Schema runtime name -> version ('' when present but its version is unknown)."""
        return {n: self.value(f"runtimes.{n}") for n in RUNTIME_ORDER if self.get(f"runtimes.{n}").detected}


def same_version(a: str, b: str) -> bool:
    """'8.1.31' and '8.1.31.4' agree (one is a prefix of the other); '4.1.0' and '4.1.5' do not."""
    pa, pb = Version(a).parts, Version(b).parts
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


class _Clues:
    """Look-ups over all observations, in probe-table order."""

    def __init__(self, observations: Sequence[Observation]) -> None:
        self.obs = {o.probe.key: o for o in observations}
        self.pairs = [(o.probe.key, c) for o in observations for c in o.clues]

    def first(self, key: str, probe: str | None = None):
        return next(((p, c) for p, c in self.pairs if c.key == key and probe in (None, p)), None)

    def value(self, key: str):
        hit = self.first(key)
        return hit[1].value if hit else None

    def how(self, key: str, probe: str | None = None) -> str:
        p, c = self.first(key, probe)
        return f"{p}: {c.line}"

    def missing(self, *probes: str) -> bool:
        return all(self.obs[p].status in MISSING for p in probes if p in self.obs)

    def present(self, probe: str) -> bool:
        return probe in self.obs and self.obs[probe].status not in MISSING

    def why(self, *probes: str) -> str:
        return "; ".join(f"{p}: {self._status(p)}" for p in probes if p in self.obs) or "not probed"

    def _status(self, probe: str) -> str:
        status = self.obs[probe].status
        return "ran, but shows no such fact" if status == "ok" else status

    def fact(self, key: str, *probes: str) -> Fact:
        """The first clue for `key`, or not detected with the status of `probes`."""
        hit = self.first(key)
        return Fact(key, hit[1].value, f"{hit[0]}: {hit[1].line}") if hit else Fact(key, None, self.why(*probes))


def decide(observations: Sequence[Observation]) -> DetectedFacts:
    c = _Clues(observations)
    facts: dict[str, Fact] = {}
    warnings: list[str] = []
    for part in (_host, _mpi, _fabric, _gpu, _runtimes):
        for f in part(c, facts, warnings):
            facts[f.key] = f
    return DetectedFacts(MappingProxyType(facts), tuple(warnings), observations=tuple(observations))


def _host(c: _Clues, facts, warnings) -> list[Fact]:
    out = [c.fact("host.os", "/etc/os-release"), c.fact("host.os_version", "/etc/os-release"),
           c.fact("host.os_like", "/etc/os-release"), c.fact("host.os_name", "/etc/os-release"),
           c.fact("host.arch", "uname -m"), c.fact("host.cpu", "/proc/cpuinfo"),
           c.fact("host.cores_per_node", "/proc/cpuinfo"), c.fact("host.hostname", "/proc/sys/kernel/hostname"),
           Fact("host.internet", None, "detect makes no network access"),
           c.fact("host.scheduler_version", "srun --version", "qstat --version", "lsid")]
    sched = c.fact("host.scheduler", "srun --version", "qstat --version", "lsid")
    if not sched.detected and c.missing("srun --version", "qstat --version", "lsid"):
        sched = Fact("host.scheduler", "none", "srun, qstat and lsid not found")
    out.append(sched)
    if sched.value == "slurm":
        out.append(Fact("host.launcher", "srun", sched.how))
    elif c.present("mpirun --version"):
        hit = c.first("mpi.flavour", "mpirun --version")
        out.append(Fact("host.launcher", "mpirun", f"mpirun --version: {hit[1].line}" if hit else "mpirun found on PATH"))
    elif sched.detected:
        out.append(Fact("host.launcher", "none", "no srun and no mpirun found"))
    else:
        out.append(Fact("host.launcher", None, c.why("srun --version", "mpirun --version")))
    modules = c.fact("host.modules", "environment")
    system = c.fact("host.module_system", "environment")
    if not modules.detected:
        modules = (Fact("host.modules", (), f"{system.how}; LOADEDMODULES empty") if system.detected else
                   Fact("host.modules", None, "no environment modules (LOADEDMODULES, MODULESHOME, LMOD_VERSION unset)"))
    return out + [modules, system]


def _mpi_candidates(c: _Clues, probe: str, only: tuple[str, ...] = ()) -> list[tuple[str, str, str | None, str]]:
    """(probe, flavour, version or None, line) from one probe, flavours in `only` if given."""
    obs = c.obs.get(probe)
    out = []
    clues = list(obs.clues) if obs else []
    for i, clue in enumerate(clues):
        if clue.key == "mpi.flavour" and (not only or clue.value in only):
            nxt = clues[i + 1] if i + 1 < len(clues) else None
            ver = nxt.value if nxt is not None and nxt.key == "mpi.version" else None
            out.append((probe, clue.value, ver, clue.line))
    return out


def _mpi(c: _Clues, facts, warnings) -> list[Fact]:
    # The launcher's MPI first; Cray's module environment outranks everything (no mpirun there).
    cands = (_mpi_candidates(c, "environment", ("cray-mpich",)) + _mpi_candidates(c, "mpirun --version")
             + _mpi_candidates(c, "ompi_info") + _mpi_candidates(c, "mpichversion")
             + _mpi_candidates(c, "environment", ("intel-mpi",)) + _mpi_candidates(c, "impi_info"))
    py = _mpi_candidates(c, "python3 -c mpi4py")
    tried = c.why("environment", "mpirun --version", "ompi_info", "mpichversion", "impi_info", "python3 -c mpi4py")
    out = [c.fact("mpi.pmi_plugins", "srun --mpi=list")]
    ld = c.first("mpi.abi", "ldconfig -p")
    primary = (cands or py or [None])[0]
    if primary is None:
        out += [Fact("mpi.flavour", None, f"no MPI found ({tried})"),
                Fact("mpi.version", None, "no MPI found"),
                Fact("mpi.abi", ld[1].value, f"ldconfig -p: {ld[1].line}") if ld else Fact("mpi.abi", None, "no MPI found")]
        return out + [Fact("mpi.install_path", None, "no MPI found"), Fact("mpi.pmi", None, "no MPI found"),
                      Fact("mpi.modules", None, "no MPI found")]
    probe, flavour, _, line = primary
    out.append(Fact("mpi.flavour", flavour, f"{probe}: {line}"))
    same = [(p, v, ln) for p, f, v, ln in cands + py if f == flavour and v and p != "python3 -c mpi4py"] or \
           [(p, v, ln) for p, f, v, ln in py if f == flavour and v]
    if same:
        ref = same[0][1]
        p, ver, ln = max((s for s in same if same_version(s[1], ref)), key=lambda s: len(Version(s[1]).parts))
        out.append(Fact("mpi.version", ver, f"{p}: {ln}"))
    else:
        ver = None
        out.append(Fact("mpi.version", None, f"{probe} shows no version; {tried}"))
    for p, f, v, _line in cands + py:  # contradictions: the baseline and the container must agree
        is_py = p == "python3 -c mpi4py"  # the library really loaded; tools may name a base (Cray's mpichversion)
        who = "python3's mpi4py is linked against" if is_py else f"{p} reports"
        if ABI_OF_FLAVOUR[f] != ABI_OF_FLAVOUR[flavour] or (is_py and f != flavour) \
                or (f == flavour and v and ver and not same_version(v, ver)):
            warnings.append(f"{who} {f} {v or ''}".rstrip() + f", but the host MPI is {flavour} {ver or ''}".rstrip()
                            + ": the bare-metal baseline and the container must use the same MPI")
    abi = ABI_OF_FLAVOUR[flavour]
    if ld and ld[1].value != abi:
        warnings.append(f"ldconfig -p finds {ld[1].line.split()[0]} ({ld[1].value} ABI) first, but the host MPI is "
                        f"{flavour}: programs linked without the MPI module may load the wrong libmpi")
    out.append(Fact("mpi.abi", abi, f"ldconfig -p: {ld[1].line}" if ld and ld[1].value == abi
                    else f"the {flavour} flavour has the {abi} ABI"))
    src = INSTALL_PATH_FROM.get(flavour)
    hit = c.first("mpi.install_path", src) if src else None
    out.append(Fact("mpi.install_path", hit[1].value, f"{src}: {hit[1].line}") if hit
               else Fact("mpi.install_path", None, f"{src or 'no probe'} shows no prefix"))
    plugins = c.value("mpi.pmi_plugins")
    if plugins:
        want = ("pmix", "pmi2") if flavour == "openmpi" else ("pmi2", "pmix")
        pick = next((w for w in want if any(p.startswith(w) for p in plugins)), None)
        out.append(Fact("mpi.pmi", pick, f"{c.how('mpi.pmi_plugins')} ({pick} for {flavour})") if pick
                   else Fact("mpi.pmi", None, f"srun offers neither pmi2 nor pmix ({', '.join(plugins)})"))
    elif facts["host.scheduler"].value not in (None, "slurm"):
        out.append(Fact("mpi.pmi", "none", f"no Slurm ({facts['host.scheduler'].how}): the launcher starts the ranks"))
    else:
        out.append(Fact("mpi.pmi", None, c.why("srun --mpi=list")))
    mods = facts["host.modules"].value
    out.append(Fact("mpi.modules", tuple(m for m in mods if MPI_MODULE.match(m)), facts["host.modules"].how)
               if mods is not None else Fact("mpi.modules", None, facts["host.modules"].how))
    return out


def _fabric(c: _Clues, facts, warnings) -> list[Fact]:
    ib = c.value("fabric.ib_devices") or ()
    hfi = [d for d in ib if d.startswith("hfi1")]
    ib_only = [d for d in ib if not d.startswith("hfi1") and not d.endswith(":Ethernet")]
    roce = [d for d in ib if d.endswith(":Ethernet")]
    if c.value("fabric.cxi_devices"):
        kind = Fact("fabric.kind", "slingshot", c.how("fabric.cxi_devices"))
    elif c.value("fabric.hfi_devices") or hfi:
        kind = Fact("fabric.kind", "omnipath", c.how("fabric.hfi_devices") if c.value("fabric.hfi_devices")
                    else c.how("fabric.ib_devices"))
    elif ib_only:
        kind = Fact("fabric.kind", "infiniband", c.how("fabric.ib_devices"))
    else:
        kind = Fact("fabric.kind", "ethernet", "no /dev/cxi*, no /dev/hfi1_*, no InfiniBand port in /sys/class/infiniband"
                    + (f" (RoCE: {', '.join(roce)})" if roce else ""))
    fi = c.value("fabric.fi_providers")
    comps = c.value("mpi.ompi_components") or ()
    evidence = {}  # provider -> how
    if fi:
        for prov in fi:
            evidence.setdefault(prov, c.how("fabric.fi_providers"))
    if c.first("fabric.ucx_version"):
        evidence.setdefault("ucx", c.how("fabric.ucx_version"))
    for comp, prov in (("pml:ucx", "ucx"), ("mtl:psm2", "psm2"), ("btl:openib", "verbs")):
        if comp in comps:
            evidence.setdefault(prov, f"ompi_info: MCA {comp}")
    if kind.value == "slingshot":
        evidence.setdefault("cxi", f"{kind.how} (the cxi provider's devices)")
    allowed = PROVIDERS_OF_FABRIC[kind.value]
    providers = tuple(p for p in allowed if p in evidence or p == "tcp")
    pick = next((p for p in PROVIDER_PREFERENCE[kind.value] if p in providers), None)
    if pick:
        provider = Fact("fabric.provider", pick, evidence.get(pick, "ethernet: tcp is its only provider"))
    else:
        provider = Fact("fabric.provider", None, f"no {' or '.join(PROVIDER_PREFERENCE[kind.value])} provider seen "
                        f"({c.why('fi_info -l', 'ucx_info -v', 'ompi_info')})")
    known = pick is not None or kind.value == "ethernet"
    devices = {"slingshot": ("/dev/cxi*",), "omnipath": ("/dev/hfi1_*",)}.get(kind.value, ())
    return [kind, provider,
            Fact("fabric.providers", providers if known else None,
                 "; ".join(dict.fromkeys(evidence.get(p, "tcp works on any network") for p in providers))
                 if known else provider.how),
            c.fact("fabric.libfabric_version", "fi_info --version"), c.fact("fabric.ucx_version", "ucx_info -v"),
            Fact("fabric.devices", devices, kind.how) if devices else Fact("fabric.devices", None, "no fabric devices")]


def _gpu(c: _Clues, facts, warnings) -> list[Fact]:
    tools = ("nvidia-smi --query-gpu", "rocm-smi --showproductname", "amd-smi static --asic")
    vendor = c.fact("gpu.vendor", *tools)
    count = c.fact("gpu.count_per_node", *tools)
    if not vendor.detected:
        if c.value("gpu.nvidia_devices"):
            vendor = Fact("gpu.vendor", "nvidia", c.how("gpu.nvidia_devices") + f" ({c.why(tools[0])})")
            count = Fact("gpu.count_per_node", len(c.value("gpu.nvidia_devices")), c.how("gpu.nvidia_devices"))
        elif c.value("gpu.amd_devices"):
            vendor = Fact("gpu.vendor", "amd", c.how("gpu.amd_devices") + f" ({c.why(*tools[1:])})")
        elif c.missing(*tools, "/dev/nvidia*", "/dev/kfd"):
            vendor = Fact("gpu.vendor", "none", "no nvidia-smi, rocm-smi or amd-smi; no /dev/nvidia*, no /dev/kfd")
    stack = Fact("gpu.stack", STACK_OF_VENDOR[vendor.value][0], vendor.how) if vendor.detected \
        else Fact("gpu.stack", None, vendor.how)
    cuda_driver = c.fact("gpu.cuda_driver", "nvidia-smi")
    if stack.value == "cuda":
        toolkit = c.fact("gpu.cuda_toolkit", "nvcc --version")
        if toolkit.detected:
            ver = Fact("gpu.version", toolkit.value, toolkit.how)
        elif cuda_driver.detected:
            ver = Fact("gpu.version", cuda_driver.value,
                       f"{cuda_driver.how} (the newest CUDA the driver runs; {toolkit.how})")
        else:
            ver = Fact("gpu.version", None, f"{toolkit.how}; {cuda_driver.how}")
    elif stack.value == "rocm":
        rocm = c.fact("gpu.rocm_version", "amd-smi version", "/opt/rocm/.info/version")
        ver = Fact("gpu.version", rocm.value, rocm.how)
    elif stack.value == "none":
        ver = Fact("gpu.version", None, "no GPU stack")
    else:
        ver = Fact("gpu.version", None, vendor.how)
    return [vendor, stack, ver, count, cuda_driver, c.fact("gpu.model", *tools), c.fact("gpu.arch", *tools),
            c.fact("gpu.driver", "nvidia-smi --query-gpu", "nvidia-smi")]


def _runtimes(c: _Clues, facts, warnings) -> list[Fact]:
    # runtimes whose probe gives another fact (the container engine: enroot; Docker: its client) are combined below
    out = [c.fact(f"runtimes.{r.name}", r.probe.key, *r.probe.also) for r in PLATFORMS.values() if not r.probe.clue]
    pyxis, enroot = c.first("runtimes.pyxis"), c.fact("runtimes.enroot", "enroot version")
    if pyxis and not pyxis[1].value:
        out.append(Fact("runtimes.ce", None, f"srun --help: {pyxis[1].line}"
                        + (f"; enroot {enroot.value} alone is not the container engine" if enroot.detected else "")))
    elif pyxis:
        out.append(Fact("runtimes.ce", enroot.value if enroot.detected else "",
                        f"{pyxis[0]}: {pyxis[1].line}; {enroot.how}"))
    elif enroot.detected:
        out.append(Fact("runtimes.ce", None, f"enroot {enroot.value} found, but srun shows no pyxis "
                        f"(--container-image) or --environment ({c.why('srun --help')}): not the container engine"))
    else:
        out.append(Fact("runtimes.ce", None, c.why("srun --help", "enroot version")))
    client, daemon = c.fact("runtimes.docker_client", "docker --version"), c.first("runtimes.docker_daemon")
    if client.detected and daemon:
        out.append(Fact("runtimes.docker", client.value, f"{client.how}; {daemon[0]}: {daemon[1].line}"))
    elif client.detected:
        out.append(Fact("runtimes.docker", None, f"docker client {client.value} found, but no daemon socket "
                        "(/var/run/docker.sock, DOCKER_HOST): it cannot run containers here"))
    else:
        out.append(Fact("runtimes.docker", None, client.how))
    return out


# -- a declared site as facts (for comparing two sites, or a site with a detected Site) ----

def facts_of_site(site: Site) -> DetectedFacts:
    """The facts a site file declares, in detect's terms; keys it lists as `unverified` count
    as not detected."""
    label = site.path or f"site '{site.name}'"
    facts: dict[str, Fact] = {}

    def put(table, prefix: str, **values):
        for k, v in values.items():
            unverified = k in getattr(table, "unverified", ())
            facts[f"{prefix}.{k}"] = Fact(f"{prefix}.{k}", None if unverified or v is None else v,
                                          f"unverified in {label}" if unverified else label)

    h, g, m, f = site.host, site.gpu, site.mpi, site.fabric
    put(h, "host", os=h.os, os_version=h.os_version, arch=h.arch, cpu=h.cpu or None,
        cores_per_node=h.cores_per_node or None, scheduler=h.scheduler, launcher=h.launcher, modules=h.modules,
        internet=None if h.internet == "unknown" else h.internet)
    put(g, "gpu", vendor=g.vendor, stack=g.stack, version=g.version, model=g.model or None,
        count_per_node=g.count_per_node or None, arch=g.arch or None, driver=g.driver or None)
    put(m, "mpi", flavour=m.flavour, version=m.version, abi=site.mpi_abi, install_path=m.install_path or None,
        pmi=m.pmi, modules=m.modules)
    put(f, "fabric", kind=f.kind, provider=f.provider, libfabric_version=f.libfabric_version,
        ucx_version=f.ucx_version, devices=f.devices)
    if "provider" not in f.unverified:
        facts["fabric.providers"] = Fact("fabric.providers", tuple(dict.fromkeys((f.provider, "tcp"))), label)
    for rt in site.runtimes:
        ok = "version" not in rt.unverified
        facts[f"runtimes.{rt.name}"] = Fact(f"runtimes.{rt.name}", str(rt.version) if ok else "", label)
    for name in RUNTIME_ORDER:
        facts.setdefault(f"runtimes.{name}", Fact(f"runtimes.{name}", None, f"not in {label}"))
    return DetectedFacts(MappingProxyType(facts), origin=label)
