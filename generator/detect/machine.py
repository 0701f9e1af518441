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

import argparse
import math
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from generator.model import site as site_mod
from generator.errors import CheckFailed, UsageError
from generator.detect.compare import Difference, compare, looks_like
from generator.detect.facts import DetectedFacts, Fact, decide, facts_of_site
from generator.detect.runner import Runner, run_probes
from generator.detect.table import PROBES
from generator.detect.toml import site_toml
from generator.files import write_atomic

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


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, more than 0 and at most an hour."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{ascii(text)[:40]} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= 3600):
        raise argparse.ArgumentTypeError(f"{text[:40]} seconds is out of range (give more than 0, at most 3600)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--out", type=Path, metavar="FILE", help="write the site TOML to FILE (default: print it)")
    what.add_argument("--compare", metavar="SITE", help="compare a shipped site (name) or a site TOML (path) "
                      "with this machine; exit 1 on a mismatch that would break the container")
    parser.add_argument("--name", help="site name written into the TOML (default: the --out file's name, or 'detected')")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    parser.add_argument("--timeout", type=seconds, default=10.0, metavar="SECONDS",
                        help="time limit for each probe command (default: 10)")


def _summary(f: DetectedFacts) -> str:
    gpu = f.value("gpu.stack")
    bits = [f"{f.value('host.os') or '?'} {f.value('host.os_version') or ''}".strip() + f" {f.value('host.arch') or '?'}",
            f"{f.value('mpi.flavour')} {f.value('mpi.version') or '?'}" if f.value("mpi.flavour") else "no MPI found",
            f"{f.value('fabric.kind')}/{f.value('fabric.provider') or '?'}",
            "no GPU" if gpu == "none" else f"{gpu} {f.value('gpu.version') or '?'}" if gpu else "GPU not detected",
            ", ".join(f"{n} {v}".strip() for n, v in f.runtimes.items()) or "no container runtime"]
    return f"{f.value('host.hostname') or 'this machine'}: " + "; ".join(bits)


def report(declared: site_mod.Site, facts: DetectedFacts, diffs: list[Difference]) -> str:
    """The text `detect --compare` prints."""
    lines = [f"Comparing {declared.path} with this machine ({_summary(facts)})"]
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


def _compare(args: argparse.Namespace) -> int:
    declared = site_mod.load(args.compare)
    facts = detect(timeout=args.timeout)
    diffs = compare(declared, facts)
    print(report(declared, facts, diffs))
    breaks = [d.key for d in diffs if d.severity == "breaks"]
    if breaks:
        raise CheckFailed(f"{declared.path} does not match this machine: {', '.join(breaks)} "
                          "(see above; update the TOML or rebuild)")
    return 0


def _check_out(out: Path, force: bool) -> None:
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory (give a file name, e.g. {out / 'mysite.toml'})")
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {out}: directory {out.parent} does not exist (create it first)")
    if out.exists() and not force:
        raise UsageError(f"{out} exists (use --force to overwrite, or --compare {out} to see what changed)")


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return _compare(args)
    name = args.name
    if name is None:
        name = args.out.stem if args.out and NAME.fullmatch(args.out.stem) else "detected"
    if not NAME.fullmatch(name):
        raise UsageError(f"'{name}' is not a valid site name (use lower-case letters, digits, '-' and '_')")
    if args.out:
        _check_out(args.out, args.force)
    facts = detect(timeout=args.timeout)
    text = site_toml(facts, name)
    site_mod.parse(text, str(args.out or "<detected>"))  # what we write must load
    if not args.out:
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(args.out, text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"{args.out}: {_summary(facts)}")
    for w in facts.warnings:
        print(f"warning: {w}")
    print(f"check it: gen-recipe --site {args.out} --explain; later: gen-recipe detect --compare {args.out}")
    return 0
