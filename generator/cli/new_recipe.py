"""Write a recipe for your own application to start from: gen-recipe new-recipe NAME [--python] [--out DIR].

Makes DIR (default: NAME) with `app.toml` (or, with --python, `recipe.py`), `requirements.txt` and
`src/main.py`, a small program reporting its rate as the suite expects; the recipe generates, builds
and measures as it is, and every line says what to change. The files are made and checked as a recipe
in a scratch folder first, then written as one set: nothing is written when a check fails.
"""

from __future__ import annotations

import argparse
import os
import shlex
import tempfile
from importlib import resources
from pathlib import Path

from generator.errors import UsageError, shown
from generator.files import write_set
from generator.model.site import KINDS
from generator.recipe import catalog


def templates(name: str, folder: str, python: bool) -> dict[str, str]:
    """{relative path: text} of a new recipe folder (`folder`: where it is, named in its comments as a shell word)."""
    if not KINDS["name"][0].fullmatch(name):
        raise UsageError(f"'{name}' is not a valid recipe name ({KINDS['name'][1]})")
    if name in catalog.names():
        raise UsageError(f"'{name}' is not a valid recipe name: a built-in recipe's (choose another, e.g. my{name})")
    if not KINDS["path"][0].fullmatch(folder) or max(len(part) for part in folder.split("/")) > 255:
        raise UsageError(f"--out {folder}: the folder must be {KINDS['path'][1]}, each name at most 255 (e.g. --out {name})")
    files = {"recipe.py" if python else "app.toml": "recipe.py" if python else "app.toml",
             "requirements.txt": "requirements.txt", "src/main.py": "main.py"}
    root = resources.files("generator") / "templates"
    return {rel: (root / src).read_text(encoding="utf-8").replace("@NAME@", name).replace("@DIR@", shlex.quote(folder))
            for rel, src in files.items()}


def check(texts: dict[str, str], main: str) -> None:
    """Load the recipe made of `texts` from a scratch folder (the template must be valid: fail here, not in the
    user's next step)."""
    with tempfile.TemporaryDirectory(prefix="gen-recipe-new-") as scratch:
        for rel, text in texts.items():
            (Path(scratch) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(scratch) / rel).write_text(text, encoding="utf-8")
        catalog.load((Path(scratch) / main).as_posix())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="recipe name (lower-case letters, digits, '-', '_'); the image is NAME-<site>")
    parser.add_argument("--python", action="store_true", help="a Python recipe (recipe.py, generator.api) instead of app.toml")
    parser.add_argument("--out", type=Path, help="folder to create (default: NAME)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def run(args: argparse.Namespace) -> int:
    out = args.out or Path(args.name)
    main = "recipe.py" if args.python else "app.toml"
    texts = templates(args.name, out.as_posix(), args.python)
    paths = {out / rel: text for rel, text in texts.items()}
    existing = [shown(p) for p in paths if os.path.lexists(p)]
    if existing and not args.force:
        raise UsageError(f"{', '.join(existing)} exist (use --force to overwrite)")
    check(texts, main)
    write_set(paths, root=out, flag=None)
    recipe = shlex.quote((out / main).as_posix())
    print(f"{shown(recipe)}: edit it and src/, then: gen-recipe --site local --recipe {shown(recipe)} --explain")
    return 0
