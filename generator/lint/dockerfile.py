"""Dockerfiles: instructions with their line ranges and pragmas, and the checks hadolint lacks
(GR001 download piped into a shell, GR002 downloads left in a layer, GR003 no non-root USER).

hadolint does the rest. Pragmas: `# hadolint ignore=ID,...` and `# gen-recipe: ignore=ID,...`
in the comment lines directly above an instruction silence those ids on it, for hadolint's
findings and ours alike (hadolint drops a pragma that names an id it does not know, so ours is
the one to use for GR ids).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import shell

_HADOLINT_PRAGMA = re.compile(r"^\s*#\s*hadolint\s+ignore=([A-Za-z0-9_,\s]+?)\s*$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_FLAG = re.compile(r"^--[a-z-]+(=\S*)?$")
ROOT = ("root", "0", "0:0", "root:root")

Hit = tuple[int, str, str]


@dataclass(frozen=True)
class Instruction:
    keyword: str                                # upper case
    start: int                                  # first line (1-based)
    end: int                                    # last line
    args: str                                   # after the keyword, continuations joined
    flags: tuple[str, ...]                      # leading --flag=value (RUN --mount=..., COPY --from=...)
    heredoc: bool
    ignore: frozenset[str]
    above: int                                  # first line of the comment block directly above (= start)

    @property
    def body(self) -> str:
        """args without the flags."""
        words = self.args.split()
        return " ".join(words[len(self.flags):]) if self.flags else self.args

    @property
    def shell_form(self) -> bool:
        return not self.body.lstrip().startswith("[") and not self.heredoc


@dataclass(frozen=True)
class Stage:
    start: Instruction                          # its FROM
    image: str
    name: str
    instructions: tuple[Instruction, ...]       # after FROM


def _pragma(text: str) -> frozenset[str]:
    m = _HADOLINT_PRAGMA.match(text)
    if m:
        return frozenset(i.strip().upper() for i in m.group(1).split(",") if i.strip())
    return shell.pragma_ids(text)


def escape_char(lines: Sequence[str]) -> str:
    for t in lines:
        m = re.match(r"^\s*#\s*escape\s*=\s*(\S)", t, re.I)
        if m:
            return m.group(1)
        if not re.match(r"^\s*#\s*\w+\s*=", t):
            break
    return "\\"


def parse(text: str) -> list[Instruction]:
    lines = text.splitlines()
    esc = escape_char(lines)
    out, block, i = [], [], 0
    while i < len(lines):
        t = lines[i]
        if not t.strip():
            block = []
            i += 1
            continue
        if t.lstrip().startswith("#"):
            block.append(i + 1)
            i += 1
            continue
        start, parts = i + 1, [t]
        while shell.continued(parts[-1], esc) and i + 1 < len(lines):
            i += 1
            if lines[i].lstrip().startswith("#") or not lines[i].strip():
                continue
            parts[-1] = parts[-1].rstrip()[:-1]
            parts.append(lines[i])
        joined = " ".join(p.strip() for p in parts)
        keyword, _, args = joined.partition(" ")
        keyword = keyword.upper()
        heredoc = False
        if keyword in ("RUN", "COPY", "ADD"):
            for m in _HEREDOC.finditer(args):
                heredoc = True
                while i + 1 < len(lines) and lines[i + 1].strip() != m.group(2):
                    i += 1
                i += 1
        words = args.split()
        flags = tuple(w for w in words[:next((k for k, w in enumerate(words) if not _FLAG.match(w)), len(words))])
        ignore = frozenset().union(*(_pragma(lines[n - 1]) for n in block)) if block else frozenset()
        out.append(Instruction(keyword, start, min(i + 1, len(lines)), args.strip(), flags, heredoc, ignore,
                               block[0] if block else start))
        block = []
        i += 1
    return out


def stages(instructions: Sequence[Instruction]) -> list[Stage]:
    out, current = [], None
    for ins in instructions:
        if ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            name = words[2] if len(words) > 2 and words[1].lower() == "as" else ""
            current = [ins, words[0] if words else "", name, []]
            out.append(current)
        elif current is not None:
            current[3].append(ins)
    return [Stage(f, image, name, tuple(body)) for f, image, name, body in out]


def run_lines(ins: Instruction, text_lines: Sequence[str]) -> list[tuple[int, str]]:
    """The shell lines of a RUN (keyword and flags cut off the first), for shell.split_script."""
    lines = [(n, text_lines[n - 1]) for n in range(ins.start, ins.end + 1)]
    first = re.sub(r"^\s*RUN\s+((--\S+)\s+)*", "", lines[0][1], flags=re.I)
    return [(lines[0][0], first)] + lines[1:]


def commands(ins: Instruction, text_lines: Sequence[str]) -> list[shell.Command]:
    if ins.keyword != "RUN" or not ins.shell_form:
        return []
    return shell.split_script(run_lines(ins, text_lines), docker=True)[0]


def user_of(stage: Stage, all_stages: Sequence[Stage]) -> str | None:
    """The stage's last USER, following `FROM <earlier stage>`."""
    users = [i.args.split()[0] for i in stage.instructions if i.keyword == "USER" and i.args.split()]
    if users:
        return users[-1]
    parent = next((s for s in all_stages if s.name and s.name == stage.image and s is not stage), None)
    return user_of(parent, [s for s in all_stages if s is not stage]) if parent else None


def deleted_later(stage: Stage, ins: Instruction, path: str, text_lines: Sequence[str]) -> Instruction | None:
    after = stage.instructions[stage.instructions.index(ins) + 1:]
    return next((later for later in after if any(shell.removes(c, path) for c in commands(later, text_lines))), None)


def check(text: str) -> list[Hit]:
    """GR findings for a Dockerfile (pragmas not yet applied)."""
    text_lines = text.splitlines()
    instructions = parse(text)
    all_stages = stages(instructions)
    hits: list[Hit] = []
    for stage in all_stages:
        for ins in stage.instructions:
            cmds = commands(ins, text_lines)
            for chain in shell.pipelines(cmds).values():
                fetch = shell.is_pipe_to_shell(chain)
                if fetch is not None:
                    hits.append((ins.start, "GR001", f"`{fetch.program} ... | {chain[-1].program}` runs a download "
                                                     f"unchecked"))
            for k, c in enumerate(cmds):
                path = shell.download(c)
                if not path or any(shell.removes(d, path) for d in cmds[k + 1:]):
                    continue
                later = deleted_later(stage, ins, path, text_lines)
                where = f"deleted only by the RUN on line {later.start}" if later else "never deleted"
                hits.append((ins.start, "GR002", f"{path} is downloaded here and {where}: it stays in this layer"))
    if all_stages:
        last = all_stages[-1]
        if user_of(last, all_stages) is None:
            hits.append((last.start.start, "GR003", "the final stage sets no USER: its processes run as root"))
    return hits


def ignored(instructions: Sequence[Instruction]) -> dict[int, frozenset[str]]:
    """line → ids silenced there by the pragmas above its instruction."""
    return {n: ins.ignore for ins in instructions if ins.ignore for n in range(ins.start, ins.end + 1)}
