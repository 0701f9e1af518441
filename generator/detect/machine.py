"""Read a site's facts off this machine (no root, no network): write a site TOML, or compare one.

    gen-recipe detect [--out FILE] [--name NAME] [--force] [--timeout SECONDS]
    gen-recipe detect --compare SITE        (SITE: a shipped site name or a site TOML path)

For reuse (the benchmark suite runs these first on a site's own machine):

    facts = detect()                         # DetectedFacts: every fact with how it was found
    site = detect_site("mysite")             # the same as a validated Site
    diffs = compare(site_mod.load("lumi"), facts)   # [Difference(key, declared, detected, severity, message)]
    looks_like(site_mod.load("lumi"), facts) # is this machine plausibly LUMI?

The probes (generator/detect/table.py) run each one read-only command with a time limit, or read
a file under /etc, /proc, /sys, /dev, /opt/rocm, or module environment variables; parsers are pure
functions of the text. Tests inject recorded outputs, a fake root and a fake environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from generator.model import site as site_mod
from generator.detect.compare import Difference, compare, looks_like
from generator.detect.facts import DetectedFacts, Fact, decide, facts_of_site
from generator.detect.runner import Runner, run_probes
from generator.detect.table import PROBES
from generator.detect.toml import site_toml

__all__ = ["DetectedFacts", "Difference", "Fact", "compare", "detect", "detect_site", "facts_of_site",
           "looks_like", "site_toml"]

NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def detect(runner: Runner | Mapping | None = None, root: Path | str = "/", env: Mapping[str, str] | None = None,
           timeout: float = 10.0) -> DetectedFacts:
    """Probe the machine. `runner`: None (real commands), a function argv -> (rc, output), or a
    mapping {probe key: output}; `root`: where /etc, /proc, /sys, /dev, /opt live; `env`: the
    environment (default os.environ, also the commands' PATH)."""
    return decide(run_probes(PROBES, runner, Path(root), env, timeout))


def detect_site(name: str = "detected", **kwargs) -> site_mod.Site:
    """This machine as a validated Site (placeholders are listed in each table's `unverified`).
    Keyword arguments go to detect()."""
    return site_mod.parse(site_toml(detect(**kwargs), name), f"<detected {name}>")


def summary(f: DetectedFacts) -> str:
    gpu = f.value("gpu.stack")
    bits = [f"{f.value('host.os') or '?'} {f.value('host.os_version') or ''}".strip() + f" {f.value('host.arch') or '?'}",
            f"{f.value('mpi.flavour')} {f.value('mpi.version') or '?'}" if f.value("mpi.flavour") else "no MPI found",
            f"{f.value('fabric.kind')}/{f.value('fabric.provider') or '?'}",
            "no GPU" if gpu == "none" else f"{gpu} {f.value('gpu.version') or '?'}" if gpu else "GPU not detected",
            ", ".join(f"{n} {v}".strip() for n, v in f.runtimes.items()) or "no container runtime"]
    return f"{f.value('host.hostname') or 'this machine'}: " + "; ".join(bits)


def report(declared: site_mod.Site, facts: DetectedFacts, diffs: list[Difference]) -> str:
    """The text `detect --compare` prints."""
    lines = [f"Comparing {declared.path} with this machine ({summary(facts)})"]
    for d in diffs:
        label = "not checked" if not d.checked else "BREAKS" if d.severity == "breaks" else "note"
        lines.append(f"  {label + ':':<13}" + (d.message[len("not checked: "):] if not d.checked else
                                                 f"{d.key}: {d.message}"))
    lines += [f"  warning:     {w}" for w in facts.warnings]
    breaks = [d.key for d in diffs if d.severity == "breaks"]
    notes = sum(1 for d in diffs if d.severity == "note" and d.checked)
    unchecked = sum(1 for d in diffs if not d.checked)
    verdict = (f"the container would break here: {len(breaks)} mismatch{'es' if len(breaks) > 1 else ''} "
               f"({', '.join(breaks)})" if breaks else "no mismatch that would break the container")
    lines.append(f"Result: {verdict}; {notes} note{'s' * (notes != 1)}; {unchecked} not checked.")
    return "\n".join(lines)
