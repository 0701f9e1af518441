"""Declarative application recipes: `app.toml` → the site's stack under the user's application.

    gen-recipe --site frontier --recipe ./myapp/app.toml

An app file names a base stack (`pytorch`, `llm`, `mpi`: the MPI and fabric only, `none`), the
application's distro packages, pinned pip requirements (inline or a requirements file), local files
to copy, build commands, the runtime environment, working directory, command and labels, and
optionally a `[workload]`: the command the suite measures bare vs container and how it reports its
metric. It is validated like a site file (types, patterns, did-you-mean; one line naming file and
key, exit 2); `recipes/_app.py` turns it into stages with the same public API a Python recipe uses
(`generator.api`), and the suite reads a run's metric with `generator.suite.metric`. `docs/apps.md`
documents every key. This module imports only the schema engine and the one read path (`generator.files`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


from generator import files
from generator.errors import SiteError, UsageError
from generator.model.schema import KINDS, Loader, fact, read_file, read_toml

SCHEMA_VERSION = 1
Base = Literal["pytorch", "llm", "mpi", "none"]
Better = Literal["higher", "lower"]
# Destinations an application may not take: what the images already use, and the system's own folders.
RESERVED = ("/opt/venv", "/opt/workloads", "/opt/wheels", "/opt/rocm", "/opt/nvidia", "/opt/ollama",
            "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
            "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var")
PARENTS = ("/", "/opt", "/srv")       # exist in every base image: Docker COPY and Apptainer %files agree


@dataclass(frozen=True, kw_only=True)
class Build:
    packages: tuple[str, ...] = fact(("g++",), (), "distro packages the build steps need (not in the runtime image)",
                                   kind="package")
    commands: tuple[str, ...] = fact(("make -C /opt/app/src",), (), "shell lines run in the build stage after the "
                                   "files are copied (your own code, like a Dockerfile RUN)", kind="command")
    keep: tuple[str, ...] = fact(("/opt/app-build",), (), "more paths the commands create that the runtime image keeps",
                               kind="imgpath")


@dataclass(frozen=True, kw_only=True)
class Python:
    requirements: tuple[str, ...] = fact(("tqdm==4.67.1",), (), "pinned pip requirements", kind="requirement")
    requirements_file: str = fact("requirements.txt", "", "a file of pinned requirements, relative to the app file "
                                "(read at generation: its pins are written into the recipe)", kind="relpath")
    wheels: tuple[str, ...] = fact(("dist/mypkg-1.0-py3-none-any.whl",), (), "your own wheel files, relative to the "
                                 "app file, installed into the image's environment (and the bare twin's)", kind="relpath")


@dataclass(frozen=True, kw_only=True)
class Run:
    packages: tuple[str, ...] = fact(("libgomp1",), (), "distro packages the application needs at run time", kind="package")
    env: Mapping[str, str] = fact({"OMP_NUM_THREADS": "1"}, None, "environment of the application", kind="value", keys="env")
    workdir: str = fact("/opt/app", "", "working directory of the default command", kind="imgpath")
    command: tuple[str, ...] = fact(("python3", "/opt/app/train.py"), (), "the image's default command "
                                  "(default: the workload's command)", kind="arg")
    labels: Mapping[str, str] = fact({"org.opencontainers.image.authors": "me@example.org"}, None, "image labels",
                                   kind="value", keys="key")


@dataclass(frozen=True, kw_only=True)
class AppWorkload:
    """What the suite measures bare vs container: one run of `command` reports one value of the metric."""

    command: tuple[str, ...] = fact(("python3", "/opt/app/train.py", "--steps", "20"), (), "one measured run, as "
                                  "run in the image (paths under a [files] destination run from your copy when bare)",
                                  kind="arg")
    json_key: str = fact("samples_per_s", "", "the metric is this key of the last JSON line on standard output",
                       kind="key")
    regex: str = fact("throughput: ([0-9.]+)", "", "... or the first group of the last match of this regular "
                    "expression in standard output", kind="text")
    unit: str = fact("samples/s", "", "the metric's unit", kind="unit")
    better: Better = fact("higher", "higher", "higher: a throughput; lower: a time")
    tolerance: float | None = fact(0.10, None, "allowed container slowdown as a fraction (pytest --tolerance "
                                 "overrides it; without either the suite measures but gives no verdict)")
    faster: float = fact(0.5, 0.5, "how much faster the container may be before the verdict says the two sides "
                       "cannot be running the same thing")
    timeout: int = fact(600, 600, "seconds one run may take")


@dataclass(frozen=True, kw_only=True)
class App:
    schema: int = fact(1, 1)
    name: str = fact("mytrainer", doc="image name: <name>-<site>", kind="name")
    description: str = fact("My training script on the site's PyTorch stack", "")
    base: Base = fact("pytorch", doc="pytorch, llm (pytorch + transformers + the site's ollama), mpi (MPI and fabric "
                    "only), none")
    files: Mapping[str, str] = fact({"src": "/opt/app"}, None, "local path (relative to this file) = destination in the "
                                  "image", kind="imgpath", keys="relpath")
    build: Build = fact({}, None)
    python: Python = fact({}, None)
    run: Run = fact({}, None)
    workload: AppWorkload | None = fact({}, None)
    path: str = field(default="", compare=False, metadata={"internal": True})
    pins: tuple[str, ...] = field(default=(), metadata={"internal": True})      # requirements + the file's

    @property
    def folder(self) -> Path:
        return Path(self.path).parent

    @property
    def command(self) -> tuple[str, ...]:
        """The image's default command."""
        return self.run.command or (self.workload.command if self.workload else ()) or ("/bin/bash",)


def parse(text: str, path: str, reserved: tuple[str, ...] = ()) -> App:
    """Parse and validate an app file's text (`path`: for messages and relative paths; `reserved`: names
    it may not take, the built-in recipes')."""
    loader = Loader(path)
    raw = read_toml(text, path, "app file")
    app = loader.table(App, raw, "")
    if app.schema != SCHEMA_VERSION:
        loader.fail("schema", f"{app.schema} is not a schema this gen-recipe reads", f"write schema = {SCHEMA_VERSION}")
    if app.workload is not None and "workload" not in raw:
        app = dataclasses.replace(app, workload=None)
    app = dataclasses.replace(app, path=path)
    return dataclasses.replace(app, pins=_check(app, loader.fail, reserved))


def load(path: str | Path, reserved: tuple[str, ...] = ()) -> App:
    path = Path(path)
    return parse(read_file(path, "app file"), str(path), reserved)


def _check(app: App, fail, reserved: tuple[str, ...]) -> tuple[str, ...]:
    """Cross-field checks; returns the pins (inline + the requirements file's)."""
    if app.name in reserved:
        fail("name", f"'{app.name}' is a built-in recipe's name", f"choose another, e.g. name = \"my{app.name}\"")
    dests: list[str] = []
    for src, dest in app.files.items():
        key = f"files.{src}"
        problem = local_problem(app.folder, src, "the app's folder", "give a path relative to the app file")
        if problem:
            fail(key, *problem)
        check_dest(dest, key, fail)
        dests.append(dest)
    for i, dest in enumerate(app.build.keep):
        check_dest(dest, f"build.keep[{i}]", fail, parent_exists=False)
        dests.append(dest)
    for i, a in enumerate(dests):
        for b in dests[i + 1:]:
            if a == b or b.startswith(a + "/") or a.startswith(b + "/"):
                fail("files", f"{a} and {b} overlap", "give each file or folder its own destination")
    if app.run.workdir and app.run.workdir not in dests and not any(app.run.workdir.startswith(d + "/") for d in dests):
        fail("run.workdir", f"{app.run.workdir} is not one of the [files] destinations",
             f"use one of: {', '.join(dests)}" if dests else "copy a folder there with [files]")
    for i, wheel in enumerate(app.python.wheels):
        key = f"python.wheels[{i}]"
        if not wheel.endswith(".whl") or len(Path(wheel).name.split("-")) < 5:
            fail(key, f"{wheel} is not a wheel file name", "give e.g. dist/mypkg-1.0-py3-none-any.whl")
        problem = local_problem(app.folder, wheel, "the app's folder", "build it first (python -m build --wheel), "
                                "or fix the path")
        if problem:
            fail(key, *problem)
        if not (app.folder / wheel).is_file():
            fail(key, f"{app.folder / wheel} is not a file", "give the wheel file itself")
    pins = list(app.python.requirements)
    if app.python.requirements_file:
        try:        # refused before a byte is read when it leaves the app's folder: nothing of /etc/shadow is echoed
            path = files.inside(app.folder, app.python.requirements_file, "requirements file")
        except UsageError as exc:
            fail("python.requirements_file", str(exc))
        pins += requirements_file(path, fail)
    names = {}
    for pin in pins:
        name = re.split(r"[\[=]", pin, maxsplit=1)[0].lower().replace("_", "-")
        if name in names and names[name] != pin:
            fail("python", f"{names[name]} and {pin} pin the same package", "keep one")
        names[name] = pin
    if app.workload is not None:
        check_workload(app.workload, fail)
    return tuple(dict.fromkeys(pins))


IGNORED = ("__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".venv")   # never copied into an image
MAX_ENTRIES = 100_000      # files and folders under one [files] source: a bound on the walk (a mistyped "/")


def local_problem(folder: Path, rel: str, label: str, missing_hint: str) -> tuple[str, str] | None:
    """Why `rel` cannot go from `folder` (called `label` in messages) into a build context: it must stay
    inside the folder, also through links, and exist; a folder's every entry too (a link leading out, a FIFO,
    socket or device inside it is named), at most MAX_ENTRIES of them. None when it can; else (problem, hint)."""
    local = folder / rel
    if ".." in Path(rel).parts or Path(rel).is_absolute():
        return f"must be a relative path inside {label}", "move the file into that folder"
    if not local.exists():
        return f"{local} does not exist", missing_hint
    base = folder.resolve()
    if base not in local.resolve().parents:
        return f"{local} leads outside {label} (a link?)", "copy it into that folder"
    if not local.is_dir():
        return None if local.is_file() else (f"{local} is not a regular file or folder", "copy a regular file there")
    seen = 0
    for root, dirs, names in os.walk(local):        # links to folders are not descended into: checked as entries
        dirs[:] = [d for d in dirs if d not in IGNORED]
        for name in dirs + names:
            seen += 1
            entry = Path(root) / name
            if seen > MAX_ENTRIES:
                return f"{local} holds more than {MAX_ENTRIES} files and folders", "copy only what the image needs"
            if entry.is_symlink() and base not in entry.resolve().parents:
                return f"{entry} leads outside {label} (a link)", "copy what it points to into that folder"
            if entry.is_symlink() and not entry.exists():
                return f"{entry} is a link to nothing", "remove it, or point it at a file in the folder"
            if not (entry.is_file() or entry.is_dir()):
                return f"{entry} is not a regular file or folder (a FIFO, socket or device)", "remove it from the folder"
    return None


def check_dest(dest: str, key: str, fail, parent_exists: bool = True) -> None:
    parts = dest.split("/")
    if any(p in (".", "..") for p in parts):
        fail(key, f"{dest} has a '.' or '..' component", "write the destination without them, e.g. /opt/app")
    parent = dest.rsplit("/", 1)[0] or "/"
    if dest in PARENTS or any(dest == r or dest.startswith(r + "/") for r in RESERVED):
        fail(key, f"{dest} is a folder the image itself uses", "choose a new folder such as /opt/app")
    if parent_exists and parent not in PARENTS:
        fail(key, f"the parent of {dest} is not /, /opt or /srv", "copy a folder to e.g. /opt/app and put files in it")


def check_workload(w: AppWorkload, fail) -> None:
    if not w.command:
        fail("workload.command", "missing: the command one measured run executes",
             'write e.g. command = ["python3", "/opt/app/train.py", "--steps", "20"]')
    if not w.unit:
        fail("workload.unit", "missing: the metric's unit", 'write e.g. unit = "samples/s"')
    if bool(w.json_key) == bool(w.regex):
        fail("workload", "give exactly one of json_key and regex (how a run reports its metric)",
             'write e.g. json_key = "samples_per_s"')
    if w.regex:
        try:
            pattern = re.compile(w.regex)
        except re.error as exc:
            fail("workload.regex", f"not a regular expression: {exc}", r'write e.g. regex = "throughput: ([0-9.]+)"')
        if pattern.groups < 1:
            fail("workload.regex", "has no group for the value", r'put the number in parentheses: "rate: ([0-9.]+)"')
    if w.tolerance is not None and not 0 < w.tolerance < 1:
        fail("workload.tolerance", f"{w.tolerance} is not a fraction between 0 and 1", "write e.g. 0.10 for 10%")
    if not 0 < w.faster <= 10:
        fail("workload.faster", f"{w.faster} is out of range", "give a fraction such as 0.5")
    if not 1 <= w.timeout <= 86400:
        fail("workload.timeout", f"{w.timeout} s is out of range", "give 1 to 86400 seconds")


def checked_workload(keys: Mapping, where: str) -> AppWorkload:
    """A workload from keyword values (`generator.api.workload`, a Python recipe's WORKLOAD) checked like an
    app file's [workload] table (`where` names it in messages); a value equal to its default is not given."""
    defaults = {f.name: f.default for f in dataclasses.fields(AppWorkload)}
    raw = {k: list(v) if isinstance(v, tuple) else v for k, v in keys.items()
           if k not in defaults or type(v) is not type(defaults[k]) or v != defaults[k]}
    loader = Loader(where)
    w = loader.table(AppWorkload, raw, "workload")
    check_workload(w, loader.fail)
    return w


def requirements_file(path: Path, fail) -> list[str]:
    """The pins of a pip requirements file: `name==version` lines, comments and blank lines; options
    (-r, -e, --index-url, --hash) are refused with the line that has them."""
    try:
        text = read_file(path, "requirements file")
    except SiteError as exc:
        fail("python.requirements_file", exc.problem, exc.hint)
    pins, pattern = [], KINDS["requirement"][0]
    for n, line in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        spaced = re.sub(r"\s*==\s*", "==", line)
        if spaced.startswith("-") or " --" in spaced:
            raise SiteError(f"{path}:{n}", "", f"{line[:60]!r}: pip options are not supported here",
                            "list pinned requirements only (name==version), one per line")
        if not pattern.fullmatch(spaced):
            raise SiteError(f"{path}:{n}", "", f"{line[:60]!r} is not a pinned requirement",
                            "write name==version, e.g. numpy==2.1.3")
        pins.append(spaced)
    return pins
