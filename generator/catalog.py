"""The recipes: importable modules of the top-level `recipes` package (the `recipes/` folder).

A recipe module has a docstring whose first line describes it and a pure function
`build(site) -> list[hpccm.Stage]`. Recipes are imported, never exec'd.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import recipes as _recipes_pkg
from .errors import UsageError, did_you_mean


def names() -> list[str]:
    """All recipe names, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(_recipes_pkg.__path__)
                  if not m.ispkg and not m.name.startswith("_"))


def load(name: str) -> ModuleType:
    """Import recipe `name`; unknown names get a did-you-mean."""
    known = names()
    if name not in known:
        raise UsageError(f"unknown recipe '{name}' ({did_you_mean(name, known)}); see gen-recipe --list-recipes")
    module = importlib.import_module(f"{_recipes_pkg.__name__}.{name}")
    if not callable(getattr(module, "build", None)):
        raise UsageError(f"recipe '{name}' has no build(site) function")
    return module


def describe(module: ModuleType) -> str:
    return (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
