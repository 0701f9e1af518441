"""Bare-vs-container measurement machinery for the suite (docs/measuring.md says why it looks like this).

Each side is a fork server (`python -m workloads.forkserver`): one started bare, one started through
the site's runtime command builder (`generator.run.runtimes`), so what runs here is what runs on a site.
A *pair* is a bare child and a container child forked next to each other in time (random order);
their work runs in short chunks that take turns in an ABBA pattern, so slow drift of the machine
hits both alike. Pairs, not steps, are the replicates (`generator.suite.stats`); the servers themselves
are replaced every few pairs (`compare`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import filecmp
import hashlib
import json
import os
import pwd
import random
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from generator.recipe import payload
from generator.run import runtimes, slurmjob
from generator.model.site import Site
from generator.suite.stats import Pair, Process
from generator.recipe import catalog
from generator.errors import GenRecipeError
from generator.files import one_at_a_time
from generator.images import context
from generator.suite import fitness, sequential
from generator.suite.metric import expected, metric
from workloads.registry import Size

LOGS = Path("build") / "logs"     # what a failed step printed, whole (the failure itself is one line)
SERVER = ("-m", "workloads.forkserver")
TIMEOUT = 600.0
PAIRS_PER_SERVER = 3     # see compare()
BUDGET_S = 600.0         # per comparison: an adaptive design stops (undecided) when the next batch would pass it


class HarnessError(RuntimeError):
    """A side failed to start or answer; the message carries its stderr tail."""


class Unlike(HarnessError):
    """The two sides of a comparison do not run the same thing: no verdict (the message says what differs)."""


class CannotRunHere(HarnessError):
    """The workload exited 77: a requirement is missing on this side (e.g. torchvision)."""


@dataclass(frozen=True)
class Side:
    """How to start one side's fork server: argv, environment, one-off set-up commands."""

    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    setup: tuple[tuple[str, ...], ...] = ()
    extra_args: tuple[str, ...] = ()      # appended to every workload this side spawns (the guard's tests)


class StepFailed(HarnessError):
    """Making the image or the bare twin failed; the message is one line naming the step, the fix and the log."""


def _step(argv: Sequence[str], what: str, log: Path, fix: str) -> None:
    """Run one step of making an environment, its output appended to `log`; a failure is one line."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        if subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT).returncode != 0:
            tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:]
            raise StepFailed(f"{what} failed ({tail[0].strip()[:200] if tail else 'no output'}); {fix} "
                             f"(log: {log})")


def bare_python(site: Site, recipe, cache: Path = Path("build") / "bare", *,
                progress=lambda line: print(line, file=sys.stderr)) -> str:
    """A virtual environment on the host holding what the recipe's image holds (the same `python_spec`:
    the same torch wheel or index, the same pins, the distro's mpi4py through the system site
    packages), made from the interpreter running this suite (Debian's python3 for `local`, the one the
    images use). Reused when its spec has not changed. Returns its python; StepFailed names a failed step."""
    r = catalog.load(recipe)
    recipe = r.name
    spec = r.python(site)
    if spec is None:
        raise StepFailed(f"recipe {recipe} has no Python environment (python(site) gives None): the suite has no "
                         "bare twin to make; give the recipe a python(site) (generator.api)")
    dest = twin_dir(site, r, spec, cache)
    if complete(dest, spec):
        return str(dest / "bin" / "python")
    stack = _stack_recipe(site, spec)
    if stack and stack_twin(site, spec, cache) is None:      # the stack's twin first: this one starts from it
        bare_python(site, stack, cache, progress=progress)
    with one_at_a_time(cache / f".{dest.name}.lock",         # a concurrent session may be making it
                       lambda: progress(f"waiting for another session making the bare twin {dest}")):
        return _make_twin(site, r, spec, dest, cache, progress)


def twin_dir(site: Site, r, spec, cache: Path) -> Path:
    """Where the twin of `spec` lives: keyed by what it holds, not by the site, so two site files of one
    machine (local and local-slurm: the same interpreter, the same MPI) share one twin."""
    return (cache / f"{r.name}-{_twin_key(site, spec)}").absolute()


def complete(twin: Path, spec) -> bool:
    """Whether `twin` was made to the end and holds `spec` (its `.complete`, written last, says what it holds)."""
    try:
        return (twin / ".complete").read_text() == repr(spec) + "\n"
    except (OSError, UnicodeDecodeError):
        return False


def _twin_key(site: Site, spec) -> str:
    same = (repr(spec), str(Path(sys.executable).resolve()), site.mpi.flavour, site.mpi.version, site.mpi.install_path)
    return hashlib.sha256(repr(same).encode()).hexdigest()[:12]


def stack_twin(site: Site, spec, cache: Path) -> Path | None:
    """A complete twin holding everything of `spec` but an application's own packages (`spec.app`, `app_wheels`):
    the twin of the stack the app's image is built on (llm's transformers on the pytorch twin), or None."""
    stack = _stack_spec(spec)
    if stack is None:
        return None
    suffix = f"-{_twin_key(site, stack)}"
    found = [d for d in sorted(cache.absolute().iterdir()) if d.name.endswith(suffix) and not d.name.startswith(".")
             and complete(d, stack)] if cache.is_dir() else []
    return found[0] if found else None


def _stack_spec(spec):
    """`spec` without an application's own packages (the stack its image is built on), or None when it has none."""
    return dataclasses.replace(spec, app=(), app_wheels=()) if spec.app or spec.app_wheels else None


def _stack_recipe(site: Site, spec) -> str:
    """The built-in recipe whose Python environment is `spec` without its app packages (llm's: pytorch's), or ""."""
    stack = _stack_spec(spec)
    return "" if stack is None else next((n for n in catalog.names() if catalog.load(n).python(site) == stack), "")


def copy_twin(src: Path, dest: Path) -> None:
    """`src`'s twin as `dest`, its files hard links (pip never writes a file in place: what it installs or removes
    later in `dest` leaves `src` as it was); the files that name the twin's own folder (pyvenv.cfg, bin/'s scripts
    and activate files) written anew with `dest` in it, never through the shared inode. `.complete` is not copied:
    an interrupted copy is never taken for a twin. OSError when a file cannot be linked (another file system, or
    links to files of others refused: fs.protected_hardlinks)."""
    shutil.copytree(src, dest, symlinks=True, copy_function=os.link, ignore=shutil.ignore_patterns(".complete"))
    old, new = str(src).encode(), str(dest).encode()
    for path in [dest / "pyvenv.cfg", *sorted((dest / "bin").iterdir())]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            tmp = path.with_name(f".{path.name}.new")
            tmp.write_bytes(data.replace(old, new))
            shutil.copymode(path, tmp)
            os.replace(tmp, path)


def _make_twin(site: Site, r, spec, dest: Path, cache: Path, progress) -> str:
    recipe, python = r.name, dest / "bin" / "python"
    if complete(dest, spec):
        return str(python)
    if dest.exists():                                   # a twin left half-made by an interrupted session
        shutil.rmtree(dest)
    base = Path(sys.executable).resolve()          # through the suite's venv to the real interpreter
    progress(f"making the bare twin of the {recipe} image's environment in {dest}")
    LOGS.mkdir(parents=True, exist_ok=True)
    log = (LOGS / f"bare-{site.name}-{recipe}.log").absolute()
    log.write_text("")
    what = f"making the bare twin of the {recipe} image for site {site.name}"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-cache-dir"]
    stack = stack_twin(site, spec, cache)
    if stack is not None:             # the image's own layers: the stack's, then the app's packages on them
        progress(f"the bare twin {dest.name} starts as hard links to {stack.name}, which holds all but the app's packages")
        try:
            copy_twin(stack, dest)
            return _finish_twin(r, spec, dest, cache, pip, what, log, progress)
        except (OSError, shutil.Error) as exc:          # links refused: made from scratch instead
            progress(f"linking {stack.name} into {dest.name} failed ({exc.__class__.__name__}); making it from scratch")
            shutil.rmtree(dest, ignore_errors=True)
    _step([str(base), "-m", "venv", *(["--system-site-packages"] if spec.system_site_packages else []), str(dest)],
          what + ": python -m venv", log, "check that python3-venv is installed")
    try:
        wheels = [str(context.fetch_wheel(site, context.CACHE_DIR.absolute(), progress))] if spec.wheels else []
    except GenRecipeError as exc:
        raise StepFailed(f"{what}: {exc}") from None
    for index, reqs in spec.index_packages:
        _step([*pip, "--index-url", index, *reqs], f"{what}: pip install {' '.join(reqs)} from {index}", log,
              "make the index reachable (proxy), or run on the site itself")
    if wheels or spec.requirements:
        _step([*pip, *wheels, *spec.requirements], f"{what}: pip install {' '.join(spec.requirements) or 'the wheel'}",
              log, "make the package index reachable")
    if spec.mpi4py:
        version, _ = spec.mpi4py
        _step([*pip, "--no-binary=mpi4py", f"mpi4py=={version}"], f"{what}: building mpi4py {version}", log,
              "load the site's MPI module (mpicc on PATH)")
    return _finish_twin(r, spec, dest, cache, pip, what, log, progress)


def _finish_twin(r, spec, dest: Path, cache: Path, pip: list[str], what: str, log: Path, progress) -> str:
    """The app's packages (the image's last Python layer), shared files linked, and the twin marked complete."""
    if spec.app or spec.app_wheels:
        local = [str(r.folder.absolute() / w.removeprefix("app/")) for w in spec.app_wheels]
        _step([*pip, *local, *spec.app], f"{what}: pip install {' '.join([*spec.app_wheels, *spec.app])}", log,
              "make the package index reachable")
    saved = link_duplicates(dest, [d for d in cache.absolute().iterdir() if d != dest and (d / ".complete").is_file()])
    if saved:
        progress(f"{saved / 2**20:.0f} MiB of {dest.name} hard-linked to identical files of other bare twins")
    (dest / ".complete").write_text(repr(spec) + "\n")
    return str(dest / "bin" / "python")


def link_duplicates(dest: Path, others: Sequence[Path], min_size: int = 2**20) -> int:
    """Replace each file of `dest` of at least `min_size` bytes by a hard link to a byte-identical file
    at the same place in one of `others` (every bare twin made from one torch wheel holds the same
    800 MB). Twins are made by pip and never written in place, so a shared inode changes nothing a run
    sees. Returns the bytes saved; a file on another file system stays a copy."""
    saved = 0
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()):
        size = path.stat().st_size
        if size < min_size:
            continue
        rel = path.relative_to(dest)
        for other in others:
            twin = other / rel
            if not twin.is_file() or twin.is_symlink() or twin.stat().st_size != size or twin.samefile(path):
                continue
            if filecmp.cmp(path, twin, shallow=False):
                tmp = path.with_name(f".{path.name}.link")
                try:
                    os.link(twin, tmp)
                except OSError:
                    break
                os.replace(tmp, path)
                saved += size
                break
    return saved


def bare_env(site: Site, mode: str, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment of a bare run: this process's, a directory holding only the workloads on
    PYTHONPATH, and what the launch scripts' bare twins set (`runtimes.bare_env`)."""
    return {**os.environ, "PYTHONPATH": str(payload.pythonpath()), **runtimes.bare_env(site, mode), **extra}


def bare_side(site: Site, python: str, mode: str, extra_env: Mapping[str, str] = {},
              wrapper: Sequence[str] = ()) -> Side:
    """The bare side: `python` (see `bare_python`) running the fork server on the host."""
    return Side("bare", (*wrapper, python, *SERVER), bare_env(site, mode, extra_env))


def container_run(site: Site, runtime: str, image: str, argv: Sequence[str], opts: runtimes.Options,
                  extra_env: Mapping[str, str] = {}) -> Side:
    """`argv` in `image` through the site's command builder for `runtime`, as run on this machine:
    host variables expanded, plus the environment the runtime's locally made images need."""
    cmd = runtimes.resolved(runtimes.command(site, image, argv, opts, runtime), os.environ)
    user = {} if os.environ.get("USER") else {"USER": pwd.getpwuid(os.geteuid()).pw_name}   # ch-run needs it (a login sets it)
    env = {**os.environ, **user, **cmd.env, **runtimes.PLATFORMS[runtime].local_env(), **extra_env}
    return Side(runtime, cmd.standalone(), env, cmd.setup)


def container_side(site: Site, runtime: str, image: str, opts: runtimes.Options,
                   wrapper: Sequence[str] = ()) -> Side:
    """The container side: the fork server through `container_run`."""
    side = container_run(site, runtime, image, ("python3", *SERVER), opts)
    return Side(runtime, (*wrapper, *side.argv), side.env, side.setup)


def run_setup(side: Side) -> None:
    """The side's one-off set-up commands (`Command.setup`: an execution mode, ch-fromhost)."""
    for step in side.setup:
        subprocess.run(step, env=dict(side.env), check=True, capture_output=True)


class Server:
    """A running fork server; requests are lines, answers JSON lines tagged with the child id."""

    def __init__(self, side: Side, *, setup: bool = True, wait: bool = True) -> None:
        """Start the server (after the side's set-up commands unless `setup` is false); with `wait`
        false, call `ready()` before the first request (to start several at once)."""
        self.side = side
        if setup:
            run_setup(side)
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
class Comparison:
    pairs: tuple[Pair, ...]
    ready_s: tuple[tuple[float, float], ...]      # (bare, container) time from fork to ready, per pair
    series: Mapping[str, list] = field(default_factory=dict)   # raw chunk series for extra_info
    environment: Mapping[str, Mapping] = field(default_factory=dict)   # {"bare", "container"}: the like-for-like records
    waits: tuple[tuple[float | None, float | None], ...] = ()   # (bare, container) share of time waiting for a CPU, per pair
    steal: tuple[float | None, ...] = ()          # the hypervisor's share of the CPU time over each pair

    def load(self) -> fitness.Load:
        """What the machine took from this comparison (`generator.suite.fitness`), over all its pairs."""
        def mean(values):
            values = list(values)
            return None if not values or any(v is None for v in values) else sum(values) / len(values)
        return fitness.Load(mean(w[0] for w in self.waits), mean(w[1] for w in self.waits), mean(self.steal))


def _process(chunks: list[dict]) -> Process:
    return Process(work=tuple(float(c["samples"]) for c in chunks), seconds=tuple(float(c["seconds"]) for c in chunks))


def compare(a: Side, b: Side, name: str, w: Size, pairs: int | None = None, *, until=None, seed: int = 0,
            per_server: int = PAIRS_PER_SERVER) -> Comparison:
    """Fresh process pairs of workload `name` at size `w`, each run in ABBA-interleaved chunks; `a` is the
    reference side. Runs `pairs` pairs, or — with `until(pairs so far) -> bool` — batches of `per_server`
    pairs until it returns True (an adaptive design decides after each batch).

    Children forked from one server share part of its lasting speed (they inherit its memory), which
    a bootstrap over pairs cannot see; so both servers are replaced by fresh ones, started together,
    every `per_server` pairs. With one server per side for all 12 pairs, 20 A/A repeats covered 1.0
    in 16 (README, Performance)."""
    if pairs is None and until is None:
        raise ValueError("give pairs or until")
    rng = random.Random(seed)
    sides = {"a": a, "b": b}
    out, ready, series, environment, waits, steal = [], [], {"a": [], "b": []}, {}, [], []
    first = 0
    while pairs is None or first < pairs:
        last = first + per_server if pairs is None else min(pairs, first + per_server)
        with contextlib.ExitStack() as stack:
            servers = {k: stack.enter_context(Server(sides[k], setup=first == 0, wait=False)) for k in sides}
            for server in servers.values():
                server.ready()
            for i in range(first, last):
                before = fitness.cpu_times()
                chunks, starts = _run_pair(servers, name, w, f"{i}", rng)
                steal.append(fitness.steal_share(before, fitness.cpu_times()))
                waits.append(tuple(fitness.share([c.get("waited_s") for c in chunks[k]], [c.get("ran_s") for c in chunks[k]])
                                   for k in ("a", "b")))
                environment = environment or {"bare": starts["a"].get("environment") or {},
                                              "container": starts["b"].get("environment") or {}}
                out.append(Pair(bare=_process(chunks["a"]), container=_process(chunks["b"])))
                ready.append((float(starts["a"].get("startup_s") or 0), float(starts["b"].get("startup_s") or 0)))
                for k in sides:
                    series[k].append([c["samples"] / c["seconds"] for c in chunks[k]])
        first = last
        if until is not None and until(out):
            break
    return Comparison(tuple(out), tuple(ready), series, environment, tuple(waits), tuple(steal))


def load_record(comp: Comparison) -> dict:
    """The machine's load over a comparison, for its result's `extra`: the summary (`fitness.Load`) and per pair."""
    return {"load": comp.load().as_dict(), "waits": [list(w) for w in comp.waits], "steal": list(comp.steal)}


def decide(benchmark, a: Side, b: Side, name: str, w: Size, label: str, tol, *, rounds: int | None = None,
           design=None, budget_s: float = BUDGET_S, seed: int = 0, sides: tuple[str, str] = ("container", "bare metal")):
    """Pairs until the verdict decides (`generator.suite.sequential`: looks after every batch of fresh
    servers, an error rate spent across the looks), or the time budget or the design's last look ends
    it; with `rounds`, exactly that many pairs and one look. Returns (Comparison, Verdict)."""
    return decide_with(benchmark, lambda pairs, until: compare(a, b, name, w, pairs, until=until, seed=seed), label, tol,
                       rounds=rounds, design=design, budget_s=budget_s, sides=sides)


def decide_with(benchmark, collect, label: str, tol, *, rounds: int | None = None, design=None,
                budget_s: float = BUDGET_S, sides: tuple[str, str] = ("container", "bare metal")):
    """`decide` for any way of making pairs: `collect(pairs, until)` returns a Comparison of exactly
    `pairs` pairs, or of batches of PAIRS_PER_SERVER until `until(pairs so far)` says stop."""
    import time


    if rounds:      # a fixed number of pairs: one look, the whole error rate
        design = sequential.Design(first=max(rounds, 3), step=PAIRS_PER_SERVER, max_pairs=max(rounds, 3))
    design = design or sequential.Design()
    start, verdicts = time.monotonic(), []

    def until(pairs) -> bool:
        n = len(pairs)
        elapsed = time.monotonic() - start
        out_of_time = elapsed * (n + PAIRS_PER_SERVER) / n > budget_s
        if not (design.is_look(n) or out_of_time or n >= design.max_pairs):
            return False
        verdicts.append(sequential.look(label, pairs, tol, design, final=out_of_time or n >= design.max_pairs,
                                        sides=sides))
        return verdicts[-1].outcome != "continue"

    run = (lambda: collect(rounds, None)) if rounds else (lambda: collect(None, until))
    comp = benchmark.pedantic(run, rounds=1, iterations=1) if benchmark is not None else run()
    if rounds:
        verdicts.append(sequential.look(label, comp.pairs, tol, design, sides=sides))
    return comp, fitness.judge(verdicts[-1], comp.load(), tol)


# -- an application's workload: one run = one value of its metric (generator.model.app.Workload) ----------------

@dataclass(frozen=True)
class Run:
    """How to start one side's run of an application's workload."""

    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None = None
    setup: tuple[tuple[str, ...], ...] = ()


def app_bare_run(site: Site, recipe, python: str | None, mode: str) -> Run:
    """The workload on the host: the user's files, the bare twin's python first on PATH, the app's
    environment and what the launch scripts' bare twins set."""
    env = {**os.environ, **runtimes.bare_env(site, mode)}
    if python:
        venv = str(Path(python).parent.parent)
        env.update(PATH=f"{venv}/bin:{env.get('PATH', '')}", VIRTUAL_ENV=venv)
    env.update(recipe.env)
    workdir = recipe.local((recipe.workdir,))[0] if recipe.workdir else ""
    cwd = workdir if workdir and Path(workdir).is_dir() else str(recipe.folder.absolute())
    return Run("bare", recipe.local(recipe.workload.command), env, cwd)


def app_container_run(site: Site, runtime: str, image: str, argv: Sequence[str], opts: runtimes.Options) -> Run:
    """`argv` (the workload's command, or a probe) in the image, through `container_run`."""
    side = container_run(site, runtime, image, argv, opts)
    return Run(runtime, side.argv, side.env, None, side.setup)


def _completed(run: Run, timeout: float) -> subprocess.CompletedProcess:
    """`run` once to its end; a failure or a timeout is a one-line HarnessError."""
    try:
        done = subprocess.run(run.argv, env=dict(run.env), cwd=run.cwd, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{run.label}: `{shlex.join(run.argv)[:300]}` ran past its timeout ({timeout} s)") from None
    if done.returncode != 0:
        tail = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()][-1:]
        raise HarnessError(f"{run.label}: `{shlex.join(run.argv)[:300]}` exited with {done.returncode}"
                           + (f" ({tail[0].strip()[:200]})" if tail else ""))
    return done


def _run_once(run: Run, workload) -> tuple[float, float]:
    """One run: (its metric, its wall time); a failed run or a missing metric is a one-line HarnessError."""
    import time


    start = time.monotonic()
    done = _completed(run, workload.timeout)
    seconds = time.monotonic() - start
    value = metric(workload, done.stdout)
    if value is None or value <= 0:
        last = [ln for ln in done.stdout.splitlines() if ln.strip()][-1:]
        raise HarnessError(f"{run.label}: `{shlex.join(run.argv)[:300]}` reported no {workload.unit} value "
                           f"(expected {expected(workload)}"
                           + (f"; its last output line: {last[0].strip()[:160]!r}" if last else "; it printed nothing")
                           + ("" if value is None else f"; got {value}, not a positive number") + ")")
    return value, seconds


def collectives_problem(bare: Mapping | None, cont: Mapping | None) -> str | None:
    """Why the container's collectives are not on the bare run's network, or None: the GPU twin of
    the MPI transport check. Both sides' `collectives` records (workloads.dist.collectives)."""
    if not bare or not bare.get("on_fabric"):
        return None                     # the bare run is on sockets too (or says nothing): nothing to lose
    if not cont or cont.get("network") is None:
        return (f"bare metal's collectives use {bare['network']}, the container's said nothing "
                f"({(cont or {}).get('evidence', 'no collectives record')})")
    if not cont.get("on_fabric"):
        return (f"the container's collectives fell back to {cont['network']} while bare metal's use "
                f"{bare['network']} (container: {cont.get('evidence')}; bare: {bare.get('evidence')})")
    if cont.get("network") != bare.get("network") or cont.get("provider") != bare.get("provider"):
        return (f"the container's collectives use {cont['network']} ({cont.get('provider')}), bare metal's "
                f"{bare['network']} ({bare.get('provider')})")
    return None


def records_of(run: Run, name: str, timeout: float) -> list[dict]:
    """One run of `run`, its JSON records of workload `name` (a failed run is a one-line HarnessError)."""
    return [r for r in slurmjob.json_lines(_completed(run, timeout).stdout) if r.get("workload") == name]


def _as_process(value: float, better: str) -> Process:
    """One run as a Process whose speed (work / seconds) is higher-is-better: a throughput as is, a time inverted."""
    return Process(work=(value,), seconds=(1.0,)) if better == "higher" else Process(work=(1.0,), seconds=(value,))


def compare_runs(a: Run, b: Run, workload, pairs: int | None = None, *, until=None, seed: int = 0,
                 per_batch: int = PAIRS_PER_SERVER, setup: bool = True) -> Comparison:
    """Pairs of fresh runs, one per side in random order; `a` is the reference side (see `compare`).
    The sides' set-up commands run first unless `setup` is false (`same_packages` ran them)."""
    if pairs is None and until is None:
        raise ValueError("give pairs or until")
    rng = random.Random(seed)
    for run in (a, b) if setup else ():
        run_setup(Side(run.label, run.argv, run.env, run.setup))
    out, walls, values, steal = [], [], {"a": [], "b": []}, []
    while pairs is None or len(out) < pairs:
        last = len(out) + per_batch if pairs is None else min(pairs, len(out) + per_batch)
        while len(out) < last:
            order = ["a", "b"] if rng.random() < 0.5 else ["b", "a"]
            before = fitness.cpu_times()
            got = {k: _run_once({"a": a, "b": b}[k], workload) for k in order}
            steal.append(fitness.steal_share(before, fitness.cpu_times()))
            out.append(Pair(bare=_as_process(got["a"][0], workload.better),
                            container=_as_process(got["b"][0], workload.better)))
            walls.append((got["a"][1], got["b"][1]))
            for k in got:
                values[k].append([got[k][0]])
        if until is not None and until(out):
            break
    return Comparison(tuple(out), tuple(walls), values, steal=tuple(steal))


VERSIONS = ("import json, sys\nfrom importlib import metadata\nout = {}\nfor name in sys.argv[1:]:\n"
            "    try:\n        out[name] = metadata.version(name)\n    except metadata.PackageNotFoundError:\n"
            "        out[name] = None\nprint(json.dumps(out))")


def versions_argv(names: Sequence[str]) -> tuple[str, ...]:
    """A python3 command printing {name: version or null} for the distributions `names`."""
    return ("python3", "-c", VERSIONS, *names)


def same_packages(bare: Run, container: Run) -> None:
    """The like-for-like guard for applications: each side runs `versions_argv` for the recipe's Python
    packages (torch, mpi4py, the app's pins); Unlike names what differs between the two."""
    seen = {}
    for run in (bare, container):
        run_setup(Side(run.label, run.argv, run.env, run.setup))
        done = subprocess.run(run.argv, env=dict(run.env), cwd=run.cwd, capture_output=True, text=True,
                              timeout=TIMEOUT)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise HarnessError(f"{run.label}: python3 could not list its packages ({tail})")
        seen[run.label] = json.loads(lines[-1])
    differs = differences(seen[bare.label], seen[container.label])
    if differs:
        raise Unlike(f"{bare.label} and {container.label} do not run the same Python packages ({'; '.join(differs)}): "
                     "no verdict")


def _run_pair(servers: Mapping[str, Server], name: str, w: Size, tag: str, rng: random.Random):
    """Fork one child on each side (random order), run their chunks ABBA, close them."""
    order = ["a", "b"] if rng.random() < 0.5 else ["b", "a"]
    starts = {k: servers[k].request(f"spawn {k}{tag} {name} {' '.join((*w.args, *servers[k].side.extra_args))}")
              for k in order}
    differs = differences(starts["a"].get("environment") or {}, starts["b"].get("environment") or {})
    if differs:
        for k in order:
            servers[k].request(f"close {k}{tag}")
        raise Unlike(f"{servers['a'].side.label} and {servers['b'].side.label} do not run the same thing "
                     f"({'; '.join(differs)}): no verdict on {name}")
    chunks = {"a": [], "b": []}
    for c in range(w.chunks):
        for k in (order if c % 2 == 0 else order[::-1]):
            chunks[k].append(servers[k].request(f"send {k}{tag} run {w.steps}"))
    for k in order:
        servers[k].request(f"close {k}{tag}")
    return chunks, starts


def differences(a: Mapping, b: Mapping) -> list[str]:
    """What differs between two sides' `environment` records (workloads.common.environment)."""
    return [f"{key} {a.get(key)!r} vs {b.get(key)!r}" for key in sorted({*a, *b}) if a.get(key) != b.get(key)]


def throttle_argv(slowdown: float) -> tuple[str, ...]:
    """A wrapper that slows everything it starts by `slowdown` (SIGSTOP/SIGCONT duty cycle)."""
    return (sys.executable, str(Path(__file__).with_name("throttle.py")), "--slowdown", str(slowdown), "--")
