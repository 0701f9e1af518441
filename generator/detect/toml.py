"""DetectedFacts -> a commented site TOML in the schema of sites/*.toml.

Every detected value carries its evidence as a comment; what was not detected is a
`# not detected: ...` comment. Keys the schema requires but detection cannot supply get a
value marked PLACEHOLDER in its comment and listed in the table's `unverified` (images and
software versions get defaults marked as such): the text always loads with site.parse().
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from generator.model import site as site_mod
from generator.model.site import FABRICS_OF_FLAVOUR, Version
from generator.detect.facts import PROVIDER_PREFERENCE, DetectedFacts, Fact
from generator.detect.table import RUNTIME_ORDER

COLUMN = 40
SOURCE = "D1"
# Base images by host distro family when none is detected (they never are): (distro, versions, default).
DISTROS = {"debian": ("debian", ("11", "12", "13"), "12"), "ubuntu": ("ubuntu", ("20.04", "22.04", "24.04"), "22.04"),
           "rhel": ("rockylinux", ("8", "9"), "9")}
FAMILY = {"debian": "debian", "ubuntu": "ubuntu", "rhel": "rhel", "rocky": "rhel", "almalinux": "rhel",
          "centos": "rhel", "fedora": "rhel", "ol": "rhel", "sles": "suse", "sle_hpc": "suse", "opensuse-leap": "suse"}
CUDA_TAGS = {"11.8": "11.8.0", "12.0": "12.0.1", "12.1": "12.1.1", "12.2": "12.2.2", "12.3": "12.3.2",
             "12.4": "12.4.1", "12.5": "12.5.1", "12.6": "12.6.3", "12.8": "12.8.1", "12.9": "12.9.1"}
TORCH = "2.5.1"  # wheels for cpu, cu118, cu121, cu124, rocm6.1, rocm6.2


def os_family(os_id: str | None) -> str | None:
    return FAMILY.get((os_id or "").lower(), (os_id or "").lower() or None)


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return json.dumps(str(v))


def _comment(text: str) -> str:
    """One line of comment text: TOML comments take no control characters."""
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "?", re.sub(r"\s+", " ", str(text))).strip()
    return text if len(text) <= 140 else text[:137] + "..."


def _kv(key: str, value, comment: str = "") -> str:
    line = f"{key} = {_toml(value)}"
    return f"{line:<{COLUMN}} # {_comment(comment)}" if comment else line


class _Table:
    """Lines of one TOML table and the keys that hold placeholders."""

    def __init__(self, header: str, comment: str = "") -> None:
        self.lines = [f"{header:<{COLUMN}} # {comment}" if comment else header]
        self.key = header.strip("[]")
        self.unverified: list[str] = []

    def fact(self, field: str, fact: Fact, shown=None) -> None:
        """`field = value  # how` when detected and valid in a site file, else a `# not detected` comment."""
        value = fact.value if shown is None else shown
        if fact.detected and value not in ((), "") and not site_mod.fits(f"{self.key}.{field}", value):
            self.lines.append(f"# not detected: {field} — what was found is not a valid value ({_comment(fact.how)})")
        elif fact.detected and fact.value not in ((), ""):
            self.lines.append(_kv(field, fact.value if shown is None else shown, fact.how))
        else:
            self.missing(field, fact)

    def missing(self, field: str, fact: Fact) -> None:
        self.lines.append(f"# not detected: {field} — {_comment(fact.how)}")

    def placeholder(self, field: str, value, why: str) -> None:
        self.lines.append(_kv(field, value, f"PLACEHOLDER, not detected ({why}): write the real value"))
        self.unverified.append(field)

    def default(self, field: str, value, why: str = "default, not detected") -> None:
        self.lines.append(_kv(field, value, why))

    def close(self, sources: bool = True) -> str:
        if sources:
            self.lines.append(_kv("sources", [SOURCE]))
        if self.unverified:
            self.lines.append(_kv("unverified", self.unverified, "placeholders above"))
        return "\n".join(self.lines) + "\n"


def site_toml(facts: DetectedFacts, name: str = "detected", when: str | None = None) -> str:
    """The site TOML for `facts`, named `name`."""
    when = when or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    host = facts.value("host.hostname") or "this machine"
    parts = [_header(facts, name, host, when), _host(facts), _gpu(facts), _mpi(facts), _fabric(facts)]
    parts += _runtimes(facts)
    parts += [_container(facts), _images(facts), _software(facts),
              "# [tolerances]: not detected; the container/bare limits come from measuring (see sites/local.toml)\n",
              "[sources]\n" + _kv(SOURCE, f"gen-recipe detect on {host}, {when}") + "\n"]
    return redact("\n".join(parts))


# Credentials never go into a site file: user:password in URLs, and the values of variables whose
# names say they are secrets (tokens, keys, passwords), wherever a probe's output is quoted.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@\"']+@")
_SECRET_VALUE = re.compile(r"(?i)\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|_KEY|APIKEY|CREDENTIALS?)[A-Z0-9_]*)"
                           r"(\s*[=:]\s*)[^\s\"',;]+")


def redact(text: str) -> str:
    """`text` with credentials replaced by REDACTED."""
    return _SECRET_VALUE.sub(r"\1\2REDACTED", _URL_CREDENTIALS.sub(r"\1REDACTED@", text))


def _describe(f: DetectedFacts) -> str:
    mpi = f"{f.value('mpi.flavour')} {f.value('mpi.version') or ''}".strip() if f.value("mpi.flavour") else "no MPI found"
    gpu = {"none": "no GPU", None: "GPU not detected"}.get(f.value("gpu.vendor"))
    if gpu is None:
        gpu = f"{f.value('gpu.count_per_node') or '?'}x {f.value('gpu.model') or f.value('gpu.vendor')} " \
              f"({f.value('gpu.stack')} {f.value('gpu.version') or '?'})"
    fabric = f"{f.value('fabric.kind')} ({f.value('fabric.provider') or '?'})"
    rts = ", ".join(f.runtimes) or "no container runtime"
    os_ = " ".join(str(x) for x in (f.value("host.os"), f.value("host.os_version"), f.value("host.arch")) if x)
    return f"Detected on {f.value('host.hostname') or 'this machine'}: {os_}, {mpi}, {gpu}, {fabric}, {rts}"


def _header(f: DetectedFacts, name: str, host: str, when: str) -> str:
    lines = [f"# Site file written by `gen-recipe detect` on {host} ({f.value('host.os_name') or 'unknown OS'}), {when}.",
             "# Each fact says how it was found (probe: output line). What detect could not find is a",
             "# '# not detected: ...' comment, never a guess; PLACEHOLDER marks a value the schema requires that",
             "# was not detected (also listed in `unverified`): replace those before you build.",
             "# Check: gen-recipe --site FILE --explain   Later: gen-recipe detect --compare FILE"]
    lines += [f"# WARNING: {_comment(w)}" for w in f.warnings]
    lines += ["schema = 1", _kv("name", name), _kv("description", _describe(f))]
    return "\n".join(lines) + "\n"


def _host(f: DetectedFacts) -> str:
    t = _Table("[host]")
    for field in ("os", "os_version"):
        fact = f.get(f"host.{field}")
        t.fact(field, fact) if fact.detected else t.placeholder(field, "unknown", fact.how)
    for field in ("arch", "cpu", "cores_per_node"):
        t.fact(field, f.get(f"host.{field}"))
    for field in ("scheduler", "launcher"):
        fact = f.get(f"host.{field}")
        t.fact(field, fact) if fact.detected else t.placeholder(field, "none", fact.how)
    if f.get("host.scheduler_version").detected:
        t.lines.append(f"# scheduler version: {_comment(f.get('host.scheduler_version').how)}")
    t.missing("internet", f.get("host.internet"))
    modules = f.get("host.modules")
    if modules.detected and not modules.value:
        t.lines.append(f"# modules: none loaded ({_comment(modules.how)})")
    else:
        t.fact("modules", modules)
    return t.close()


def _gpu(f: DetectedFacts) -> str:
    t = _Table("[gpu]")
    vendor, stack = f.get("gpu.vendor"), f.get("gpu.stack")
    t.fact("vendor", vendor)
    if stack.value in (None, "none"):
        t.fact("stack", stack)
        return t.close()
    t.fact("model", f.get("gpu.model"))
    count = f.get("gpu.count_per_node")
    t.fact("count_per_node", count) if count.detected else t.placeholder("count_per_node", 1, count.how)
    t.fact("arch", f.get("gpu.arch"))
    t.fact("stack", stack)
    ver = f.get("gpu.version")
    t.fact("version", ver) if ver.detected else t.placeholder("version", "0", ver.how)
    t.fact("driver", f.get("gpu.driver"))
    driver = f.get("gpu.cuda_driver")
    if driver.detected and not ver.how.startswith(driver.how):
        t.lines.append(f"# the driver runs CUDA up to {driver.value} ({_comment(driver.how)})")
    return t.close()


def _mpi(f: DetectedFacts) -> str:
    t = _Table("[mpi]")
    flavour = f.get("mpi.flavour")
    if not flavour.detected:
        t.lines.append(_kv("flavour", "none", f"no MPI found: the images carry their own ({flavour.how})"))
        if f.get("mpi.abi").detected:
            t.lines.append(f"# libmpi ABI seen: {f.value('mpi.abi')} ({_comment(f.get('mpi.abi').how)}); "
                           "load the MPI module and run detect again")
        return t.close()
    t.fact("flavour", flavour)
    ver = f.get("mpi.version")
    t.fact("version", ver) if ver.detected else t.placeholder("version", "0", ver.how)
    for field in ("abi", "install_path", "pmi"):
        t.fact(field, f.get(f"mpi.{field}"))
    if f.get("mpi.pmi_plugins").detected:
        t.lines.append(f"# srun --mpi=list: {', '.join(f.value('mpi.pmi_plugins'))}")
    if f.value("gpu.stack") not in (None, "none"):
        t.lines.append("# not detected: gpu_aware — needs a GPU-aware MPI run; set it from the site's documentation")
    mods = f.get("mpi.modules")
    if mods.detected and mods.value:
        t.fact("modules", mods)
    return t.close()


def _fabric(f: DetectedFacts) -> str:
    t = _Table("[fabric]")
    kind, provider = f.get("fabric.kind"), f.get("fabric.provider")
    need = FABRICS_OF_FLAVOUR.get(f.value("mpi.flavour") or "")
    if need and kind.value not in need:  # e.g. cray-mpich seen on a node without Slingshot devices
        t.placeholder("kind", need[0], f"{f.value('mpi.flavour')} runs only on {need[0]}; this node: {kind.how}")
        t.placeholder("provider", PROVIDER_PREFERENCE[need[0]][0], provider.how)
    else:
        t.fact("kind", kind)
        t.fact("provider", provider) if provider.detected else \
            t.placeholder("provider", PROVIDER_PREFERENCE[kind.value][0], provider.how)
    providers = f.get("fabric.providers")
    if providers.detected and len(providers.value) > 1:
        t.lines.append(f"# providers usable on {kind.value}: {', '.join(providers.value)}")
    for field in ("libfabric_version", "ucx_version", "devices"):
        t.fact(field, f.get(f"fabric.{field}"))
    return t.close()


def _runtimes(f: DetectedFacts) -> list[str]:
    out, missing = [], []
    for name in RUNTIME_ORDER:
        fact = f.get(f"runtimes.{name}")
        if not fact.detected:
            missing.append(f"# not detected: {name} — {_comment(fact.how)}")
            continue
        t = _Table("[[runtimes]]")
        t.lines.append(_kv("name", name, fact.how))
        if fact.value and Version.PATTERN.match(fact.value):
            t.lines.append(_kv("version", fact.value))
        else:
            t.placeholder("version", "0", "its version is not shown by the probe")
        t.default("mpi_modes", ["hybrid"], "default, not detected: add \"bind\" where the host MPI can be mounted in")
        out.append(t.close())
    if not out:
        t = _Table("[[runtimes]]", "PLACEHOLDER: no container runtime found on this machine")
        t.placeholder("name", "apptainer", "no runtime found")
        t.placeholder("version", "0", "no runtime found")
        out.append(t.close(sources=False))
    return out + ["\n".join(missing) + "\n"]


def _container(f: DetectedFacts) -> str:
    found = list(f.runtimes)
    t = _Table("[container]")
    choice = found[0] if found else "apptainer"
    t.default("runtime", choice, f"chosen, not detected: the first found of {', '.join(RUNTIME_ORDER)}" if found
              else "PLACEHOLDER: no container runtime found")
    t.default("mpi_mode", "hybrid", "default: the images carry an MPI matching the host's")
    if choice == "charliecloud" and f.value("mpi.flavour") == "openmpi":
        t.lines += ["", "[container.env]",
                    "# each ch-run rank has its own user namespace: Open MPI's CMA single-copy fails across them",
                    "# (a rule, not a detected fact; see sites/local.toml):",
                    _kv("OMPI_MCA_btl_vader_single_copy_mechanism", "none")]
    return t.close(sources=False)


def _images(f: DetectedFacts) -> str:
    fam = os_family(f.value("host.os"))
    distro, versions, fallback = DISTROS.get(fam, DISTROS["ubuntu"])
    ver = str(f.value("host.os_version") or "")
    ver = ver if ver in versions else (ver.split(".")[0] if ver.split(".")[0] in versions else fallback)
    why = f"defaults (host family: {fam or 'unknown'}), not detected: change them freely"
    blocks = {"none": (f"{distro}:{ver}", f"{distro}:{ver}", distro, ver)}
    stack, gver = f.value("gpu.stack"), f.value("gpu.version")
    if stack == "cuda":
        series = Version(gver).series() if gver else "12.6"
        tag = CUDA_TAGS.get(series, f"{series}.0")
        blocks["cuda"] = (f"nvidia/cuda:{tag}-devel-ubuntu22.04", f"nvidia/cuda:{tag}-base-ubuntu22.04",
                          "ubuntu", "22.04")
    elif stack == "rocm":
        parts = Version(gver).parts if gver else (6, 2)
        tag = ".".join(map(str, parts[:3] if len(parts) > 2 and parts[2] else parts[:2]))
        # no ROCm runtime image exists: the runtime stage takes ROCm's libraries from the build stage
        blocks["rocm"] = (f"rocm/dev-ubuntu-22.04:{tag}", "ubuntu:22.04", "ubuntu", "22.04")
    out = []
    for key, (devel, runtime, dist, dver) in sorted(blocks.items(), key=lambda kv: kv[0] == "none"):
        out.append("\n".join([f"{f'[images.{key}]':<{COLUMN}} # {why}", _kv("devel", devel), _kv("runtime", runtime),
                              _kv("distro", dist), _kv("distro_version", dver)]) + "\n")
    return "\n".join(out)


def _software(f: DetectedFacts) -> str:
    stack, gver = f.value("gpu.stack"), f.value("gpu.version")
    index = "https://download.pytorch.org/whl/cpu"
    if stack == "cuda" and gver:
        v = Version(gver).parts
        index = "https://download.pytorch.org/whl/" + ("cu118" if v[0] == 11 else "cu121" if v[:2] < (12, 4) else "cu124")
    elif stack == "rocm" and gver:
        index = "https://download.pytorch.org/whl/" + ("rocm6.1" if Version(gver).parts[:2] == (6, 1) else "rocm6.2")
    lines = [f"{'[software]':<{COLUMN}} # defaults, not detected: the versions the images will carry",
             _kv("torch", TORCH), _kv("torch_index", index), _kv("mpi4py", "4.0.1"), _kv("osu", "7.5"),
             _kv("transformers", "4.46.3")]
    flavour, kind, provider = f.value("mpi.flavour"), f.value("fabric.kind"), f.value("fabric.provider")
    if kind in ("slingshot", "omnipath") or flavour in ("cray-mpich", "mpich", "intel-mpi"):
        host = f.value("fabric.libfabric_version")
        lines.append(_kv("libfabric", "1.22.0", f"built into the images{f' (the host has {host})' if host else ''}"))
    if provider == "cxi":
        lines.append(_kv("libcxi", "release/shs-13.0.0", "HPE's libcxi release for libfabric's cxi provider"))
        if f.value("gpu.stack") not in (None, "none"):
            lines.append(_kv("aws_ofi", "1.19.0", "NCCL/RCCL over libfabric"))
    ucx = f.get("fabric.ucx_version")
    if flavour == "openmpi" and provider in ("ucx", "verbs"):
        lines.append(_kv("ucx", ucx.value, f"the host's UCX ({ucx.how})") if ucx.detected
                     else _kv("ucx", "1.15.0", "default: the host's UCX was not detected"))
    if flavour == "openmpi" and f.value("mpi.install_path") == "/usr":
        lines.append("# the host's Open MPI is the distribution's (prefix /usr): mpi_source = \"distro\" with "
                     "[software.distro_pins] takes the same packages (see sites/local.toml)")
    return "\n".join(lines) + "\n"
