"""What the linter works on and what it reports: sources, findings, the Apptainer target."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from generator.errors import GenRecipeError, UsageError
from generator.files import read_text

DOCKER, DEFINITION = "docker", "definition"
KINDS = (DOCKER, DEFINITION)


class LintError(GenRecipeError):
    """Bad input to `gen-recipe lint`: an unreadable file, a file that is not a recipe, a bad option."""

    exit_code = 2


@dataclass(frozen=True, order=True)
class Finding:
    file: str
    line: int
    rule: str
    severity: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule} {self.severity}: {self.message}"


def one_line(text: str) -> str:
    return " ".join(text.split())


def split_lines(text: str) -> list[str]:
    """Lines as Docker, Apptainer and the shells see them: split at LF only (a CR before it dropped).
    str.splitlines() would also split at form feed, U+2028 and other separators the tools keep.
    A byte-order mark is dropped."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [t[:-1] if t.endswith("\r") else t for t in lines]


# ---------------------------------------------------------------------------------------------
# Target: which Apptainer/Singularity reads the definitions
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """`apptainer`, `apptainer:1.3.6`, `singularity:3.1.0`; no version = any version."""

    name: str = "apptainer"
    version: tuple[int, ...] | None = None
    build_args: tuple[tuple[str, str], ...] = ()     # --build-arg NAME=VALUE: before a stage's %arguments

    @classmethod
    def parse(cls, text: str) -> Target:
        name, _, version = text.strip().lower().partition(":")
        name = {"singularity-ce": "singularity", "singularityce": "singularity"}.get(name, name)
        if name not in ("apptainer", "singularity"):
            raise LintError(f"lint: --target '{text}': write apptainer[:VERSION] or singularity[:VERSION]")
        if not version:
            return cls(name)
        m = re.match(r"^v?([0-9]+(?:\.[0-9]+)*)", version)
        if not m:
            raise LintError(f"lint: --target '{text}': '{version}' is not a version (e.g. 1.3.6)")
        return cls(name, tuple(int(p) for p in m.group(1).split(".")))

    def with_build_args(self, given: Sequence[str]) -> Target:
        """This target with `--build-arg NAME=VALUE` values (refused in one line: no `=`, a NAME that is not a
        word, a VALUE with a line break or a NUL)."""
        out = []
        for arg in given:
            name, eq, value = arg.partition("=")
            if not eq or not re.fullmatch(r"\w+", name.strip()) or re.search(r"[\n\r\x00]", value):
                raise LintError(f"lint: --build-arg {arg[:60]!r}: give NAME=VALUE (NAME letters, digits and _; the "
                                "VALUE on one line), e.g. --build-arg TORCH=2.13.0")
            out.append((name.strip(), value.strip()))
        return dataclasses.replace(self, build_args=tuple(out))

    def at_least(self, apptainer: tuple[int, ...], singularity: tuple[int, ...]) -> bool:
        if self.version is None:
            return True
        return self.version >= (apptainer if self.name == "apptainer" else singularity)

    def knows(self, apptainer: tuple[int, ...] | None, singularity: tuple[int, ...] | None) -> bool:
        """Whether the target has a feature that arrived in these versions (None: never)."""
        since = apptainer if self.name == "apptainer" else singularity
        return since is not None and (self.version is None or self.version >= since)

    @property
    def multistage(self) -> bool:
        return self.at_least((0,), (3, 2))

    @property
    def arguments(self) -> bool:
        return self.at_least((1, 2), (4, 0))

    def __str__(self) -> str:
        return self.name + (":" + ".".join(map(str, self.version)) if self.version else "")


def target_of(site) -> Target:
    """The Apptainer/Singularity of a site (`generator.model.site.Site`), or the default."""
    rt = site.apptainer
    return Target.parse(f"{rt.name}:{rt.version}") if rt else Target()


# ---------------------------------------------------------------------------------------------
# Sources: files and what kind of recipe they are
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    path: str
    text: str
    kind: str


_BACKUP = re.compile(r"\.orig(\.[0-9]+)?$")
_NOT_RECIPE = re.compile(r"(\.(md|rst|txt|json|ya?ml|toml|ini|cfg|conf|csv|xml|html?|log|bak|swp|lock|diff|patch|"
                         r"dockerignore|py[cod]?|sh|bash|c|h|cc|cpp|go|rs|java|js|ts|rb|pl|so|o|a|gz|bz2|xz|zst|tar|"
                         r"tgz|zip|whl|sif|simg|img|png|jpe?g|svg|pdf)|~)$", re.I)


def kind_by_name(name: str) -> str | None:
    """docker / definition from a file name, or None when the name says nothing."""
    if _BACKUP.search(name) or name.startswith(".") or _NOT_RECIPE.search(name):
        return None
    low = name.lower()
    if re.fullmatch(r"(docker|container)file([._-].+)?|.+[._-](docker|container)file", low):
        return DOCKER
    if low.endswith((".def", ".recipe")) or re.fullmatch(r"(singularity|apptainer)([._-].+)?", low):
        return DEFINITION
    return None


def skip_reason(name: str) -> str:
    """Why directory mode does not lint a file of this name."""
    if name.startswith("."):
        return "hidden"
    if _BACKUP.search(name):
        return "a --fix backup"
    if _NOT_RECIPE.search(name):
        return "its extension says documentation, data or a script"
    return "its name says no Dockerfile or definition"


def kind_by_content(text: str) -> str | None:
    """A definition starts, after comments, with `Bootstrap:`; a Dockerfile with FROM, ARG or a
    `# syntax=`/`# escape=` parser directive."""
    for line in split_lines(text):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if re.match(r"#\s*(syntax|escape|check)\s*=", s, re.I):
                return DOCKER
            continue
        if re.match(r"bootstrap\s*:", s, re.I):
            return DEFINITION
        if re.match(r"(from|arg)\s", s + " ", re.I):
            return DOCKER
        return None
    return None


MAX_INPUT = 8 << 20         # a Dockerfile or definition larger than this is refused before it is read


def read_source(path: Path, kind: str | None = None) -> Source:
    """The file as a Source: a regular file (a FIFO, device or directory is refused before any byte is read)
    of at most MAX_INPUT bytes of UTF-8, through the one read path."""
    try:
        text = read_text(path, "recipe to lint", max_bytes=MAX_INPUT)
    except UsageError as exc:
        raise LintError(f"lint: {exc}") from None
    kind = kind or kind_by_name(path.name) or kind_by_content(text)
    if kind is None:
        raise LintError(f"lint: {path}: not a recipe (neither a Dockerfile nor an Apptainer definition)")
    return Source(str(path), text, kind)


def collect(paths: list[Path], skipped: list[tuple[str, str]] | None = None) -> list[Source]:
    """The sources to lint: files as given, recipe files (by name) under directories. What is not
    linted under a directory goes to `skipped` as (path, reason); hidden directories are not entered."""
    out = []
    for path in paths:
        if path.is_dir():
            found = []
            for root, dirs, names in os.walk(path):
                for d in sorted(d for d in dirs if d.startswith(".")):
                    if skipped is not None:
                        skipped.append((os.path.join(root, d), "a hidden directory"))
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(names):
                    p = Path(root) / name
                    if kind_by_name(name) and p.is_file():
                        found.append(p)
                    elif skipped is not None:
                        skipped.append((str(p), skip_reason(name) if p.is_file() or not kind_by_name(name)
                                        else "not a regular file (a FIFO, device or dangling link)"))
            if not found:
                raise LintError(f"lint: {path}: no Dockerfiles or Apptainer definitions in this directory")
            out += [read_source(p) for p in sorted(found)]
        else:
            out.append(read_source(path))
    return out
