"""Lint-clean rendering of hpccm building blocks.

hpccm's blocks emit a few patterns that hadolint and shellcheck flag: `cd DIR && ./configure`
inside RUN (DL3003), unpinned distro packages (DL3008/DL3033) and, in definitions, a glob
`source` (SC1090). `lint_clean(cls)` makes a subclass of an hpccm block (or of one of ours)
that renders its instruction objects through `render_item()`, which fixes those patterns on the
objects before they become text:

* a `shell` primitive that changes directory is emitted, for Docker, as `WORKDIR DIR` + the
  same `RUN` without the `cd` + `WORKDIR /` (download, build and cleanup stay in one layer);
* a distro-package install gets a per-instruction ignore with the reason (the site file
  pins the base image, not the distro's package versions), unless every package is pinned;
* in definitions, environment values with `$` are quoted (`export` runs under /bin/sh);
* make parallelism is passed as `"$(nproc)"` (quoted; SC2046) through the block's own
  `parallel` option;
* a `Note` among a shell primitive's commands (what verify.py says above a download without a
  checksum) goes above the `RUN`: a `RUN` holds no comments.

Apptainer `%post` scripts run under `/bin/sh -e`, where `cd DIR && ...` is fine; there the
package ignore is a `# gen-recipe: ignore=...` comment that `gen-recipe lint` reads.
"""

from __future__ import annotations

import re

import hpccm.config
from hpccm.building_blocks.apt_get import apt_get
from hpccm.building_blocks.base import bb_instructions
from hpccm.building_blocks.packages import packages as hpccm_packages
from hpccm.building_blocks.yum import yum
from hpccm.common import container_type, linux_distro
from hpccm.primitives.baseimage import baseimage as hpccm_baseimage
from hpccm.primitives.environment import environment
from hpccm.primitives.shell import shell
from hpccm.primitives.workdir import workdir

from generator.lint.definition import BUILD_ONLY_ENV   # compiler settings: the build stage's, never the image's

PIN_REASON = "Distro package versions follow the base image release; the site file pins the image, not them."
DEF_PRAGMA = "# gen-recipe: ignore={rules}"
DOCKER_PRAGMA = "# hadolint ignore={rules}"
PARALLEL = '"$(nproc)"'

_CD = re.compile(r"^cd\s+(\S+)$")


def docker() -> bool:
    return hpccm.config.g_ctype == container_type.DOCKER


def pin_rule() -> str:
    """hadolint's rule for unpinned packages of the current distro family."""
    return "DL3008" if hpccm.config.g_linux_distro == linux_distro.UBUNTU else "DL3033"


class Note(str):
    """A comment among a shell primitive's commands for a Dockerfile, where a RUN holds no comments: a
    line above the RUN; `ignore`, a rule id, goes into the one ignore pragma right above the RUN."""

    def __new__(cls, text: str, ignore: str = ""):
        note = super().__new__(cls, text)
        note.ignore = ignore
        return note


class noted_shell(shell):  # noqa: N801 - hpccm naming
    """hpccm's shell primitive whose `Note`s go above its RUN (each note with an ignore once)."""

    def __str__(self) -> str:
        if not docker():
            return super().__str__()
        notes = [c for c in self.commands if isinstance(c, Note)]
        lines = [n for i, n in enumerate(notes) if not (n.ignore and n in notes[:i])]
        rules = dict.fromkeys(n.ignore for n in notes if n.ignore)
        lines += [DOCKER_PRAGMA.format(rules=",".join(rules))] if rules else []
        run = shell(commands=[c for c in self.commands if not isinstance(c, Note)], _arguments=self._arguments)
        return "\n".join([*lines, str(run)])


def items(block: bb_instructions) -> list:
    """The instructions (primitives and building blocks) of an hpccm building block."""
    out, i = [], 0
    while True:
        try:
            out.append(block[i])
        except IndexError:
            return out
        i += 1


def _git_clone_in(parts: list[str]) -> list[str]:
    """hpccm's git template clones with `cd DIR && git clone ... NAME && cd -`: clone into DIR/NAME."""
    out, i = [], 0
    while i < len(parts):
        m = _CD.match(parts[i])
        if m and i + 2 < len(parts) and parts[i + 1].startswith("git clone ") and parts[i + 2] == "cd -":
            args = parts[i + 1].split()
            out.append(" ".join(args[:-1] + [f"{m.group(1)}/{args[-1]}"]))
            i += 3
        else:
            out.append(parts[i])
            i += 1
    return out


def _split_cd(commands: list[str]) -> tuple[str | None, list[str]]:
    """Remove `cd DIR` (and a `mkdir -p DIR` right before it) from `&&`-chained commands.

    Returns (DIR, commands without the cd); DIR is None when nothing changes directory. All cds
    must go to the same directory: a block that needs two would need two layers.
    """
    target, out = None, []
    for command in commands:
        parts = _git_clone_in([p.strip() for p in command.split(" && ")])
        kept = []
        for part in parts:
            m = _CD.match(part)
            if not m:
                kept.append(part)
                continue
            if target not in (None, m.group(1)):
                raise ValueError(f"shell changes directory twice ({target}, {m.group(1)}): split the block")
            target = m.group(1)
            if kept and kept[-1] == f"mkdir -p {target}":
                kept.pop()
        if kept:
            out.append(" && ".join(kept))
    return target, out


def render_shell(item: shell) -> str:
    if not docker() or not item.commands:
        return str(item)
    notes = [c for c in item.commands if isinstance(c, Note)]
    target, commands = _split_cd([c for c in item.commands if c and not isinstance(c, Note)])
    run = noted_shell(commands=[*notes, *commands], _arguments=item._arguments)
    if target is None:
        return str(run)
    return "\n".join([str(workdir(directory=target)), str(run), str(workdir(directory="/"))])


def render_packages(item: bb_instructions, pinned: bool = False) -> str:
    """A distro-package install with the ignore (and its reason) unless everything is pinned."""
    if pinned:
        return render_item(item, packages_ok=True)
    if docker():
        body = render_item(item, packages_ok=True)
        return f"# {PIN_REASON}\n{DOCKER_PRAGMA.format(rules=pin_rule())}\n{body}" if body else ""
    out = []
    for sub in items(item):
        if isinstance(sub, (apt_get, yum, hpccm_packages)):
            out.append(render_packages(sub))
        elif isinstance(sub, shell):
            commands = []
            for command in sub.commands:
                if re.search(r"\b(apt-get|yum|dnf) install\b", command):
                    commands += [f"# {PIN_REASON}", DEF_PRAGMA.format(rules=pin_rule())]
                commands.append(command)
            out.append(str(shell(commands=commands, chdir=sub.chdir)))
        else:
            out.append(render_item(sub))
    return "\n".join(s for s in out if s)


def render_environment(item: environment) -> str:
    """Definitions `export` the variables from /bin/sh, where an unquoted `$PATH` is split (SC2086)."""
    if docker():
        return str(item)
    quoted = {k: v if v.startswith('"') or not re.search(r"[$\s]", v) else f'"{v}"'
              for k, v in item._environment__variables.items()}  # hpccm's own merge() reads it so
    return str(environment(variables=quoted, _export=item._environment__export, _app=item._app))


def render_item(item, packages_ok: bool = False) -> str:
    """Render an hpccm instruction (primitive, building block or text) lint-clean."""
    if isinstance(item, str):
        return item
    if not packages_ok and isinstance(item, (hpccm_packages, apt_get, yum)):
        return render_packages(item, getattr(item, "pinned", False))
    if isinstance(item, shell):
        return render_shell(item)
    if isinstance(item, environment):
        return render_environment(item)
    if isinstance(item, bb_instructions):
        return "\n".join(s for s in (render_item(x, packages_ok) for x in items(item)) if s)
    return str(item)


def lint_clean(cls, parallel: bool = False, env: bool = False):
    """A subclass of hpccm block `cls` that renders lint-clean.

    parallel: the block builds with make: pass it the quoted "$(nproc)".
    env: the block sets environment variables: render them ourselves (hpccm's runtime() returns
        them as finished text, which could not be quoted for definitions any more).
    """

    class Clean(cls):
        def __init__(self, **kwargs):
            if parallel:
                kwargs.setdefault("parallel", PARALLEL)
            if env:
                kwargs.setdefault("environment", False)
            super().__init__(**kwargs)
            self._clean_env = dict(self.environment_variables) if env else {}

        def _clean_env_text(self, runtime: bool = False) -> str:   # a runtime stage: no compiler settings (AP017)
            env = {k: v for k, v in self._clean_env.items() if not (runtime and k in BUILD_ONLY_ENV)}
            return render_item(environment(variables=env)) if env else ""

        def __str__(self) -> str:
            return "\n".join(s for s in [*(render_item(x) for x in items(self)), self._clean_env_text()] if s)

    if hasattr(cls, "runtime"):
        def runtime(self, _from: str = "0") -> str:
            text = cls.runtime(self, _from=_from)
            text = render_item(self.rt) if len(self.rt) else text
            return "\n".join(s for s in (text, self._clean_env_text(runtime=True)) if s)

        Clean.runtime = runtime
    Clean.__name__ = Clean.__qualname__ = cls.__name__
    Clean.__doc__ = cls.__doc__
    return Clean


class baseimage(hpccm_baseimage):  # noqa: N801 - hpccm's Stage looks for this class name
    """hpccm's baseimage; in definitions the Docker environment is sourced with a shellcheck
    directive (the file name is a glob, SC1090)."""

    def __init__(self, **kwargs):
        self._docker_env = kwargs.pop("_docker_env", True)
        super().__init__(_docker_env=False, **kwargs)

    def __str__(self) -> str:
        text = super().__str__()
        if docker() or not self._docker_env:
            return text
        env = shell(chdir=False, commands=["# shellcheck source=/dev/null", ". /.singularity.d/env/10-docker*.sh"])
        return f"{text}\n{env}"
