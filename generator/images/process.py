"""Running the tools that build, push and convert images: progress streamed, one-line errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from generator.errors import GenRecipeError


class BuildFailed(GenRecipeError):
    """A builder, push or conversion step failed."""

    exit_code = 1


class PushNotVerified(GenRecipeError):
    """The registry does not serve what was pushed."""

    exit_code = 1


class ToolMissing(GenRecipeError):
    """A needed program is not installed here."""

    exit_code = 2


def stderr_progress(line: str) -> None:
    print(f"  | {line}", file=sys.stderr, flush=True)


def need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise ToolMissing(f"{tool} not found on PATH (needed to {why})")
    return path


def stream(argv: Sequence[str], progress: Callable[[str], None], what: str, *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None) -> None:
    """Run argv, passing each output line to `progress`; BuildFailed names the last line."""
    last = ""
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", cwd=cwd, env=None if env is None else dict(env), bufsize=1)
    except FileNotFoundError:
        raise ToolMissing(f"{argv[0]} not found on PATH (needed to {what})") from None
    assert proc.stdout is not None
    for raw in proc.stdout:
        text = raw.rstrip("\n")
        progress(text)
        last = text.strip() or last
    rc = proc.wait()
    if rc != 0:
        raise BuildFailed(f"{what} failed: {argv[0]} exited {rc}" + (f" ({last[:300]})" if last else ""))


def quiet(argv: Sequence[str], what: str, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(list(argv), capture_output=True, **kw)
    except FileNotFoundError:
        raise ToolMissing(f"{argv[0]} not found on PATH (needed to {what})") from None
    if proc.returncode != 0:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode(errors="replace")
        last = [ln for ln in err.strip().splitlines() if ln.strip()]
        raise BuildFailed(f"{what} failed: {argv[0]} exited {proc.returncode}" + (f" ({last[-1][:300]})" if last else ""))
    return proc


def succeeds(argv: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=60).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False
