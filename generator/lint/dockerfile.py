"""Dockerfiles: instructions with their line ranges and pragmas, handed as steps (each instruction's
shell commands) and the final image to the checks of our own in rules.py (those hadolint lacks).

hadolint does the rest. Pragmas: `# hadolint ignore=ID,...` and `# gen-recipe: ignore=ID,...`
in the comment lines directly above an instruction silence those ids on it, for hadolint's
findings and ours alike (hadolint drops a pragma that names an id it does not know, so ours is
the one to use for GR ids).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from generator.lint import rules, shell
from generator.lint.model import DOCKER, split_lines

_HADOLINT_PRAGMA = re.compile(r"^\s*#\s*hadolint\s+ignore=([A-Za-z0-9_,\s]+?)\s*$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_FLAG = re.compile(r"^--[a-z-]+(=\S*)?$")
ROOT = ("root", "0", "0:0", "root:root")
# official distribution images: no WORKDIR set, so their steps run in /
DISTRO = re.compile(r"^(docker\.io/)?(library/)?(debian|ubuntu|rockylinux|centos|almalinux|fedora|alpine|busybox|"
                    r"amazonlinux|oraclelinux|opensuse/[a-z]+|scratch)([:@]|$)", re.I)

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
    lines = split_lines(text)
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
        keyword, args = (joined.split(None, 1) + [""])[:2]       # any whitespace after the keyword
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
    first = re.sub(r"^\s*(ONBUILD\s+)?RUN\s+((--\S+)\s+)*", "", lines[0][1], flags=re.I)
    return [(lines[0][0], first)] + lines[1:]


def json_form(ins: Instruction) -> bool:
    return ins.body.lstrip().startswith("[") and not ins.heredoc


def _triggered(ins: Instruction) -> Instruction | None:
    """`ONBUILD RUN ...` as the RUN it adds to the builds FROM this image (same lines)."""
    if ins.keyword != "ONBUILD":
        return None
    keyword, _, rest = ins.args.partition(" ")
    if keyword.upper() != "RUN":
        return None
    words = rest.split()
    flags = tuple(w for w in words[:next((k for k, w in enumerate(words) if not _FLAG.match(w)), len(words))])
    return Instruction("RUN", ins.start, ins.end, rest.strip(), flags, ins.heredoc, ins.ignore, ins.above)


def script(ins: Instruction, text_lines: Sequence[str]) -> list[tuple[int, str]]:
    """The shell script a RUN runs, as (line, text) pairs: a shell-form body; a heredoc's body when the shell
    reads it (`RUN <<EOF`, `RUN bash <<EOF`; not `RUN python3 <<EOF`); the `-c` string of a JSON-form
    `["sh", "-c", "..."]`, or the JSON-form command itself (on the RUN's line); `ONBUILD RUN` as its RUN."""
    ins = _triggered(ins) or ins
    if ins.keyword != "RUN":
        return []
    if json_form(ins):
        try:
            argv = json.loads(ins.body)
        except ValueError:
            return []
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            return []
        if posixpath.basename(argv[0]) in shell.SHELLS and len(argv) > 2 and argv[1] == "-c":
            return [(ins.start, line) for line in argv[2].split("\n")]
        return [(ins.start, shlex.join(argv))]
    lines = run_lines(ins, text_lines)
    if not ins.heredoc:
        return lines
    first = lines[0][1]
    m = _HEREDOC.search(first)
    if m is None:
        return []
    before = first[:m.start()].split()
    if before and posixpath.basename(before[0]) not in shell.SHELLS:
        return [(lines[0][0], first[:m.start()] + first[m.end():])]     # the command reads the body, not a shell
    body = []
    for number in range(lines[0][0] + 1, ins.end + 1):
        if text_lines[number - 1].strip() == m.group(2):
            break
        body.append((number, text_lines[number - 1]))
    return body


def commands(ins: Instruction, text_lines: Sequence[str]) -> list[shell.Command]:
    """The commands of a RUN in any form (see `script`), and of an `ONBUILD RUN`."""
    return shell.split_script(script(ins, text_lines), docker=True)[0]


def parents(all_stages: Sequence[Stage]) -> dict[int, Stage]:
    """id(stage) → the earlier stage its FROM names (the first of that name), for the stages built FROM one."""
    named: dict[str, Stage] = {}
    out = {}
    for stage in all_stages:
        if stage.image.lower() in named:
            out[id(stage)] = named[stage.image.lower()]
        if stage.name:
            named.setdefault(stage.name.lower(), stage)
    return out


def user_of(stage: Stage, all_stages: Sequence[Stage]) -> str | None:
    """The stage's last USER, following `FROM <earlier stage>`."""
    up = parents(all_stages)
    while stage is not None:
        users = [i.args.split()[0] for i in stage.instructions if i.keyword == "USER" and i.args.split()]
        if users:
            return users[-1]
        stage = up.get(id(stage))
    return None


def _workdir(ins: Instruction, cwd: str | None) -> str | None:
    target = ins.args.strip().strip("\"'")
    return shell.absolute(target, cwd) if target and "$" not in target else None


def workdirs(all_stages: Sequence[Stage]) -> list[dict[int, str | None]]:
    """For each stage, the working directory each of its instructions runs in (by start line; None: unknown, i.e.
    inherited from an image we cannot see), following WORKDIR and `FROM <earlier stage>`: one pass over the file."""
    up = parents(all_stages)
    final: dict[int, str | None] = {}            # id(stage) → the directory after its last instruction
    out = []
    for stage in all_stages:
        parent = up.get(id(stage))
        cwd = final[id(parent)] if parent is not None else "/" if DISTRO.match(stage.image) else None
        wd = {}
        for ins in stage.instructions:
            wd[ins.start] = cwd
            if ins.keyword == "WORKDIR":
                cwd = _workdir(ins, cwd)
        final[id(stage)] = cwd
        out.append(wd)
    return out


def tracked(ins: Instruction, text_lines: Sequence[str], cwd: str | None) -> list[tuple[shell.Command, str | None]]:
    return shell.tracked(commands(ins, text_lines), cwd)


def deleted_later(stage: Stage, ins: Instruction, path: str, text_lines: Sequence[str],
                  wd: dict[int, str | None]) -> Instruction | None:
    after = stage.instructions[stage.instructions.index(ins) + 1:]
    return next((later for later in after if shell.deleted(path, tracked(later, text_lines, wd[later.start]))), None)


def _unverified_add(ins: Instruction) -> str | None:
    if ins.keyword != "ADD" or any(f.startswith("--checksum") for f in ins.flags):
        return None
    return next((w for w in ins.body.split()[:-1] if re.match(r"(https?|ftp)://", w)), None)


def steps(stage: Stage, wd: dict[int, str | None], text_lines: Sequence[str]) -> list[rules.Step]:
    """One step per instruction of the stage (`wd`: its working directories): its shell commands with their
    directories, and the stage's commands (one rules.Later for all its steps, each step's position in it)."""
    pairs = [tuple(tracked(ins, text_lines, wd[ins.start])) for ins in stage.instructions]
    later = rules.Later([p for ps in pairs for p in ps], [ins.start for ins, ps in zip(stage.instructions, pairs) for _ in ps])
    out, start = [], 0
    for ins, ps in zip(stage.instructions, pairs):
        inner = tuple(c for chain in shell.in_substitutions(script(ins, text_lines), docker=True) for c in chain)
        out.append(rules.Step(ps, ins.start, later, start, _unverified_add(ins), inner))
        start += len(ps)
    return out


def check(text: str) -> list[Hit]:
    """Our findings for a Dockerfile (pragmas not yet applied: they are per instruction, see ignored)."""
    text_lines = split_lines(text)
    all_stages = stages(parse(text))
    hits: list[Hit] = []
    final: list[rules.Step] = []
    names = {s.name.lower() for s in all_stages if s.name}
    for stage, wd in zip(all_stages, workdirs(all_stages)):
        final = steps(stage, wd, text_lines)
        hits += [h[:3] for step in final for h in rules.run("step", DOCKER, step)]
        why = None if stage.image.lower() in names else rules.end_of_life(stage.image)
        if why:
            hits.append((stage.start.start, rules.END_OF_LIFE_BASE.id,
                         f"{stage.image}: {why}: no updates from its standard releases since"))
    if all_stages:
        last = all_stages[-1]
        single = tuple(c for step in final for c in step.commands) if len(all_stages) == 1 else ()
        image = rules.Image(last.start.start, user_of(last, all_stages), single)
        hits += [h[:3] for h in rules.run("image", DOCKER, image)
                 if not (h[1] == rules.ROOT_USER.id and holds_only_files(last))]
    return hits


def _shell_word(ins: Instruction) -> str | None:
    try:
        argv = json.loads(ins.args)
    except ValueError:
        return None
    return posixpath.basename(argv[0]) if isinstance(argv, list) and argv and isinstance(argv[0], str) else None


def non_posix_runs(all_stages: Sequence[Stage]) -> set[int]:
    """The lines of the RUN instructions that a SHELL (of their stage, or of the stage it is built FROM) gives to
    bash, zsh or ksh: ShellCheck's "in POSIX sh ... is undefined" (SC3xxx) does not apply there (hadolint loses
    the SHELL after some instructions, e.g. an ENV, and reports it)."""
    shells: dict[str, str | None] = {}
    out: set[int] = set()
    for stage in all_stages:
        current = shells.get(stage.image.lower())
        for ins in stage.instructions:
            if ins.keyword == "SHELL":
                current = _shell_word(ins)
            elif ins.keyword == "RUN" and current in ("bash", "zsh", "ksh"):
                out.update(range(ins.start, ins.end + 1))
        if stage.name:
            shells[stage.name.lower()] = current
    return out


def spaced_heredocs(text: str) -> tuple[str, list[int]]:
    """The text as hadolint parses it, and the original line of each of its lines: a blank line after each
    heredoc terminator that the next instruction follows directly, and `<<-` heredocs with their leading tabs
    already stripped, as the builder strips them (on either, hadolint stops with DL1000 and checks nothing)."""
    lines = split_lines(text)
    heredocs = [ins for ins in parse(text) if ins.heredoc]
    after = {ins.end for ins in heredocs if ins.end < len(lines) and lines[ins.end].strip()}
    changed = {}                     # line number → the line as hadolint reads it
    for ins in heredocs:
        if "<<-" in lines[ins.start - 1]:
            changed[ins.start] = lines[ins.start - 1].replace("<<-", "<<")
            changed.update((n, lines[n - 1].lstrip("\t")) for n in range(ins.start + 1, ins.end + 1))
    if not (after or changed):
        return text, list(range(1, len(lines) + 1))
    out, origin = [], []
    for number, line in enumerate(lines, 1):
        out.append(changed.get(number, line))
        origin.append(number)
        if number in after:
            out.append("")
            origin.append(number)
    return "\n".join(out) + "\n", origin


def holds_only_files(stage: Stage) -> bool:
    """A `FROM scratch` stage with nothing to run (no RUN, CMD or ENTRYPOINT): build outputs to copy from, whose
    user nothing uses."""
    return stage.image.lower() == "scratch" and not any(i.keyword in ("RUN", "CMD", "ENTRYPOINT")
                                                        for i in stage.instructions)


def ignored(instructions: Sequence[Instruction]) -> dict[int, frozenset[str]]:
    """line → ids silenced there by the pragmas above its instruction."""
    return {n: ins.ignore for ins in instructions if ins.ignore for n in range(ins.start, ins.end + 1)}
