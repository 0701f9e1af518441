"""What the linter works on and what it reports: sources, findings, the Apptainer target."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import GenRecipeError

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


# ---------------------------------------------------------------------------------------------
# Target: which Apptainer/Singularity reads the definitions
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """`apptainer`, `apptainer:1.3.6`, `singularity:3.1.0`; no version = any version."""

    name: str = "apptainer"
    version: tuple[int, ...] | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        name, _, version = text.strip().lower().partition(":")
        name = {"singularity-ce": "singularity", "singularityce": "singularity"}.get(name, name)
        if name not in ("apptainer", "singularity"):
            raise LintError(f"lint: --target '{text}': write apptainer[:VERSION] or singularity[:VERSION]")
        if not version:
            return cls(name)
        m = re.match(r"^v?(\d+(?:\.\d+)*)", version)
        if not m:
            raise LintError(f"lint: --target '{text}': '{version}' is not a version (e.g. 1.3.6)")
        return cls(name, tuple(int(p) for p in m.group(1).split(".")))

    def at_least(self, apptainer: tuple[int, ...], singularity: tuple[int, ...]) -> bool:
        if self.version is None:
            return True
        return self.version >= (apptainer if self.name == "apptainer" else singularity)

    @property
    def multistage(self) -> bool:
        return self.at_least((0,), (3, 2))

    @property
    def arguments(self) -> bool:
        return self.at_least((1, 2), (4, 0))

    def __str__(self) -> str:
        return self.name + (":" + ".".join(map(str, self.version)) if self.version else "")


def target_of(site) -> Target:
    """The Apptainer/Singularity of a site (`generator.site.Site`), or the default."""
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


def kind_by_name(name: str) -> str | None:
    """docker / definition from a file name, or None when the name says nothing."""
    if name.endswith(".orig") or name.startswith("."):
        return None
    low = name.lower()
    if low in ("dockerfile", "containerfile") or low.endswith((".dockerfile", ".containerfile")) \
            or low.startswith(("dockerfile.", "containerfile.")):
        return DOCKER
    if low.endswith((".def", ".recipe")) or name in ("Singularity", "Apptainer") \
            or name.startswith(("Singularity.", "Apptainer.")):
        return DEFINITION
    return None


def kind_by_content(text: str) -> str | None:
    """A definition starts, after comments, with `Bootstrap:`; a Dockerfile with FROM, ARG or a
    `# syntax=`/`# escape=` parser directive."""
    for line in text.splitlines():
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


def read_source(path: Path, kind: str | None = None) -> Source:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise LintError(f"lint: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise LintError(f"lint: {path}: not a text file (not UTF-8)") from None
    kind = kind or kind_by_name(path.name) or kind_by_content(text)
    if kind is None:
        raise LintError(f"lint: {path}: not a recipe (neither a Dockerfile nor an Apptainer definition)")
    return Source(str(path), text, kind)


def collect(paths: list[Path]) -> list[Source]:
    """The sources to lint: files as given, recipe files (by name) under directories."""
    out = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and kind_by_name(p.name)
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if not found:
                raise LintError(f"lint: {path}: no Dockerfiles or Apptainer definitions in this directory")
            out += [read_source(p) for p in found]
        else:
            out.append(read_source(path))
    return out
