"""One error class per failure kind; each knows its exit code and prints as one line.

The CLI catches `GenRecipeError` and prints `gen-recipe: <message>` to stderr, never a
traceback. Exit codes: 1 = a check found something (files differ, lint findings),
2 = bad input (site file, recipe name, arguments, unreadable file).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

# Characters that break a line or drive a terminal: control characters and the Unicode line separators.
UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# What a terminal must never receive from an echoed value: the above and the bidirectional overrides and
# isolates that reorder what the reader sees (U+202A..U+202E, U+2066..U+2069), and lone surrogates (bytes
# that were not UTF-8, as os.fsdecode keeps them).
UNSAFE_FOR_TERMINAL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
MAX_MESSAGE = 1000


def shown(value: object) -> str:
    """A value (a file name, a field of a results file, a line of someone's file) as the terminal may show
    it inside gen-recipe's own output: every control, escape or bidirectional character as an escape, so
    it can neither end a line early nor drive the terminal. The one helper for every echoed string."""
    text = value if isinstance(value, str) else str(value)
    return UNSAFE_FOR_TERMINAL.sub(lambda m: ascii(m.group())[1:-1], text)


def one_line(text: str) -> str:
    """`text` safe to print as one line of a terminal: control characters (newlines, escape codes)
    shown as escapes, at most MAX_MESSAGE characters."""
    text = shown(text)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


class GenRecipeError(Exception):
    """Base class: a user-facing failure with an exit code; prints as one line."""

    exit_code = 2

    def __str__(self) -> str:
        return one_line(super().__str__())


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
