"""Helpers for the core tests: run the CLI in-process and capture what a user sees."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from generator.cli import main as cli
from generator.model import site


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run_cli(*argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return Result(code, out.getvalue(), err.getvalue())


def all_sites() -> list[str]:
    return sorted(set(site.builtin_names().values()))


def account(s: site.Site) -> str:
    """An account for a test's job at `s`: the site's example of one where it requires one, else none."""
    return (s.scheduler.account_example or "abc123") if s.scheduler.account == "required" else ""
