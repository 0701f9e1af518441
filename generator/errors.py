"""One error class per failure kind; each knows its exit code and prints as one line.

The CLI catches `GenRecipeError` and prints `gen-recipe: <message>` to stderr, never a
traceback. Exit codes: 1 = a check found something (files differ, lint findings),
2 = bad input (site file, recipe name, arguments, unreadable file).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class GenRecipeError(Exception):
    """Base class: a user-facing failure with an exit code."""

    exit_code = 2


class UsageError(GenRecipeError):
    """Bad command-line arguments or an unknown name (site, recipe, format)."""


class SiteError(GenRecipeError):
    """A site file that cannot be loaded: names the file, the key and a fix."""

    def __init__(self, path: str, key: str, problem: str, hint: str = "") -> None:
        self.path, self.key, self.problem, self.hint = path, key, problem, hint
        where = f"{path}: {key}: " if key else f"{path}: "
        super().__init__(where + problem + (f" ({hint})" if hint else ""))


class RecipeError(GenRecipeError):
    """A recipe that cannot be built for a site (missing fact, unsupported combination)."""


class CheckFailed(GenRecipeError):
    """`--check` found files on disk that differ from what would be generated."""

    exit_code = 1


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return "did you mean 'x'?" for the closest choice, or a list of the valid ones."""
    choices = sorted(choices)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return "valid: " + ", ".join(choices) if choices else ""
