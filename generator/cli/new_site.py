"""Write a commented site TOML to start from: gen-recipe new-site NAME [--out FILE] [--force]."""

from __future__ import annotations

import argparse
import os
import shlex
from importlib import resources
from pathlib import Path

from generator.errors import UsageError, shown
from generator.files import write_atomic
from generator.model.site import KINDS, parse


def template(name: str) -> str:
    """The commented template for site `name` (a valid site file)."""
    if not KINDS["name"][0].fullmatch(name):
        raise UsageError(f"'{name}' is not a valid site name ({KINDS['name'][1]})")
    text = (resources.files("generator") / "templates" / "site.toml").read_text(encoding="utf-8")
    return text.replace("@NAME@", name)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="site name (lower-case letters, digits, '-', '_')")
    parser.add_argument("--out", type=Path, help="file to write (default: NAME.toml)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def run(args: argparse.Namespace) -> int:
    text = template(args.name)
    out = args.out or Path(f"{args.name}.toml")
    parse(text, str(out))  # the template is a valid site: fail here, not in the user's next step
    if os.path.lexists(out) and not args.force:
        raise UsageError(f"{out} exists (use --force to overwrite)")
    write_atomic(out, text, flag=None)
    print(f"{shown(out)}: edit the facts, then: gen-recipe --site {shown(shlex.quote(str(out)))} --explain")
    return 0
