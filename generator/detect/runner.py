"""Running probes: one command (or one file, glob or set of environment variables) each.

A probe reads one text and a pure parser turns that text into clues. The command runner is
injected: the real one runs the command in a subprocess with a time limit; tests pass a
function `argv -> (rc, text)` or a dict `{probe key: recorded output}`. Files, device globs
and `/sys` entries are read under a root directory (a fake tree in tests), environment
variables from an injected mapping. Nothing here raises for a missing, hanging or garbled
probe: each ends as an `Observation` that says what happened.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from generator.model.runtimes import PLATFORMS

NOT_FOUND = 127  # the shell's "command not found"
TIMED_OUT = 124  # what timeout(1) exits with
SBIN = ("/usr/sbin", "/sbin")  # ldconfig lives here and is often not on a user's PATH
# Commands that write into $HOME on every call (a runtime's `VersionProbe.scratch_env`): they run with
# those variables in a scratch directory.
SCRATCH_ENV = {r.probe.command[0]: r.probe.scratch_env for r in PLATFORMS.values() if r.probe.scratch_env}

Runner = Callable[[Sequence[str]], "tuple[int, str]"]


@dataclass(frozen=True)
class Clue:
    """One fact candidate read off one line of a probe's output."""

    key: str        # "mpi.version", "runtimes.podman", "fabric.fi_providers", ...
    value: object   # a string, int or tuple of strings
    line: str       # the output line it was read from (shown next to the fact)


@dataclass(frozen=True)
class Probe:
    """One command (argv) or one reader (files under the root, environment) and its parser."""

    key: str                                           # shown in comments; names the fixture file
    parse: Callable[[str], list[Clue]]
    argv: tuple[str, ...] = ()
    read: Callable[[Path, Mapping[str, str]], str | None] | None = None  # None: not there


@dataclass(frozen=True)
class Observation:
    probe: Probe
    status: str                  # "ok", or why there are no clues: "not found", "timed out after 10 s", ...
    clues: tuple[Clue, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.clues)


def fixture_name(key: str) -> str:
    """File name of a probe's recorded output: 'fi_info -l' -> 'fi_info_-l.txt'."""
    return key.replace(" ", "_").replace("/", "_") + ".txt"


def subprocess_runner(env: Mapping[str, str], timeout: float, scratch: Path) -> Runner:
    """The real runner: PATH from `env`, merged stdout+stderr, stdin closed, cwd in `scratch`.

    On timeout the whole process group is killed (a hanging script's children too)."""
    path = os.pathsep.join([env.get("PATH", os.defpath), *SBIN])
    child_env = dict(env, LC_ALL="C", LANG="C")
    if "USER" not in child_env:  # ch-run refuses to start without $USER
        try:
            child_env["USER"] = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            child_env["USER"] = str(os.getuid())

    def run(argv: Sequence[str]) -> tuple[int, str]:
        exe = shutil.which(argv[0], path=path)
        if exe is None:
            return NOT_FOUND, ""
        run_env = dict(child_env, **{k: str(scratch / v) for k, v in SCRATCH_ENV.get(argv[0], {}).items()})
        try:
            proc = subprocess.Popen([exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=run_env, cwd=scratch, start_new_session=True)
        except OSError as exc:
            return 126, f"cannot run {exe}: {exc.strerror}"
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return TIMED_OUT, ""
        return proc.returncode, out.decode("utf-8", "replace")

    return run


def recorded_runner(outputs: Mapping[str, str | tuple[int, str]]) -> Callable[[Probe], tuple[int, str]]:
    """A fake runner from recorded outputs keyed by probe key; a missing key is 'not found'."""
    def run(probe: Probe) -> tuple[int, str]:
        out = outputs.get(probe.key)
        if out is None:
            return NOT_FOUND, ""
        return out if isinstance(out, tuple) else (0, out)
    return run


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "(no output)")[:100]


def observe(probe: Probe, run: Callable[[Probe], tuple[int, str]], root: Path, env: Mapping[str, str],
            timeout: float) -> Observation:
    """Run or read one probe and parse it; never raises."""
    if probe.read is not None:
        try:
            text = probe.read(root, env)
        except (OSError, UnicodeDecodeError) as exc:
            return Observation(probe, f"cannot read: {exc}")
        if text is None:
            return Observation(probe, "not there")
        rc = 0
    else:
        rc, text = run(probe)
        if rc == NOT_FOUND:
            return Observation(probe, "not found")
        if rc == TIMED_OUT:
            return Observation(probe, f"timed out after {timeout:g} s")
        if rc != 0:
            return Observation(probe, f"exit {rc}: {first_line(text)}")
    try:
        clues = tuple(probe.parse(text))
    except Exception as exc:  # a parser must never take detect down with it  # noqa: BLE001
        return Observation(probe, f"output not understood ({type(exc).__name__}): {first_line(text)}")
    return Observation(probe, "ok" if clues else f"output not understood: {first_line(text)}", clues)


def run_probes(probes: Sequence[Probe], runner: Runner | Mapping | None = None, root: Path = Path("/"),
               env: Mapping[str, str] | None = None, timeout: float = 10.0) -> tuple[Observation, ...]:
    """Observe every probe (commands in parallel). `runner`: None = real subprocesses, a function
    argv -> (rc, text), or a mapping {probe key: output or (rc, output)}."""
    env = dict(os.environ) if env is None else env
    with tempfile.TemporaryDirectory(prefix="gen-recipe-detect-") as scratch:
        if runner is None:
            by_argv = subprocess_runner(env, timeout, Path(scratch))
            run = lambda probe: by_argv(probe.argv)  # noqa: E731
        elif isinstance(runner, Mapping):
            run = recorded_runner(runner)
        else:
            run = lambda probe: runner(probe.argv)  # noqa: E731
        with ThreadPoolExecutor(max_workers=8) as pool:
            return tuple(pool.map(lambda p: observe(p, run, root, env, timeout), probes))


# -- readers: text of files, globs and environment variables under a (fake) root ----------

def under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def read_file(path: str) -> Callable[[Path, Mapping[str, str]], str | None]:
    def read(root: Path, env: Mapping[str, str]) -> str | None:
        p = under(root, path)
        return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else None
    return read


def read_glob(*patterns: str) -> Callable[[Path, Mapping[str, str]], str | None]:
    """The paths matching the patterns, one a line, as absolute paths on the probed machine."""
    def read(root: Path, env: Mapping[str, str]) -> str | None:
        found = sorted({"/" + os.path.relpath(p, root) for pat in patterns
                        for p in glob.glob(str(under(root, pat)))})
        return "\n".join(found) + "\n" if found else None
    return read


def read_ib_ports(root: Path, env: Mapping[str, str]) -> str | None:
    """'/sys/class/infiniband/<dev>/ports/<n>/link_layer' lines with their contents."""
    lines = []
    for dev in sorted(under(root, "/sys/class/infiniband").glob("*")):
        ports = sorted(dev.glob("ports/*/link_layer"))
        for port in ports:
            lines.append(f"/{os.path.relpath(port, root)}: {port.read_text(errors='replace').strip()}")
        if not ports:
            lines.append(f"/{os.path.relpath(dev, root)}: ")
    return "\n".join(lines) + "\n" if lines else None


def read_env(*names: str) -> Callable[[Path, Mapping[str, str]], str | None]:
    def read(root: Path, env: Mapping[str, str]) -> str | None:
        found = [f"{n}={env[n]}" for n in names if env.get(n)]
        return "\n".join(found) + "\n" if found else None
    return read
