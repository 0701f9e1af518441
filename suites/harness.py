"""Bare-vs-container measurement machinery for the suite (see MEASURING.md for why it looks like this).

Each side is a fork server (`python -m workloads.forkserver`): one started bare, one started through
the site's runtime command builder (`generator.runtimes`), so what runs here is what runs on a site.
A *pair* is a bare child and a container child forked next to each other in time (random order);
their work runs in short chunks that take turns in an ABBA pattern, so slow drift of the machine
hits both alike. Pairs, not steps, are the replicates (`generator.stats`); the servers themselves
are replaced every few pairs (`compare`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from generator import runtimes
from generator.build import udocker_env
from generator.site import Site
from generator.stats import Pair, Process

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
SERVER = ("-m", "workloads.forkserver")
TIMEOUT = 600.0
PAIRS_PER_SERVER = 3     # see compare()


class HarnessError(RuntimeError):
    """A side failed to start or answer; the message carries its stderr tail."""


class CannotRunHere(HarnessError):
    """The workload exited 77: a requirement is missing on this side (e.g. torchvision)."""


@dataclass(frozen=True)
class Side:
    """How to start one side's fork server: argv, environment, one-off set-up commands."""

    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    setup: tuple[tuple[str, ...], ...] = ()


def bare_python(site: Site, recipe: str, cache: Path = Path("build") / "bare", *,
                progress=lambda line: print(line, file=sys.stderr)) -> str:
    """A virtual environment on the host holding what the recipe's image holds (the same `python_spec`:
    the same torch wheel or index, the same pins, the distro's mpi4py through the system site
    packages), made from the interpreter running this suite (Debian's python3 for `local`, the one the
    images use). Reused when its spec has not changed. Returns its python."""
    import hashlib

    from generator import build, catalog
    from generator.blocks.stack import python_spec
    from generator.plan import plan

    module = catalog.load(recipe)
    spec = python_spec(site, plan(site), getattr(module, "requirements", lambda s: [])(site))
    key = hashlib.sha256(repr(spec).encode()).hexdigest()[:12]
    dest = (cache / f"{site.name}-{recipe}-{key}").absolute()
    python = dest / "bin" / "python"
    if (dest / ".complete").is_file():
        return str(python)
    base = Path(sys.executable).resolve()          # through the suite's venv to the real interpreter
    progress(f"making the bare twin of the {recipe} image's environment in {dest}")
    subprocess.run([str(base), "-m", "venv", *(["--system-site-packages"] if spec.system_site_packages else []),
                    str(dest)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-cache-dir"]
    wheels = [str(build.fetch_wheel(site, build.CACHE_DIR.absolute(), progress))] if spec.wheels else []
    for index, reqs in spec.index_packages:
        subprocess.run([*pip, "--index-url", index, *reqs], check=True)
    if wheels or spec.requirements:
        subprocess.run([*pip, *wheels, *spec.requirements], check=True)
    if spec.mpi4py:
        version, _ = spec.mpi4py
        subprocess.run([*pip, "--no-binary=mpi4py", f"mpi4py=={version}"], check=True)
    (dest / ".complete").write_text(repr(spec) + "\n")
    return str(python)


def bare_env(site: Site, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment of a bare run: this process's, the workloads on PYTHONPATH, the site's run env."""
    return {**os.environ, "PYTHONPATH": str(RECIPES), **site.container.env, **extra}


def bare_side(site: Site, python: str, extra_env: Mapping[str, str] = {}, wrapper: Sequence[str] = ()) -> Side:
    """The bare side: `python` (see `bare_python`) running the fork server on the host."""
    return Side("bare", (*wrapper, python, *SERVER), bare_env(site, extra_env))


def container_side(site: Site, runtime: str, image: str, opts: runtimes.Options,
                   wrapper: Sequence[str] = ()) -> Side:
    """The container side through the site's command builder for `runtime`."""
    cmd = runtimes.resolved(runtimes.command(site, image, ("python3", *SERVER), opts, runtime), os.environ)
    env = {**os.environ, **cmd.env, **(udocker_env() if runtime == "udocker" else {})}
    return Side(runtime, (*wrapper, *cmd.standalone()), env, cmd.setup)


class Server:
    """A running fork server; requests are lines, answers JSON lines tagged with the child id."""

    def __init__(self, side: Side, *, setup: bool = True, wait: bool = True) -> None:
        """Start the server (after the side's set-up commands unless `setup` is false); with `wait`
        false, call `ready()` before the first request (to start several at once)."""
        self.side = side
        if setup:
            for step in side.setup:
                subprocess.run(step, env=dict(side.env), check=True, capture_output=True)
        self.errlog = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(side.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog,
                                     env=dict(side.env), text=True, bufsize=1, start_new_session=True)
        if wait:
            self.ready()

    def ready(self) -> Server:
        first = self._answer()
        if first.get("event") != "server-ready":
            raise self._error(f"unexpected first line {first}")
        return self

    def _error(self, what: str) -> HarnessError:
        self.errlog.seek(0)
        tail = self.errlog.read()[-1500:]
        return HarnessError(f"{self.side.label} side ({' '.join(self.side.argv[:6])} ...): {what}\n{tail}")

    def _answer(self) -> dict:
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
            if not ready:
                raise self._error(f"no answer within {TIMEOUT:.0f} s")
            line = self.proc.stdout.readline()
            if not line:
                raise self._error(f"exited with code {self.proc.wait()}")
            try:
                return json.loads(line)
            except ValueError:
                continue  # a runtime's own chatter on stdout

    def request(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        if answer.get("event") == "exit" and answer.get("code") == 77:
            err = self._error(f"'{line}': the workload cannot run here")
            raise CannotRunHere(str(err))
        if answer.get("event") in ("error", "exit"):
            raise self._error(f"'{line}' → {answer}")
        return answer

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.errlog.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass(frozen=True)
class Workload:
    """What the suite runs: name, arguments (sizes for this machine), chunks per process, steps per chunk."""

    name: str
    args: tuple[str, ...]
    chunks: int = 6
    steps: int = 2


@dataclass(frozen=True)
class Comparison:
    pairs: tuple[Pair, ...]
    ready_s: tuple[tuple[float, float], ...]      # (bare, container) time from fork to ready, per pair
    series: Mapping[str, list] = field(default_factory=dict)   # raw chunk series for extra_info


def _process(chunks: list[dict]) -> Process:
    return Process(work=tuple(float(c["samples"]) for c in chunks), seconds=tuple(float(c["seconds"]) for c in chunks))


def compare(a: Side, b: Side, w: Workload, pairs: int, *, seed: int = 0,
            per_server: int = PAIRS_PER_SERVER) -> Comparison:
    """`pairs` fresh process pairs, each run in ABBA-interleaved chunks; `a` is the reference side.

    Children forked from one server share part of its lasting speed (they inherit its memory), which
    a bootstrap over pairs cannot see; so both servers are replaced by fresh ones, started together,
    every `per_server` pairs. With one server per side for all 12 pairs, 20 A/A repeats covered 1.0
    in 16 (README, Performance)."""
    rng = random.Random(seed)
    sides = {"a": a, "b": b}
    out, ready, series = [], [], {"a": [], "b": []}
    for first in range(0, pairs, per_server):
        with contextlib.ExitStack() as stack:
            servers = {k: stack.enter_context(Server(sides[k], setup=first == 0, wait=False)) for k in sides}
            for server in servers.values():
                server.ready()
            for i in range(first, min(pairs, first + per_server)):
                chunks, starts = _run_pair(servers, w, f"{i}", rng)
                out.append(Pair(bare=_process(chunks["a"]), container=_process(chunks["b"])))
                ready.append((float(starts["a"].get("startup_s") or 0), float(starts["b"].get("startup_s") or 0)))
                for k in sides:
                    series[k].append([c["samples"] / c["seconds"] for c in chunks[k]])
    return Comparison(tuple(out), tuple(ready), series)


def _run_pair(servers: Mapping[str, Server], w: Workload, tag: str, rng: random.Random):
    """Fork one child on each side (random order), run their chunks ABBA, close them."""
    order = ["a", "b"] if rng.random() < 0.5 else ["b", "a"]
    starts = {k: servers[k].request(f"spawn {k}{tag} {w.name} {' '.join(w.args)}") for k in order}
    chunks = {"a": [], "b": []}
    for c in range(w.chunks):
        for k in (order if c % 2 == 0 else order[::-1]):
            chunks[k].append(servers[k].request(f"send {k}{tag} run {w.steps}"))
    for k in order:
        servers[k].request(f"close {k}{tag}")
    return chunks, starts


def throttle_argv(slowdown: float) -> tuple[str, ...]:
    """A wrapper that slows everything it starts by `slowdown` (SIGSTOP/SIGCONT duty cycle)."""
    return (sys.executable, str(Path(__file__).with_name("throttle.py")), "--slowdown", str(slowdown), "--")
