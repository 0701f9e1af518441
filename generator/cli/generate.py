"""`gen-recipe [--site SITE] ...`: generate the site's Dockerfiles and Apptainer definitions.

    gen-recipe [--site SITE] [--recipe NAME ...] [--format docker|apptainer|all] [--out DIR]
               [--list-sites] [--list-recipes] [--check] [--explain]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from generator import __version__, files
from generator.errors import CheckFailed, UsageError, shown
from generator.model import site as site_mod
from generator.recipe import catalog, explain, render
from generator.recipe.context import FORMATS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--site", default="local", help="site name or path to a site TOML (default: local)")
    p.add_argument("--recipe", action="append", metavar="RECIPE",
                   help="recipe to generate: a built-in name, your app file (app.toml), Python recipe (recipe.py) "
                        "or module:function (repeatable; default: all built-in ones)")
    p.add_argument("--format", choices=(*FORMATS, "all"), default="all", help="output format (default: all)")
    p.add_argument("--out", default="build", type=Path, help="output directory (default: build)")
    p.add_argument("--list-sites", action="store_true", help="list the shipped sites and exit")
    p.add_argument("--list-recipes", action="store_true", help="list the recipes and exit")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if files under --out differ from what would be generated")
    p.add_argument("--explain", action="store_true", help="print which site fact decided what, and write nothing")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.add_argument("--follow-symlinks", action="store_true",
                   help="write through symbolic links under --out (default: refuse to replace a link)")
    p.add_argument("--version", action="version", version=f"gen-recipe {__version__}")


def list_sites() -> int:
    names = site_mod.builtin_names()
    for name in sorted(set(names.values())):
        s = site_mod.load(name)
        aliases = sorted(a for a, n in names.items() if n == name and a != name)
        suffix = f" (alias: {', '.join(aliases)})" if aliases else ""
        print(f"{name:<12} {shown(s.description)}{suffix}")
    return 0


def list_recipes() -> int:
    for name in catalog.names():
        print(f"{name:<10} {shown(catalog.describe(catalog.load(name)))}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.list_sites:
        return list_sites()
    if args.list_recipes:
        return list_recipes()
    site = site_mod.load(args.site)
    if "/" not in args.site and not args.site.endswith(".toml") and Path(args.site).is_file():
        print(f"gen-recipe: note: --site {args.site} is the shipped site; the file {args.site} here is "
              f"not read (say ./{args.site} for it)", file=sys.stderr)
    recipes = catalog.load_all(args.recipe or catalog.names())   # unknown ones fail before any work
    if args.explain:
        print(explain.explain(site, [r.spec for r in recipes]))
        return 0
    formats = FORMATS if args.format == "all" else (args.format,)
    texts = render.render_all(site, recipes, formats)
    if args.check:
        stale, linked = [], False
        for rel, text in texts.items():
            path = args.out / rel
            if _current(path, follow_symlinks=True) != text:
                stale.append(f"{shown(path)} ({'differs' if os.path.lexists(path) else 'missing'})")
                # read through links, as --check does: the command that rewrites them says so too
                linked = linked or any((args.out / Path(rel).parents[i]).is_symlink()
                                       for i in range(len(Path(rel).parts) - 1)) or path.is_symlink()
        if stale:
            follow = " --follow-symlinks" if linked else ""
            raise CheckFailed(f"{len(stale)} of {len(texts)} files are not what gen-recipe would generate: "
                              + ", ".join(stale) + f" (regenerate: gen-recipe --site {site.name} --out {shown(args.out)}"
                              f"{follow})")
        if not args.quiet:
            print(f"{len(texts)} file{'' if len(texts) == 1 else 's'} up to date under {shown(args.out / site.name)}")
        return 0
    changed = {args.out / rel: text for rel, text in texts.items() if _current(args.out / rel) != text}
    files.write_set(changed, follow_symlinks=args.follow_symlinks, root=args.out)
    if not args.quiet:
        for rel in texts:
            print(f"{shown(args.out / rel)}{'' if args.out / rel in changed else ' (unchanged)'}")
    return 0


def _current(path: Path, follow_symlinks: bool = False) -> str | None:
    """The text of a regular file at `path` through the one read path (a FIFO or device never blocks), or None
    (missing, a link unless `follow_symlinks`, not a regular file, not UTF-8 text, too large)."""
    if path.is_symlink() and not follow_symlinks:
        return None
    try:
        return files.read_text(path, "generated file")
    except UsageError:
        return None
