"""Write a recipe for your own application to start from: gen-recipe new-recipe NAME [--python] [--out DIR].

Makes DIR (default: NAME) with `app.toml` (or, with --python, `recipe.py`), `requirements.txt` and
`src/main.py`, a small program reporting its rate as the suite expects; the recipe generates, builds
and measures as it is, and every line says what to change.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from generator.errors import UsageError
from generator.files import write_set
from generator.model.site import KINDS
from generator.recipe import catalog


def templates(name: str, folder: str, python: bool) -> dict[str, str]:
    """{relative path: text} of a new recipe folder."""
    if not KINDS["name"][0].fullmatch(name):
        raise UsageError(f"'{name}' is not a valid recipe name ({KINDS['name'][1]})")
    files = {"recipe.py" if python else "app.toml": "recipe.py" if python else "app.toml",
             "requirements.txt": "requirements.txt", "src/main.py": "main.py"}
    root = resources.files("generator") / "templates"
    return {rel: (root / src).read_text(encoding="utf-8").replace("@NAME@", name).replace("@DIR@", folder)
            for rel, src in files.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="recipe name (lower-case letters, digits, '-', '_'); the image is NAME-<site>")
    parser.add_argument("--python", action="store_true", help="a Python recipe (recipe.py, generator.api) instead of app.toml")
    parser.add_argument("--out", type=Path, help="folder to create (default: NAME)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def run(args: argparse.Namespace) -> int:

    out = args.out or Path(args.name)
    texts = templates(args.name, out.as_posix(), args.python)
    paths = {out / rel: text for rel, text in texts.items()}
    existing = [str(p) for p in paths if p.exists()]
    if existing and not args.force:
        raise UsageError(f"{', '.join(existing)} exist (use --force to overwrite)")
    write_set(paths)
    recipe = out / ("recipe.py" if args.python else "app.toml")
    catalog.load(recipe.as_posix())       # the template is a valid recipe: fail here, not in the user's next step
    print(f"{recipe}: edit it and src/, then: gen-recipe --site local --recipe {recipe} --explain")
    return 0
