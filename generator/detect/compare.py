"""A declared site against what a machine shows: the differences, in the user's terms.

`compare(declared, detected)` is pure. Severity "breaks": the container built from the
declared site would not work here (MPI flavour/version/ABI, fabric provider, GPU stack or its
major version, CPU architecture, a PMI srun does not offer). Severity "note": worth knowing
(OS version, runtime versions, modules, counts). A fact that was not detected is never a
mismatch: it comes back as a note whose message starts with "not checked:".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from generator.model.site import ABI_OF_FLAVOUR, Site, Version
from generator.detect.facts import DetectedFacts, facts_of_site, same_version
from generator.detect.table import RUNTIME_ORDER
from generator.detect.toml import os_family


@dataclass(frozen=True)
class Difference:
    key: str                           # dotted site key: "mpi.version", "runtimes.podman", ...
    declared: str | None               # as the site file says it (None: the site says nothing)
    detected: str | None               # as the machine shows it (None: not detected)
    severity: Literal["breaks", "note"]
    message: str

    @property
    def checked(self) -> bool:
        return not self.message.startswith("not checked:")


def _s(v) -> str | None:
    if v is None:
        return None
    return ", ".join(map(str, v)) if isinstance(v, tuple) else str(v)


def _as_facts(detected: Site | DetectedFacts) -> DetectedFacts:
    return detected if isinstance(detected, DetectedFacts) else facts_of_site(detected)


class _Diff:
    def __init__(self, declared: Site, facts: DetectedFacts) -> None:
        self.site, self.facts = declared, facts
        self.path = declared.path or f"site '{declared.name}'"
        self.here = "this machine" if facts.origin == "this machine" else facts.origin
        self.out: list[Difference] = []

    def add(self, key: str, declared, severity: str, message: str) -> None:
        self.out.append(Difference(key, _s(declared), _s(self.facts.value(key)), severity, message))

    def detected(self, key: str, declared) -> bool:
        """True if `key` was detected; else records 'not checked' (when the site states something)."""
        fact = self.facts.get(key)
        if fact.detected:
            return True
        if declared not in (None, "", (), 0):
            self.out.append(Difference(key, _s(declared), None, "note",
                                       f"not checked: {key} ({self.path} says {_s(declared)}; {fact.how})"))
        return False

    def note_if_differs(self, key: str, declared, what: str, same=lambda a, b: a == b) -> None:
        if declared in (None, "", (), 0) or not self.detected(key, declared):
            return
        got = self.facts.value(key)
        if not same(str(declared), str(got)):
            self.add(key, declared, "note", f"{what} is {_s(got)} on {self.here}, {self.path} says {_s(declared)}")


def compare(declared: Site, detected: Site | DetectedFacts) -> list[Difference]:
    """Differences between a declared site and a machine (or another site): "breaks" first."""
    d = _Diff(declared, _as_facts(detected))
    for part in (_host, _mpi, _fabric, _gpu, _runtimes, _modules):
        part(d)
    order = {"breaks": 0, "note": 1}
    return sorted(d.out, key=lambda x: (not x.checked, order[x.severity]))


def _host(d: _Diff) -> None:
    h = d.site.host
    if d.detected("host.arch", h.arch) and d.facts.value("host.arch") != h.arch:
        d.add("host.arch", h.arch, "breaks", f"{d.here} is {d.facts.value('host.arch')}, {d.path} says {h.arch}: "
              f"images built for {h.arch} do not run here — use the right site file")
    d.note_if_differs("host.os", h.os, "the OS")
    d.note_if_differs("host.os_version", h.os_version, "the OS version", same_text_version)
    d.note_if_differs("host.scheduler", h.scheduler, "the scheduler")
    d.note_if_differs("host.launcher", h.launcher, "the launcher")
    d.note_if_differs("host.cores_per_node", h.cores_per_node, "the core count (this node)")
    d.note_if_differs("host.internet", None if h.internet == "unknown" else h.internet, "internet access")


def same_text_version(a: str, b: str) -> bool:
    try:
        return same_version(a, b)
    except ValueError:
        return a == b


def _mpi(d: _Diff) -> None:
    m, f = d.site.mpi, d.facts
    flavour, version = f.value("mpi.flavour"), f.value("mpi.version")
    if m.flavour == "none":
        if flavour:
            d.add("mpi.flavour", "none", "note", f"{d.here} has {flavour} {version or ''}".rstrip()
                  + f", {d.path} declares no host MPI")
    elif d.detected("mpi.flavour", m.flavour):
        if flavour != m.flavour:
            abi = "" if ABI_OF_FLAVOUR[flavour] == d.site.mpi_abi else (
                f" (the {ABI_OF_FLAVOUR[flavour]} and {d.site.mpi_abi} ABIs are incompatible: "
                "nothing built for one runs on the other)")
            d.add("mpi.flavour", m.flavour, "breaks",
                  f"host MPI is {flavour} {version or ''}".rstrip() + f", {d.path} says {m.flavour}{abi}: "
                  "the images and the bind paths are built for the declared MPI — update the TOML or rebuild")
        elif m.version and d.detected("mpi.version", m.version) and not same_version(str(m.version), version):
            why = ("the container's OpenMPI must match" if flavour == "openmpi" else
                   "the bind paths, modules and the container's MPI are chosen from this version")
            d.add("mpi.version", m.version, "breaks", f"host MPI is {flavour} {version}, {d.path} says {m.version}: "
                  f"{why} — update the TOML or rebuild")
    elif f.get("mpi.abi").detected and f.value("mpi.abi") != d.site.mpi_abi and m.flavour != "none":
        d.add("mpi.abi", d.site.mpi_abi, "breaks", f"the host's libmpi has the {f.value('mpi.abi')} ABI "
              f"({f.get('mpi.abi').how}), {d.path} says {d.site.mpi_abi}: update the TOML or load the right MPI")
    plugins = f.value("mpi.pmi_plugins")
    if m.pmi == "none" or d.site.host.scheduler != "slurm":
        pass
    elif not plugins:
        d.detected("mpi.pmi", m.pmi)
    elif not any(p.startswith(m.pmi) for p in plugins):
        d.add("mpi.pmi", m.pmi, "breaks", f"srun --mpi=list offers {', '.join(plugins)}; {d.path} says "
              f"pmi = {m.pmi}: srun --mpi={m.pmi} would fail — update the TOML")
    if flavour == m.flavour:
        d.note_if_differs("mpi.install_path", m.install_path, "the MPI prefix")


def _fabric(d: _Diff) -> None:
    fb, f = d.site.fabric, d.facts
    kind, provider, providers = f.value("fabric.kind"), f.value("fabric.provider"), f.value("fabric.providers")
    if not providers:
        d.detected("fabric.provider", fb.provider)
    if providers:
        if fb.provider not in providers:
            d.add("fabric.provider", fb.provider, "breaks",
                  f"host fabric is {kind} (provider {provider or ', '.join(providers)}), {d.path} says {fb.kind} "
                  f"({fb.provider}): the images' MPI would not reach the network, or fall back to TCP — update the TOML")
        elif kind != fb.kind:
            d.add("fabric.kind", fb.kind, "note", f"host fabric is {kind} ({provider}), {d.path} says {fb.kind} "
                  f"({fb.provider}): runs will work but not use the fast network")
    elif kind and kind != fb.kind and fb.provider != "tcp":
        d.add("fabric.kind", fb.kind, "breaks", f"host fabric is {kind} ({f.get('fabric.kind').how}), {d.path} says "
              f"{fb.kind}: the {fb.provider} provider cannot work here — update the TOML")
    d.note_if_differs("fabric.libfabric_version", fb.libfabric_version, "libfabric", same_text_version)
    d.note_if_differs("fabric.ucx_version", fb.ucx_version, "UCX", same_text_version)


def _gpu(d: _Diff) -> None:
    g, f = d.site.gpu, d.facts
    if not d.detected("gpu.stack", g.stack if g.stack != "none" else None):
        return
    stack, version = f.value("gpu.stack"), f.value("gpu.version")
    if stack != g.stack:
        declared = f"{g.stack} {g.version or ''}".rstrip()
        here = "this node has no GPU" if stack == "none" else f"this node runs {stack} {version or ''}".rstrip()
        hint = " (login nodes often have none: run detect on a compute node)" if stack == "none" else ""
        d.add("gpu.stack", declared, "breaks", f"{here}, {d.path} says {declared}{hint}: "
              "the images are built for the declared GPU stack — update the TOML")
        return
    if stack == "none":
        return
    if g.version and d.detected("gpu.version", g.version):
        want, have = Version(str(g.version)).parts, Version(str(version)).parts
        driver = f.value("gpu.cuda_driver")
        if stack == "cuda" and driver:
            cap = Version(str(driver)).parts
            if want[0] > cap[0]:
                d.add("gpu.version", g.version, "breaks", f"the driver here runs CUDA up to {driver}, {d.path} says "
                      f"CUDA {g.version}: images built for it will not start — update the TOML (CUDA {cap[0]}.x) "
                      "or the driver")
            elif want[:2] > cap[:2]:
                d.add("gpu.version", g.version, "note", f"the driver here runs CUDA up to {driver}, {d.path} says "
                      f"{g.version}: minor-version compatibility applies (no PTX JIT for newer code)")
        elif want[0] != have[0]:
            d.add("gpu.version", g.version, "breaks", f"host {stack} is {version}, {d.path} says {g.version}: "
                  f"a different {stack} major version — update the TOML or rebuild")
        elif want[:2] != have[:2]:
            d.add("gpu.version", g.version, "note", f"host {stack} is {version}, {d.path} says {g.version}")
    d.note_if_differs("gpu.count_per_node", g.count_per_node, "the GPU count per node")
    d.note_if_differs("gpu.arch", g.arch, "the GPU architecture")
    d.note_if_differs("gpu.model", g.model, "the GPU model", lambda a, b: a.lower() in b.lower() or b.lower() in a.lower())
    d.note_if_differs("gpu.driver", g.driver, "the GPU driver", lambda a, b: b.startswith(a) or a.startswith(b))


def _runtimes(d: _Diff) -> None:
    found = d.facts.runtimes
    declared = {r.name: r for r in d.site.runtimes}
    for name, rt in declared.items():
        key = f"runtimes.{name}"
        default = " (the site's default runtime)" if name == d.site.container.runtime else ""
        fact = d.facts.get(key)
        if name not in found:
            d.add(key, rt.version, "note", f"{name} {rt.version}{default} is not available on {d.here} "
                  f"({fact.how}); load its module, or the site file lists a runtime this machine lacks")
        elif not found[name]:
            d.out.append(Difference(key, str(rt.version), None, "note",
                                    f"not checked: {key} version ({name} found; {fact.how})"))
        elif not same_text_version(str(rt.version), found[name]):
            d.add(key, rt.version, "note", f"{name} is {found[name]} on {d.here}, {d.path} says {rt.version}"
                  + (" (unverified there): update the TOML" if "version" in rt.unverified else ""))
    for name in RUNTIME_ORDER:
        if name in found and name not in declared:
            d.add(f"runtimes.{name}", None, "note",
                  f"{d.here} also has {name} {found[name]}".rstrip() + f" (not in {d.path})")


def _modules(d: _Diff) -> None:
    wanted = list(dict.fromkeys(d.site.host.modules + d.site.mpi.modules
                                + tuple(m for r in d.site.runtimes for m in r.modules)))
    if not wanted or not d.detected("host.modules", tuple(wanted)):
        return
    loaded = d.facts.value("host.modules")
    names = {m.split("/")[0] for m in loaded} | set(loaded)
    absent = [m for m in wanted if m not in names]
    if absent:
        d.out.append(Difference("host.modules", _s(tuple(wanted)), _s(loaded), "note",
                                f"not loaded now: {', '.join(absent)} (load them before runs, or {d.path} "
                                "names stale modules)"))


def looks_like(site: Site, facts: Site | DetectedFacts) -> bool:
    """Is this machine plausibly `site`? Same CPU architecture, MPI flavour and OS family where
    detected (undetected facts do not count against it); at least one of them must agree."""
    f = _as_facts(facts)
    checks = [(f.value("host.arch"), site.host.arch), (f.value("mpi.flavour"), site.mpi.flavour),
              (os_family(f.value("host.os")), os_family(site.host.os))]
    seen = [(a, b) for a, b in checks if a is not None]
    return bool(seen) and all(a == b for a, b in seen)
