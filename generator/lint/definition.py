"""Apptainer/Singularity definition files: a parser that splits them the way Apptainer does, and
the checks no other tool makes.

Apptainer's rules, from its parser (pkg/build/types/parser/deffile.go) and builder
(internal/pkg/build): stages start at lines beginning with `Bootstrap:`; a stage's header runs
up to the first line whose first word starts with `%`; sections of one name are appended into one
script, the arguments of the last header that has some apply to all of them; %post and %setup run
as `/bin/sh -ex SCRIPT`, or `/bin/sh -ex -c "SHELL ARGS SCRIPT"` with `-c SHELL ARGS`; %runscript,
%startscript and %test are written with `#!/bin/sh` (or the section's own `#!` line) and the
header's arguments appended to that line; %environment is sourced by /bin/sh.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from generator.errors import did_you_mean, shown
from generator.lint import rules, shell
from generator.lint.model import DEFINITION, MAX_INPUT, LintError, Target, split_lines
from generator.lint.tools import Script

SECTIONS = ("setup", "files", "environment", "post", "runscript", "startscript", "test", "labels", "help",
            "arguments", "pre")
APP_SECTIONS = ("appinstall", "appfiles", "appenv", "apprun", "appstart", "apptest", "applabels", "apphelp")
ONCE = ("runscript", "startscript", "test", "help", "arguments", "apprun", "appstart", "apptest", "apphelp")
HEADERS = ("bootstrap", "from", "includecmd", "mirrorurl", "updateurl", "osversion", "include", "library",
           "registry", "namespace", "stage", "product", "user", "regcode", "productpgp", "registerurl", "modules",
           "fingerprints", "confurl", "setopt", "target", "frontend", "filename", "buildargs")
# agent → required header keywords (each a tuple of alternatives)
AGENTS: dict[str, tuple[tuple[str, ...], ...]] = {
    **{a: (("from",),) for a in ("docker", "docker-archive", "docker-daemon", "oci", "oci-archive", "localimage",
                                  "library", "shub", "oras")},
    "yum": (("mirrorurl",),), "zypper": (("mirrorurl", "product"),), "busybox": (("mirrorurl",),),
    "debootstrap": (("mirrorurl",), ("osversion",)), "arch": (), "scratch": (),
    "dnf": (("mirrorurl",),), "buildkit": (), "dockerfile": (),
}
# agent → (first Apptainer, first Singularity/SingularityCE) that knows it; None = not there.
# From internal/pkg/build/conveyorPacker.go of apptainer/apptainer and sylabs/singularity at each release tag.
AGENT_SINCE: dict[str, tuple[tuple[int, ...] | None, tuple[int, ...] | None]] = {
    "oras": ((0,), (3, 3)), "dnf": ((1, 4), (4, 3)), "buildkit": ((1, 5), None), "dockerfile": ((1, 5), None),
}
RUN_SCRIPTS = ("post", "setup", "pre")                                 # run as /bin/sh -ex, -c picks the shell
SHEBANG_SCRIPTS = ("runscript", "startscript", "test", "apprun", "appstart", "apptest")
SOURCED = ("environment", "appenv")
NO_BASH = re.compile(r"alpine|busybox|distroless|scratch", re.I)

Hit = tuple[int, str, str]      # (line, rule id, message)


@dataclass(frozen=True)
class HeaderLine:
    key: str          # lower case
    value: str
    line: int
    raw_key: str


@dataclass(frozen=True)
class Section:
    name: str                               # lower case, without %
    app: str                                # app name of %app* sections
    args: str                               # the rest of the header line
    line: int
    body: tuple[tuple[int, str], ...]       # (line number, text)


@dataclass(frozen=True)
class Stage:
    line: int
    header: tuple[HeaderLine, ...]
    bad_header: tuple[tuple[int, str], ...]
    sections: tuple[Section, ...]

    def get(self, key: str) -> HeaderLine | None:
        return next((h for h in self.header if h.key == key), None)

    @property
    def name(self) -> str:
        h = self.get("stage")
        return h.value if h else ""

    def of(self, *names: str) -> list[Section]:
        return [s for s in self.sections if s.name in names]


def _is_section(text: str) -> bool:
    words = text.split()
    return bool(words) and words[0].startswith("%")


def _stage(lines: Sequence[tuple[int, str]]) -> Stage | None:
    i, header, bad = 0, [], []
    while i < len(lines) and not _is_section(lines[i][1]):
        number, text = lines[i]
        s = text.strip()
        i += 1
        if not s or s.startswith("#"):
            continue
        s = s.split("#")[0].strip()
        while s.endswith("\\") and i < len(lines):
            s = s[:-1] + lines[i][1].split("#")[0].strip()
            i += 1
        key, colon, value = s.partition(":")
        if not colon:
            bad.append((number, text.strip()))
        else:
            header.append(HeaderLine(key.strip().lower(), value.strip(), number, key.strip()))
    sections = []
    while i < len(lines):
        number, text = lines[i]
        word, args = (text.strip().split(None, 1) + [""])[:2]
        name = word.lstrip("%").lower()
        app = ""
        if name in APP_SECTIONS:
            app, args = (args.strip().split(None, 1) + ["", ""])[:2]
        i += 1
        start = i
        while i < len(lines) and not _is_section(lines[i][1]):
            i += 1
        sections.append(Section(name, app, args.strip(), number, tuple(lines[start:i])))
    if not header and not bad and not sections:
        return None
    first = header[0].line if header else bad[0][0] if bad else sections[0].line
    return Stage(first, tuple(header), tuple(bad), tuple(sections))


def parse(text: str) -> tuple[Stage, ...]:
    """The stages of a definition (a leading part with only comments is no stage)."""
    lines = list(enumerate(split_lines(text), 1))
    starts = [k for k, (_, t) in enumerate(lines) if re.match(r"bootstrap:", t, re.I)]
    bounds = sorted({0, *starts, len(lines)})
    stages = (_stage(lines[a:b]) for a, b in zip(bounds, bounds[1:]))
    return tuple(s for s in stages if s is not None)


# ---------------------------------------------------------------------------------------------
# Scripts and their shells
# ---------------------------------------------------------------------------------------------

def _args_of(sections: Sequence[Section]) -> str:
    """The arguments Apptainer applies: those of the last header that has some."""
    return next((s.args for s in reversed(sections) if s.args.split("#")[0].strip()), "").split("#")[0].strip()


def run_shell(args: str) -> tuple[str, list[str]]:
    """(shell name, its arguments) for a %post/%setup header's arguments."""
    fields = args.split()
    if "-c" in fields and fields.index("-c") + 1 < len(fields):
        rest = fields[fields.index("-c") + 1:]
        return posixpath.basename(rest[0]), rest[1:]
    return "sh", ["-e", "-x"]


def _shebang_shell(body: Sequence[tuple[int, str]]) -> str:
    first = next((t.strip() for _, t in body if t.strip()), "")
    if not first.startswith("#!"):
        return "sh"
    words = first[2:].split()
    if words and posixpath.basename(words[0]) == "env" and len(words) > 1:
        return posixpath.basename(words[1])
    return posixpath.basename(words[0]) if words else "sh"


def _lines(sections: Sequence[Section]) -> tuple[tuple[int, str], ...]:
    return tuple(line for s in sections for line in s.body)


def post_script(stage: Stage) -> tuple[tuple[int, str], ...]:
    """%post and the %appinstall sections, in the order Apptainer runs them."""
    return _lines(stage.of("post")) + _lines(stage.of("appinstall"))


def scripts(stage: Stage) -> list[Script]:
    """The stage's shell scripts, as Apptainer assembles them, for ShellCheck."""
    out = []
    for name in RUN_SCRIPTS:
        shell_name, args = run_shell(_args_of(stage.of(name)))
        body = post_script(stage) if name == "post" else _lines(stage.of(name))
        errexit = ("set -e",) if _errexit(args, []) else ()     # ShellCheck knows -e only from `set -e`
        out.append(Script(shell_name, body, errexit))
    apps = sorted({s.app for s in stage.sections if s.app})
    by_app: dict[tuple[str, str], list[Section]] = {}          # (section, app) → its sections: one pass, not per app
    for s in stage.sections:
        by_app.setdefault((s.name, s.app), []).append(s)
    for name in SOURCED:
        for app in (apps if name.startswith("app") else [""]):
            body = _lines(by_app.get((name, app), []))
            first = next((k for k, (_, t) in enumerate(body) if t.strip()), None)
            if first is not None and body[first][1].strip().startswith("#!"):   # a comment to the sourcing shell
                body = body[:first] + ((body[first][0], ""),) + body[first + 1:]
            # sourced by the runscript's shell: its assignments are used there
            out.append(Script("sh", body, ("# shellcheck disable=SC2034",)))
    for name in SHEBANG_SCRIPTS:
        for app in (apps if name.startswith("app") else [""]):
            body = _lines(by_app.get((name, app), []))
            first = next((k for k, (_, t) in enumerate(body) if t.strip()), None)
            if first is not None and body[first][1].strip().startswith("#!"):    # Apptainer moves it out
                out.append(Script(_shebang_shell(body), body[:first] + ((body[first][0], ""),) + body[first + 1:]))
            else:
                out.append(Script("sh", body))
    return [s for s in out if s.lines]


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def _label(stage: Stage, index: int) -> str:
    return f"stage '{stage.name}'" if stage.name else f"stage {index + 1}"


def check_header(stage: Stage, index: int, target: Target = Target()) -> list[Hit]:
    hits: list[Hit] = []
    where = _label(stage, index)
    if not stage.header or stage.header[0].key != "bootstrap":
        found = f" (found `{stage.header[0].raw_key}`)" if stage.header else ""
        hits.append((stage.line, "AP001", f"{where}: `Bootstrap:` must be the first header keyword{found}"))
    for line, text in stage.bad_header:
        hits.append((line, "AP004", f"header line is not `Keyword: value`: {text[:60]}"))
    for h in stage.header:
        if h.key not in HEADERS and not re.fullmatch(r"otherurl[0-9]+", h.key):
            hits.append((h.line, "AP004", f"unknown header keyword `{h.raw_key}` ({did_you_mean(h.key, HEADERS)})"))
    boot = stage.get("bootstrap")
    if boot is None:
        return hits
    agent = boot.value.lower()
    if agent not in AGENTS:
        hits.append((boot.line, "AP002", f"unknown bootstrap agent `{boot.value}` ({did_you_mean(agent, AGENTS)})"))
        return hits
    since = AGENT_SINCE.get(agent)
    if since and not target.knows(*since):
        first = {"apptainer": since[0], "singularity": since[1]}[target.name]
        need = f"{target.name} {'.'.join(map(str, first))} or later" if first else f"Apptainer, not {target.name}"
        hits.append((boot.line, "AP002", f"`Bootstrap: {agent}` needs {need} (target {target})"))
    source = stage.get("from")
    if agent == "docker" and source and re.match(r"(?:docker://)?localhost/", source.value):
        hits.append((source.line, "AP018", f"`From: {source.value}` pulls from a registry at https://localhost "
                     "(port 443), not from podman's or Docker's image store where localhost/ images live; "
                     "`podman save --format oci-archive -o base.oci.tar IMAGE` and `Bootstrap: oci-archive` "
                     "`From: base.oci.tar`, or a registry with its port (localhost:5000/...)"))
    if agent == "docker-daemon":
        hits.append((boot.line, "AP019", "`Bootstrap: docker-daemon` reads the image from a Docker daemon's socket "
                     "where the build runs; HPC login nodes run none (nor does rootless podman): build from a "
                     "registry (`docker`), or from `podman save --format oci-archive` (`oci-archive`)"))
    for alternatives in AGENTS[agent]:
        if not any((stage.get(k) and stage.get(k).value) for k in alternatives):
            need = " or ".join(f"`{k.capitalize() if k != 'mirrorurl' else 'MirrorURL'}:`" for k in alternatives)
            need = need.replace("`Osversion:`", "`OSVersion:`")
            hits.append((boot.line, "AP003", f"`Bootstrap: {agent}` needs {need}"))
    return hits


def check_sections(stage: Stage, index: int, earlier: dict[str, None], target: Target) -> list[Hit]:
    hits: list[Hit] = []
    seen: dict[tuple[str, str], Section] = {}
    for s in stage.sections:
        if s.name not in SECTIONS and s.name not in APP_SECTIONS:
            hits.append((s.line, "AP005", f"unknown section `%{s.name}` "
                                          f"({did_you_mean(s.name, SECTIONS + APP_SECTIONS)})"))
            continue
        if s.name in APP_SECTIONS and not s.app:
            hits.append((s.line, "AP005", f"`%{s.name}` needs an app name: `%{s.name} NAME`"))
            continue
        key = (s.name, s.app)
        if s.name in ONCE and key in seen:
            hits.append((s.line, "AP009", f"second `%{s.name}{' ' + s.app if s.app else ''}` in "
                                          f"{_label(stage, index)} (line {seen[key].line}): Apptainer appends it "
                                          f"to the first instead of replacing it"))
        seen.setdefault(key, s)
        if s.name in SHEBANG_SCRIPTS and "-c" in s.args.split():
            hits.append((s.line, "AP015", f"`%{s.name} {s.args}`: the arguments go on the script's #! line; "
                                          f"choose the shell with a `#!/bin/bash` first line instead"))
        if s.name == "arguments" and not target.arguments:
            hits.append((s.line, "AP014", f"`%arguments` needs Apptainer 1.2 or SingularityCE 4.0 (target {target})"))
        if s.name == "files" and s.args.split("#")[0].strip():
            fields = s.args.split("#")[0].split()
            if len(fields) != 2 or fields[0] != "from":
                hits.append((s.line, "AP012", f"`%files {s.args}`: only `%files from STAGE` takes arguments; "
                                              f"Apptainer skips this section"))
            elif not target.multistage:
                hits.append((s.line, "AP008", f"`%files from` needs Singularity 3.2 or later (target {target})"))
            elif fields[1] not in earlier:      # a hint among up to 50 names, not a list of thousands per finding
                hint = "see the `Stage:` names above" if len(earlier) > 50 else \
                    did_you_mean(fields[1], [e for e in earlier if e]) or "no earlier stage has a name (`Stage:`)"
                hits.append((s.line, "AP007", f"`%files from {fields[1]}`: no earlier stage is named "
                                              f"'{fields[1]}' ({hint})"))
    for name in set(RUN_SCRIPTS + SHEBANG_SCRIPTS + SOURCED):
        given = [s for s in stage.of(name) if s.args.split("#")[0].strip()]
        if len({s.args for s in given}) > 1:
            hits.append((given[-1].line, "AP010", f"`%{name} {given[-1].args}` and `%{name} {given[0].args}` "
                                                  f"(line {given[0].line}): the last arguments apply to every "
                                                  f"%{name} of the stage"))
    labels: dict[str, int] = {}
    for s in stage.of("labels"):
        for number, text in s.body:
            t = text.strip()
            if t and not t.startswith("#"):
                key = t.split()[0]
                if key in labels:
                    hits.append((number, "AP013", f"label `{key}` is already set on line {labels[key]}; the "
                                                  f"last value wins"))
                labels[key] = number
    return hits


def _errexit(shell_args: Sequence[str], commands: Sequence[shell.Command]) -> bool:
    if any(re.fullmatch(r"-[a-z]*e[a-z]*", a) for a in shell_args) or "errexit" in shell_args:
        return True
    first = next(iter(commands), None)
    return first is not None and first.program == "set" and (
        any(re.fullmatch(r"-[a-z]*e[a-z]*", w) for w in first.words[1:]) or "errexit" in first.words)


def pipefail_after(shell_name: str, shell_args: Sequence[str], commands: Sequence[shell.Command]) -> int | None:
    """The line after which pipefail is on (0: from the start, by the shell's arguments), or None: never."""
    if shell_name not in ("sh", "dash", "ash") and "pipefail" in shell_args:
        return 0
    return min((c.line for c in commands if c.program == "set" and "pipefail" in c.words), default=None)


def relative_files(stage: Stage) -> list[Hit]:
    """AP020: `%files` sources that are relative paths: Apptainer reads them from the folder `apptainer build`
    runs in, not from the definition's folder (`%files from STAGE` copies from a stage: not these)."""
    hits: list[Hit] = []
    for s in stage.of("files", "appfiles"):
        if s.name == "files" and s.args.split("#")[0].strip():
            continue
        relative = [fields[0] for _, text in s.body
                    if (fields := text.split("#")[0].split()) and not fields[0].startswith(("/", "$", "{{"))]
        if relative:
            hits.append((s.line, "AP020", f"`%{s.name}` copies {', '.join(relative[:3])}"
                         f"{', ...' if len(relative) > 3 else ''} from the folder `apptainer build` runs in, not "
                         "from this file's folder: build there, or say where in the file's header"))
    return hits


def check_post(stage: Stage) -> list[tuple[int, str, str, frozenset[str]]]:
    """Smells in the stage's %post (and %appinstall) script: (line, rule, message, pragma ids)."""
    lines = post_script(stage)
    commands, _ = shell.split_script(lines)
    name, shell_args = run_shell(_args_of(stage.of("post")))
    hits = []
    if "-c" in _args_of(stage.of("post")).split() and not _errexit(shell_args, commands):
        post = stage.of("post")
        hits.append((next(s.line for s in post if s.args), "AP011",
                     f"%post runs `/bin/sh -ex -c \"{name} ...\"`: {name} runs without -e; start the script with "
                     f"`set -e` (or use `-c /bin/{name} -e`)", frozenset()))
    hits += command_smells(commands, lines, name, shell_args)
    return hits


def command_smells(commands: Sequence[shell.Command], lines: Sequence[tuple[int, str]], shell_name: str,
                   shell_args: Sequence[str]) -> list[tuple[int, str, str, frozenset[str]]]:
    hits = []
    no_cache = min((n for n, t in lines if re.search(r"\bPIP_NO_CACHE_DIR=\S", t)), default=None)
    pipefail = pipefail_after(shell_name, shell_args, commands)
    inner = tuple(c for chain in shell.in_substitutions(lines) for c in chain)
    step = rules.Step(tuple(shell.tracked(commands)), inner=inner)
    for k, (c, cwd) in enumerate(step.pairs):
        inst = shell.install(c)
        if inst is not None and inst.manager is not None:
            m = inst.manager
            if c.program == "apt":
                hits.append((c.line, "DL3027", "use apt-get, not apt, in scripts", c.ignore))
            if not shell.says_yes(inst):
                hits.append((c.line, m.yes_rule, f"`{c.program} install` without {m.yes_flag} waits for an answer "
                                                 f"no build gives", c.ignore))
            if m is shell.APT and not shell.no_recommends(inst):
                hits.append((c.line, "DL3015", "apt-get install without --no-install-recommends", c.ignore))
            loose = shell.unpinned(inst)
            if loose:
                hits.append((c.line, m.pin_rule, f"unpinned {m.name} packages: {' '.join(loose[:6])}"
                                                  + (" ..." if len(loose) > 6 else ""), c.ignore))
            if step.later.last_clean[m.name] <= k:
                what = "the apt lists (/var/lib/apt/lists) are" if m is shell.APT else f"the {m.name} cache is"
                hits.append((c.line, m.clean_rule, f"{what} not removed after this install "
                                                   f"(add `{m.clean_command}`)", c.ignore))
        elif inst is not None:
            loose = shell.unpinned(inst)
            if loose:
                hits.append((c.line, "DL3013", f"unpinned pip requirements: {' '.join(loose[:6])}", c.ignore))
            if not shell.pip_no_cache(inst, no_cache is not None and no_cache < c.line):
                hits.append((c.line, "DL3042", "pip install without --no-cache-dir keeps its cache in the image",
                             c.ignore))
        path = shell.downloaded(c, cwd)
        if path and step.later.removals.first_after(path, k) is None:
            hits.append((c.line, "AP016", f"{path} is downloaded here and never deleted in %post", c.ignore))
        if c.op in ("|", "|&") and c.program not in ("echo", "printf") \
                and not (pipefail is not None and pipefail < c.line):     # echo/printf cannot fail
            hits.append((c.line, "DL4006", f"pipe in %post without pipefail ({shell_name} runs it): a failure "
                                           f"left of `|` does not stop the build", c.ignore))
    return hits + rules.run("step", DEFINITION, step)


def pragma_lines(text: str, stages: Sequence[Stage]) -> dict[int, frozenset[str]]:
    """line → rule ids silenced there: a `# gen-recipe: ignore=` comment covers the next
    non-comment line, and inside scripts that line's continuation lines."""
    out: dict[int, frozenset[str]] = {}
    pending: frozenset[str] = frozenset()
    for number, t in enumerate(split_lines(text), 1):
        if not t.strip():
            continue
        if t.lstrip().startswith("#"):
            pending |= shell.pragma_ids(t)
            continue
        if pending:
            out[number] = out.get(number, frozenset()) | pending
        pending = frozenset()
    for stage in stages:
        for s in stage.sections:
            for span in shell.split_script(s.body)[1]:
                if span.ignore:
                    for n in range(span.line, span.end + 1):
                        out[n] = out.get(n, frozenset()) | span.ignore
    return out


BUILD_ONLY_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "PKG_CONFIG_PATH")
# `CPATH=`, `export CPATH=`, `export A=1 CPATH=`, `declare -x CPATH=`, `export "CPATH=..."`, at the start of a line or of
# a command after ; & | ( { then do else
_ASSIGNED = re.compile(r"(?:^|[;&|({]|\b(?:then|do|else)\b)\s*(?:(?:export|declare|typeset|readonly|local)"
                       r"(?:\s+-\w+)*\s+(?:[^\s;&|]+\s+)*?)?[\"']?(" + "|".join(BUILD_ONLY_ENV) + r")=")


def _build_env(stage: Stage) -> list[Hit]:
    """AP017: the final stage's %environment sets a variable only compilers read."""
    return [(number, "AP017", f"{found.group(1)} in %environment: set it in the %post that builds, not for every "
             "program of the image") for s in stage.of(*SOURCED) for number, text in s.body
            if not text.lstrip().startswith("#") and (found := _ASSIGNED.search(re.split(r"\s#", text)[0]))]


# Build arguments (Apptainer >= 1.2, SingularityCE >= 4.0): `{{ NAME }}` anywhere in a stage is replaced before
# the stage is parsed, from --build-arg or the stage's `%arguments` (NAME=value lines, both sides trimmed), one
# level of `{{ }}` inside a value too; a `{{ }}` after a `#` on its line is left alone; a NAME with no value stops
# the build (Apptainer's internal/pkg/build/args: reader.go, args.go; its regular expressions, whose \s and \w
# are ASCII). Apptainer replaces each `{{ K }}` written in a value everywhere in the value so far, one after the
# other: a value that names itself grows as n**(n+1) for n mentions, and one in a cycle (X names Y, Y names X)
# leaves `{{ }}` in the definition. The linter refuses both, and a definition that its values make larger than a
# file it reads (MAX_INPUT), in one line before any work.
BUILD_ARG = re.compile(r"{{[\t\n\f\r ]*([0-9A-Za-z_]+)[\t\n\f\r ]*}}")
_COMMENT_BEFORE = re.compile(r"#[^!]")          # Apptainer's `\s*[#][^!]\s*.*`, searched: the same, in linear time


def argument_defaults(stage: Stage) -> dict[str, str]:
    """The stage's `%arguments` defaults, as Apptainer reads them."""
    out = {}
    for _, text in _lines(stage.of("arguments")):
        text = text.strip()
        if text and not text.startswith("#") and "=" in text:
            key, value = text.split("=", 1)
            if key.strip():
                out[key.strip()] = value.strip()
    return out


def _cycle(refs: dict[str, list[str]], name: str, done: set[str]) -> list[str] | None:
    """The names of a cycle of references that NAME's value leads to (the first name again at the end), or None.
    `done`: names already known to lead to none (kept across calls: each name is walked once)."""
    path, stack, on_path = [name], [iter(refs[name])], {name}
    while stack:
        nxt = next((k for k in stack[-1] if k not in done), None)
        if nxt is None:
            on_path.discard(path[-1])
            done.add(path.pop())
            stack.pop()
        elif nxt in on_path:
            return path[path.index(nxt):] + [nxt]
        else:
            path.append(nxt)
            on_path.add(nxt)
            stack.append(iter(refs[nxt]))
    return None


def _short(name: str) -> str:
    return name if len(name) <= 40 else name[:37] + "..."


def _too_large(path: str, line: int, name: str) -> str:
    return (f"lint: {shown(path)}:{line}: {{{{ {_short(name)} }}}} makes the definition larger than "
            f"{MAX_INPUT >> 20} MiB once the build arguments are in place: give the %arguments (or --build-arg) "
            "values shorter text, or fewer {{ }} that name other values")


def _expand(values: dict[str, str], name: str, room: int, path: str, line: int) -> str:
    """NAME's value with each `{{ K }}` in it replaced by K's value (one level); a LintError when that is longer than
    `room` (measured before it is built)."""
    value = values[name]
    if len(value) + sum(len(values[m.group(1)]) - len(m.group(0)) for m in BUILD_ARG.finditer(value)
                        if m.group(1) in values) > room:
        raise LintError(_too_large(path, line, name))
    return BUILD_ARG.sub(lambda m: values.get(m.group(1), m.group(0)), value)


def templated(text: str, stages: Sequence[Stage], given: Sequence[tuple[str, str]] = (),
              path: str = "-") -> tuple[str, list[Hit]]:
    """The definition as Apptainer builds it, each stage's `{{ NAME }}` replaced by the `given` value (--build-arg)
    or its %arguments default (line numbers kept: a value is one line), and AP021 for each NAME without a value
    (left as the word NAME). A value that names itself, directly or through others, or a result larger than
    MAX_INPUT is a LintError (before the text is built)."""
    lines = split_lines(text)
    bounds = [s.line for s in stages[1:]] + [len(lines) + 1]
    hits: list[Hit] = []
    size = len(text)
    for stage, end in zip(stages, bounds):
        values = {**argument_defaults(stage), **dict(given)}
        refs = {k: [m.group(1) for m in BUILD_ARG.finditer(v) if m.group(1) in values] for k, v in values.items()}
        done: set[str] = set()
        expanded: dict[str, str] = {}
        for n in range(stage.line, end):
            line, out, last = lines[n - 1], [], 0
            for m in BUILD_ARG.finditer(line):
                if _COMMENT_BEFORE.search(line[last:m.start()]):     # since the last replaced one, as Apptainer:
                    break                                            # so every later one on the line too
                name = m.group(1)
                if name not in values:
                    hits.append((n, "AP021", f"{{{{ {name} }}}} has no value: no `{name}=` in the stage's %arguments, "
                                             f"so the build stops unless it is given --build-arg {name}=VALUE"))
                elif name not in expanded:
                    loop = _cycle(refs, name, done)
                    if loop:
                        names = " -> ".join(_short(k) for k in loop[:6]) + (" -> ..." if len(loop) > 6 else "")
                        raise LintError(f"lint: {shown(path)}:{n}: {{{{ {_short(name)} }}}}: build arguments that name "
                                        f"themselves ({names}; %arguments or --build-arg): Apptainer would leave "
                                        f"{{{{ }}}} in the definition or grow it without end; give {_short(loop[0])} a "
                                        "value without {{ }}")
                    expanded[name] = _expand(values, name, MAX_INPUT - size, path, n)
                value = expanded.get(name, name)
                size += len(value) - (m.end() - m.start())
                if size > MAX_INPUT:
                    raise LintError(_too_large(path, n, name))
                out += [line[last:m.start()], value]
                last = m.end()
            lines[n - 1] = "".join(out) + line[last:]
    return "\n".join(lines), hits


REGISTRY_AGENTS = ("docker", "oci", "oras", "library", "shub")


def base_image(stage: Stage) -> list[Hit]:
    """AP022 (a registry image without a tag or digest, or `:latest`) and END_OF_LIFE_BASE (a base past its end of life)."""
    agent, source = stage.get("bootstrap"), stage.get("from")
    if agent is None or source is None or agent.value.lower() not in REGISTRY_AGENTS or not source.value:
        return []
    ref = source.value.split()[0]
    last = ref.rsplit("/", 1)[-1]
    hits: list[Hit] = []
    if agent.value.lower() == "docker" and "{{" not in ref and "$" not in ref and (
            ":" not in last and "@" not in last or last.endswith(":latest")):
        hits.append((source.line, "AP022", f"`From: {ref}`: no version (or `latest`): the next build may start "
                                           "from another image; give a tag or a digest"))
    why = rules.end_of_life(ref) if agent.value.lower() == "docker" else None
    if why:
        hits.append((source.line, rules.END_OF_LIFE_BASE.id,
                     f"{ref}: {why}: no updates from its standard releases since"))
    return hits


def check(text: str, target: Target, path: str = "-") -> tuple[list[Hit], list[Script], dict[int, frozenset[str]]]:
    """All our findings for a definition (pragmas applied), its scripts for ShellCheck, and the
    pragma map (to filter ShellCheck's findings). A target that takes build arguments gets them replaced first (a
    LintError naming `path` for values that name themselves, or that make the definition too large)."""
    stages = parse(text)
    hits: list[Hit] = []
    if not stages:
        return [(1, "AP001", "no `Bootstrap:` header and no sections: not a definition")], [], {}
    if target.arguments and BUILD_ARG.search(text):
        text, hits = templated(text, stages, target.build_args, path)
        stages = parse(text)
    names: dict[str, None] = {}                 # the earlier stages' names, in order
    for k, stage in enumerate(stages):
        hits += check_header(stage, k, target)
        if stage.name and stage.name in names:
            line = stage.get("stage").line
            hits.append((line, "AP006", f"stage name '{stage.name}' is used twice: `%files from {stage.name}` "
                                        f"takes the first"))
        if not target.multistage and stage.get("stage"):
            hits.append((stage.get("stage").line, "AP008",
                         f"`Stage:` needs Singularity 3.2 or later (target {target})"))
        elif k == 1 and not target.multistage:
            hits.append((stage.line, "AP008", f"a second stage needs Singularity 3.2 or later (target {target})"))
        hits += check_sections(stage, k, names, target)
        hits += base_image(stage)
        hits += relative_files(stage)
        hits += [(line, rule, msg) for line, rule, msg, ignore in check_post(stage) if rule not in ignore]
        names[stage.name] = None
    hits += _build_env(stages[-1])
    if len(stages) == 1:
        image = rules.Image(stages[0].line, None, tuple(shell.split_script(post_script(stages[0]))[0]))
        hits += [(line, rule, msg) for line, rule, msg, ignore in rules.run("image", DEFINITION, image) if rule not in ignore]
    ignored = pragma_lines(text, stages)
    hits = [h for h in hits if h[1] not in ignored.get(h[0], frozenset())]
    return hits, [s for stage in stages for s in scripts(stage)], ignored
