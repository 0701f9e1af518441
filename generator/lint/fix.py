"""`gen-recipe lint --fix`: safe, mechanical rewrites of the common smells.

One fix at a time: parse the current text, find the first smell a rewrite can remove, splice the
replacement lines in, repeat. Every fix removes its own trigger, so this ends; sites no rewrite
can handle safely are left alone (and stay reported). Each fix remembers the line of the
original file it came from.

Dockerfiles: apt-get flags and list cleanup, yum/dnf/zypper -y and cache cleanup, pip
--no-cache-dir, `cd DIR && ...` → WORKDIR, SHELL with pipefail before the first RUN with a pipe,
a download deleted in a later RUN → the RUNs merged, a non-root USER at the end of the final stage.
Definitions: the same package-manager and pip fixes in %post, and `%post -c /bin/bash` +
`set -eo pipefail` for pipes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import definition, dockerfile, shell
from .model import DOCKER

NO_BASH = re.compile(r"alpine|busybox|distroless|^scratch$", re.I)
SHELL_LINE = 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]'
USER_LINES = ("useradd --create-home --uid 10001 --user-group app", "USER 10001:10001")
MAX_FIXES = 500


@dataclass(frozen=True)
class Fixed:
    line: int           # line of the original file
    rule: str
    what: str

    def as_dict(self) -> dict:
        return {"line": self.line, "rule": self.rule, "message": self.what}


@dataclass(frozen=True)
class Edit:
    start: int                  # 0-based index of the first replaced line
    end: int                    # exclusive
    new: tuple[str, ...]
    rules: tuple[str, ...]
    what: str
    at: int | None = None       # 0-based line the smell was on (default: start)


def fix_text(text: str, kind: str) -> tuple[str, list[Fixed]]:
    """The fixed text and what was fixed."""
    finder = _docker_edit if kind == DOCKER else _definition_edit
    lines = text.splitlines()
    origin, fixed = list(range(1, len(lines) + 1)), []
    for _ in range(MAX_FIXES):
        edit = finder(lines)
        if edit is None or tuple(edit.new) == tuple(lines[edit.start:edit.end]):
            break
        k = edit.start if edit.at is None else edit.at
        at = origin[k] if k < len(origin) else (origin[-1] if origin else 1)
        lines = lines[:edit.start] + list(edit.new) + lines[edit.end:]
        origin = origin[:edit.start] + [at] * len(edit.new) + origin[edit.end:]
        fixed += [Fixed(at, rule, edit.what) for rule in edit.rules]
    out = "\n".join(lines)
    return (out + "\n" if out and (text.endswith("\n") or text == "") else out), fixed


# ---------------------------------------------------------------------------------------------
# Edits shared by both kinds: flags on a command, a cleanup after it
# ---------------------------------------------------------------------------------------------

def _flag_edit(lines: Sequence[str], c: shell.Command, sub: str, add: str, rules: tuple[str, ...],
               what: str) -> Edit | None:
    """Insert ` add` after `PROGRAM ... sub` on the command's line (the first such match on the line
    whose own segment lacks the flag)."""
    prog = re.escape(c.words[0])
    pattern = re.compile(rf"(?<![\w/.-]){prog}(?:\s+[^\s;&|]+)*?\s+{re.escape(sub)}\b")
    for n in range(c.line, c.end + 1):
        text = lines[n - 1]
        for m in pattern.finditer(text):
            segment = re.split(r"&&|\|\||;|\|", text[m.start():])[0]
            if add.split()[0] not in segment.split():
                return Edit(n - 1, n, (text[:m.end()] + " " + add + text[m.end():],), rules, what)
    return None


def _install_edits(lines: Sequence[str], commands: Sequence[shell.Command], pip_cache_off: Callable[[int], bool]
                   ) -> Edit | None:
    for c in commands:
        inst = shell.install(c)
        if inst is None:
            continue
        m = inst.manager
        if m is None:
            if "DL3042" not in c.ignore and not shell.pip_no_cache(inst, pip_cache_off(c.line)):
                e = _flag_edit(lines, c, "install", "--no-cache-dir", ("DL3042",), "pip install --no-cache-dir")
                if e:
                    return e
            continue
        if c.program == "apt" and "DL3027" not in c.ignore:
            for n in range(c.line, c.end + 1):
                new = re.sub(r"(?<![\w/.-])apt(?=\s+(install|update|upgrade|remove|purge)\b)", "apt-get",
                             lines[n - 1], count=1)
                if new != lines[n - 1]:
                    return Edit(n - 1, n, (new,), ("DL3027",), "apt -> apt-get")
        flags, rules = [], []
        if m.yes_rule not in c.ignore and not shell.says_yes(inst):
            flags, rules = [m.yes_flag], [m.yes_rule]
        if m is shell.APT and "DL3015" not in c.ignore and not shell.no_recommends(inst):
            flags, rules = flags + ["--no-install-recommends"], rules + ["DL3015"]
        if flags:
            e = _flag_edit(lines, c, _sub(c, m), " ".join(flags), tuple(rules),
                           f"{c.program} {_sub(c, m)} {' '.join(flags)}")
            if e:
                return e
    return None


def _sub(c: shell.Command, m: shell.Manager) -> str:
    return next((w for w in c.words[1:] if w in m.installs), "install")


# ---------------------------------------------------------------------------------------------
# Dockerfiles
# ---------------------------------------------------------------------------------------------

def _base(stage: dockerfile.Stage, stages: Sequence[dockerfile.Stage]) -> str:
    """The external image a stage starts from, through `FROM <earlier stage>`."""
    parent = next((s for s in stages if s.name and s.name == stage.image and s is not stage), None)
    return _base(parent, [s for s in stages if s is not stage]) if parent else stage.image


def _appendable(ins: dockerfile.Instruction, lines: Sequence[str]) -> bool:
    last = lines[ins.end - 1].rstrip()
    return ins.keyword == "RUN" and ins.shell_form and not last.endswith(("\\", ";", "&", "|")) and "#" not in last


def _append(ins: dockerfile.Instruction, lines: Sequence[str], command: str, rule: str, what: str) -> Edit:
    return Edit(ins.end - 1, ins.end, (lines[ins.end - 1].rstrip() + " && \\", "    " + command), (rule,), what)


def _docker_cleanups(stage, ins, lines) -> Edit | None:
    cmds = dockerfile.commands(ins, lines)
    for m in shell.MANAGERS:
        used = [c for c in cmds if c.program in m.programs and any(w in (*m.installs, "update") for w in c.words)]
        if used and m.clean_rule not in ins.ignore and not any(shell.is_clean(c, m) for c in cmds) \
                and any(shell.install(c) for c in used) and _appendable(ins, lines):
            return _append(ins, lines, m.clean_command, m.clean_rule, f"added `{m.clean_command}` to the RUN")
    return None


def _docker_workdir(stage, ins, lines) -> Edit | None:
    cmds = dockerfile.commands(ins, lines)
    if "DL3003" in ins.ignore or not cmds or cmds[0].program != "cd" or len(cmds[0].words) != 2 \
            or cmds[0].op != "&&" or sum(c.program == "cd" for c in cmds) != 1:
        return None
    target = cmds[0].words[1]
    if not target.startswith("/") or re.search(r"[$*?~`\\\"']", target):
        return None
    first = lines[ins.start - 1]
    new_first = re.sub(rf"^(\s*RUN\s+(?:--\S+\s+)*)cd\s+{re.escape(target)}\s*&&\s*", r"\1", first, count=1,
                       flags=re.I)
    if new_first == first:
        return None
    index = stage.instructions.index(ins)
    previous = [i.args for i in stage.instructions[:index] if i.keyword == "WORKDIR"]
    following = stage.instructions[index + 1] if index + 1 < len(stage.instructions) else None
    restore = () if following is not None and following.keyword == "WORKDIR" else \
        (f"WORKDIR {previous[-1] if previous else '/'}",)
    block = tuple(lines[ins.above - 1:ins.start - 1])
    body = (new_first, *lines[ins.start:ins.end])
    return Edit(ins.above - 1, ins.end, (f"WORKDIR {target}", *block, *body, *restore), ("DL3003",),
                f"`cd {target} &&` -> WORKDIR {target}", ins.start - 1)


def _has_pipe(ins, lines) -> bool:
    return any(c.op in ("|", "|&") for c in dockerfile.commands(ins, lines))


def _docker_pipefail(stage, stages, lines) -> Edit | None:
    for ins in stage.instructions:
        if ins.keyword == "SHELL":
            return None
        if ins.keyword == "RUN" and _has_pipe(ins, lines):
            base = _base(stage, stages)
            if "DL4006" in ins.ignore or NO_BASH.search(base) or "$" in base:
                return None
            return Edit(ins.above - 1, ins.above - 1, (SHELL_LINE,), ("DL4006",),
                        "SHELL with -o pipefail before the first RUN with a pipe", ins.start - 1)
    return None


def _strip_run(text: str) -> str:
    return re.sub(r"^\s*RUN\s+((--\S+)\s+)*", "", text, flags=re.I)


def _needs_parens(cmds: Sequence[shell.Command], body: str) -> bool:
    return any(c.program == "cd" or c.op in (";", "||", "&") for c in cmds) or body.rstrip().endswith((";", "&"))


def _docker_merge(stage, ins, lines) -> Edit | None:
    """GR002: a download deleted by a later RUN → the RUNs from the download to the deletion merged."""
    cmds = dockerfile.commands(ins, lines)
    for k, c in enumerate(cmds):
        path = shell.download(c)
        if not path or "GR002" in ins.ignore or any(shell.removes(d, path) for d in cmds[k + 1:]):
            continue
        later = dockerfile.deleted_later(stage, ins, path, lines)
        if later is None:
            continue
        span = stage.instructions[stage.instructions.index(ins):stage.instructions.index(later) + 1]
        texts = ["\n".join(lines[i.start - 1:i.end]) for i in span]
        if any(i.keyword != "RUN" or not i.shell_form or i.flags != ins.flags for i in span) \
                or any(i.ignore for i in span[1:]) or any("#" in t for t in texts):
            return None
        merged: list[str] = []
        for n, i in enumerate(span):
            body = [_strip_run(lines[i.start - 1]) if n else lines[i.start - 1], *lines[i.start:i.end]]
            if _needs_parens(dockerfile.commands(i, lines), "\n".join(body)):
                if n == 0:
                    head = re.match(r"^(\s*RUN\s+(?:--\S+\s+)*)", body[0], re.I).group(1)
                    body[0] = head + "(" + body[0][len(head):]
                else:
                    body[0] = "(" + body[0]
                body[-1] = body[-1].rstrip() + ")"
            body = body if n == 0 else ["    " + body[0].lstrip(), *body[1:]]
            if n < len(span) - 1:
                body[-1] = body[-1].rstrip() + " && \\"
            merged += body
        bodies = {j for i in span for j in range(i.start - 1, i.end)}
        moved = [lines[j] for j in range(ins.end, later.end) if j not in bodies and lines[j].strip()]
        block = lines[ins.above - 1:ins.start - 1]
        return Edit(ins.above - 1, later.end, (*moved, *block, *merged), ("GR002",),
                    f"merged the RUNs of lines {ins.start}-{later.start}: {path} is deleted in its own layer",
                    ins.start - 1)
    return None


def _docker_user(stages, lines) -> Edit | None:
    last = stages[-1]
    base = _base(last, stages)
    if dockerfile.user_of(last, stages) is not None or "GR003" in last.start.ignore or NO_BASH.search(base) \
            or "$" in base:
        return None
    end = last.instructions[-1] if last.instructions else last.start
    what = "non-root user 10001 at the end of the final stage"
    if _appendable(end, lines):
        e = _append(end, lines, USER_LINES[0], "GR003", what)
        return Edit(e.start, e.end, (*e.new, USER_LINES[1]), ("GR003",), what, last.start.start - 1)
    return Edit(end.end, end.end, ("RUN " + USER_LINES[0], USER_LINES[1]), ("GR003",), what, last.start.start - 1)


def _docker_edit(lines: list[str]) -> Edit | None:
    instructions = dockerfile.parse("\n".join(lines))
    stages = dockerfile.stages(instructions)
    for stage in stages:
        for index, ins in enumerate(stage.instructions):
            if ins.keyword != "RUN" or not ins.shell_form:
                continue
            env = " ".join(i.args for i in stage.instructions[:index] if i.keyword in ("ENV", "ARG"))
            cmds = dockerfile.commands(ins, lines)
            scoped = [shell.Command(c.words, c.assigns, c.line, c.end, c.pipeline, c.stage, c.op,
                                    c.ignore | ins.ignore) for c in cmds]
            for finder in (lambda: _install_edits(lines, scoped, lambda _: "PIP_NO_CACHE_DIR" in env),
                           lambda: _docker_cleanups(stage, ins, lines),
                           lambda: _docker_workdir(stage, ins, lines),
                           lambda: _docker_merge(stage, ins, lines)):
                e = finder()
                if e:
                    return e
        e = _docker_pipefail(stage, stages, lines)
        if e:
            return e
    return _docker_user(stages, lines) if stages else None


# ---------------------------------------------------------------------------------------------
# Definitions
# ---------------------------------------------------------------------------------------------

def _indent(text: str) -> str:
    return text[:len(text) - len(text.lstrip())]


def _definition_cleanups(lines, commands) -> Edit | None:
    for m in shell.MANAGERS:
        unclean = [c for k, c in enumerate(commands) if shell.install(c) and shell.install(c).manager is m
                   and m.clean_rule not in c.ignore and not any(shell.is_clean(d, m) for d in commands[k + 1:])]
        if unclean:
            c = unclean[-1]
            return Edit(c.end, c.end, (_indent(lines[c.line - 1]) + m.clean_command,), (m.clean_rule,),
                        f"added `{m.clean_command}` after the last {m.name} install of the stage", c.line - 1)
    return None


def _definition_pipefail(lines, stage, commands) -> Edit | None:
    posts = stage.of("post")
    pipes = [c for c in commands if c.op in ("|", "|&") and "DL4006" not in c.ignore
             and not definition.pipefail_at(c.line, "sh", [], commands)]
    if not posts or not pipes or any(s.args for s in posts):
        return None
    image = stage.get("from").value if stage.get("from") else ""
    agent = stage.get("bootstrap").value.lower() if stage.get("bootstrap") else ""
    if agent in ("busybox", "scratch") or NO_BASH.search(image) or "$" in image or "{{" in image:
        return None
    first = posts[0]
    body = next((t for _, t in first.body if t.strip()), "    ")
    header = re.sub(r"^(\s*%post)\b", r"\1 -c /bin/bash", lines[first.line - 1], count=1)
    return Edit(first.line - 1, first.line, (header, _indent(body) + "set -eo pipefail"), ("DL4006",),
                "%post -c /bin/bash with `set -eo pipefail` (Apptainer applies it to every %post of the stage)",
                pipes[0].line - 1)


def _definition_edit(lines: list[str]) -> Edit | None:
    for stage in definition.parse("\n".join(lines)):
        script = definition.post_script(stage)
        commands, _ = shell.split_script(script)
        no_cache = [n for n, t in script if re.search(r"\bPIP_NO_CACHE_DIR=\S", t)]
        for finder in (lambda: _install_edits(lines, commands, lambda line: any(n < line for n in no_cache)),
                       lambda: _definition_cleanups(lines, commands),
                       lambda: _definition_pipefail(lines, stage, commands)):
            e = finder()
            if e:
                return e
    return None

