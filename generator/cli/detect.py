"""Read a site's facts off this machine (no root, no network): write a site TOML, or compare one.

    gen-recipe detect [--out FILE] [--name NAME] [--force] [--timeout SECONDS]
    gen-recipe detect --compare SITE        (SITE: a shipped site name or a site TOML path)

The probing is `generator.detect.machine` (detect, compare, report); this is its command line.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

from generator.detect import machine
from generator.detect.machine import NAME, compare, report, site_toml, summary
from generator.errors import CheckFailed, UsageError, shown
from generator.files import write_atomic
from generator.model import site as site_mod


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


def _compare(args: argparse.Namespace) -> int:
    declared = site_mod.load(args.compare)
    facts = machine.detect(timeout=args.timeout)
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
    facts = machine.detect(timeout=args.timeout)
    text = site_toml(facts, name)
    site_mod.parse(text, str(args.out or "<detected>"))  # what we write must load
    if not args.out:
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(args.out, text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    out = shown(shlex.quote(str(args.out)))          # the file's name as the terminal may show it, and as a shell word
    print(f"{shown(args.out)}: {shown(summary(facts))}")
    for w in facts.warnings:
        print(f"warning: {shown(w)}")
    print(f"check it: gen-recipe --site {out} --explain; later: gen-recipe detect --compare {out}")
    return 0
