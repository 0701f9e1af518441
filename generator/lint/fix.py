"""`gen-recipe lint --fix`: mechanical rewrites of the common smells, at two levels.

One fix at a time: parse the current text, find the first smell a rewrite can remove, splice the
replacement lines in, repeat. Every fix removes its own trigger, so this ends; sites no rewrite
can handle are left alone (and stay reported). Each fix remembers the line of the original file
it came from. A rewrite that may change what the build produces carries the reason (`unsafe`):
`--fix` skips it, `--unsafe-fixes` applies it and prints the reason.

Dockerfiles: apt-get flags and list cleanup, yum/dnf/zypper -y and cache cleanup, pip
--no-cache-dir, `cd DIR && ...` → WORKDIR, SHELL with pipefail before the first RUN with a pipe,
a download deleted in a later RUN → the RUNs merged, a non-root USER at the end of the final stage.
Definitions: the same package-manager and pip fixes in %post, and `%post -c /bin/bash` +
`set -eo pipefail` for pipes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from generator.lint import definition, dockerfile, shell
from generator.lint.model import DOCKER, split_lines
from generator.lint.rules import DOWNLOAD_IN_LAYER, ROOT_USER

NO_BASH = re.compile(r"alpine|busybox|distroless|^scratch$", re.I)
# images whose /bin/sh is dash or bash and that have /bin/bash (the distributions and the images built on them)
HAS_BASH = re.compile(r"^(docker\.io/)?(library/)?(debian|ubuntu|rockylinux|rocky|centos|almalinux|fedora|"
                      r"opensuse|redhat|oraclelinux|amazonlinux|buildpack-deps)[:/@]|^(nvcr\.io/)?nvidia/cuda:|"
                      r"^rocm/|^(docker\.io/)?(library/)?python:(?!.*alpine)", re.I)
SHELL_LINE = 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]'
USER_LINES = ("useradd --create-home --uid 10001 --user-group app", "USER 10001:10001")
MAX_FIXES = 500


@dataclass(frozen=True)
class Fixed:
    line: int           # line of the original file
    rule: str
    what: str
    unsafe: str = ""    # why it may change what the build produces ("" = keeps the meaning)

    def as_dict(self) -> dict:
        return {"line": self.line, "rule": self.rule, "message": self.what, "unsafe": self.unsafe}


@dataclass(frozen=True)
class Edit:
    start: int                  # 0-based index of the first replaced line
    end: int                    # exclusive
    new: tuple[str, ...]
    rules: tuple[str, ...]
    what: str
    at: int | None = None       # 0-based line the smell was on (default: start)
    unsafe: str = ""            # why the rewrite may change the build's meaning


def fix_text(text: str, kind: str, unsafe: bool = False) -> tuple[str, list[Fixed]]:
    """The fixed text and what was fixed (`unsafe`: also the rewrites that may change the meaning)."""
    out, fixed, _ = fix_all(text, kind, unsafe)
    return out, fixed


def fix_all(text: str, kind: str, unsafe: bool = False, limit: int | None = None) -> tuple[str, list[Fixed], str]:
    """fix_text, and why it stopped before the end ("" when it did not): at `limit` (default MAX_FIXES) fixes
    with more to do, or a file it does not rewrite. Line ends (LF or CRLF) and a byte-order mark are kept."""
    limit = MAX_FIXES if limit is None else limit
    finder = _docker_edits if kind == DOCKER else _definition_edits
    if kind == DOCKER and dockerfile.escape_char(split_lines(text)) != "\\":
        return text, [], ("not rewritten: its `# escape=` directive makes another character the line continuation, "
                          "and the fixes write `\\`")
    lines = split_lines(text)
    origin, fixed, limited = list(range(1, len(lines) + 1)), [], ""
    for n in range(limit + 1):
        edit = next((e for e in finder(lines) if unsafe or not e.unsafe), None)
        if edit is None or tuple(edit.new) == tuple(lines[edit.start:edit.end]):
            break
        if n == limit:
            limited = f"stopped after {limit} fixes; run --fix again"
            break
        k = edit.start if edit.at is None else edit.at
        at = origin[k] if k < len(origin) else (origin[-1] if origin else 1)
        lines = lines[:edit.start] + list(edit.new) + lines[edit.end:]
        origin = origin[:edit.start] + [at] * len(edit.new) + origin[edit.end:]
        fixed += [Fixed(at, rule, edit.what, edit.unsafe) for rule in edit.rules]
    if not fixed:
        return text, [], limited
    newline = "\r\n" if "\r\n" in text and text.count("\r\n") * 2 >= text.count("\n") else "\n"
    out = newline.join(lines)
    out = out + newline if out and (text.endswith("\n") or text == "") else out
    return ("\ufeff" + out if text.startswith("\ufeff") else out), fixed, limited


# ---------------------------------------------------------------------------------------------
# Edits shared by both kinds: flags on a command, a cleanup after it
# ---------------------------------------------------------------------------------------------

RECOMMENDS = "drops the packages' Recommends, which a later step may need"
USER_RISK = ("processes that need root (daemons, package installs in images built FROM this one) stop working; "
             "Apptainer ignores USER")
LISTS_RISK = "the image looks like a base: images built FROM it that apt-get install without apt-get update fail"


def _flag_edit(lines: Sequence[str], c: shell.Command, sub: str, add: str, rules: tuple[str, ...],
               what: str, unsafe: str = "") -> Edit | None:
    """Insert ` add` after `PROGRAM ... sub` on the command's line (the first such match on the line
    whose own segment lacks the flag)."""
    prog = re.escape(c.words[0])
    pattern = re.compile(rf"(?<![\w/.-]){prog}(?:\s+[^\s;&|]+)*?\s+{re.escape(sub)}\b")
    for n in range(c.line, c.end + 1):
        text = lines[n - 1]
        for m in pattern.finditer(text):
            if _quoted(text, m.start()) or not _at_command(text, m.start()) \
                    or m.group(0).split() != list(c.words[:len(m.group(0).split())]):  # another command's words
                continue
            segment = re.split(r"&&|\|\||;|\|", text[m.start():])[0]
            if add.split()[0] not in segment.split():
                return Edit(n - 1, n, (text[:m.end()] + " " + add + text[m.end():],), rules, what, unsafe=unsafe)
    return None


def _quoted(text: str, pos: int) -> bool:
    """Whether `pos` of the line is inside a '...' or "..." string (a backslash escapes outside '...')."""
    quote, k = "", 0
    while k < pos:
        ch = text[k]
        if ch == "\\" and quote != "'":
            k += 2
            continue
        if quote and ch == quote or not quote and ch in "'\"":
            quote = "" if quote else ch
        k += 1
    return bool(quote)


_SEGMENT = re.compile(r"&&|\|\||[;|(){}`]|\$\(|\b(?:then|do|else)\b")
_PREFIX = re.compile(r"\s*(RUN\s+(--\S+\s+)*)?((sudo|env|nice|nohup|time|command)(\s+-\S+)*\s+|[A-Za-z_]\w*=\S*\s+)*",
                     re.I)


def _at_command(text: str, pos: int) -> bool:
    """Whether `pos` of the line is where a command's program stands (after an operator, `RUN` and its flags,
    `sudo`/`env` or assignments), not an argument of another command (`echo pip install x > notes`)."""
    return _PREFIX.fullmatch(_SEGMENT.split(text[:pos])[-1]) is not None


def _uses_https(commands: Sequence[shell.Command]) -> bool:
    return any(c.program in ("curl", "wget", "git", "pip", "pip3") or re.fullmatch(r"pip[0-9.]*", c.program)
               for c in commands if any("https://" in w for w in c.words))


def _install_edits(lines: Sequence[str], commands: Sequence[shell.Command], pip_cache_off: Callable[[int], bool],
                   later: Callable[[], Sequence[shell.Command]] = tuple):
    """`later()`: the commands that run after these (for what --no-install-recommends may drop)."""
    for k, c in enumerate(commands):
        if c.program == "apt" and "DL3027" not in c.ignore:
            for n in range(c.line, c.end + 1):
                found = next((m for m in re.finditer(r"(?<![\w/.-])apt(?=\s+(install|update|upgrade|remove|purge)\b)",
                                                     lines[n - 1])
                              if not _quoted(lines[n - 1], m.start()) and _at_command(lines[n - 1], m.start())), None)
                if found:
                    new = lines[n - 1][:found.start()] + "apt-get" + lines[n - 1][found.end():]
                    yield Edit(n - 1, n, (new,), ("DL3027",), f"apt {found.group(1)} -> apt-get {found.group(1)}",
                               unsafe=_apt_risk(found.group(1), commands[k + 1:]))
                    break
        inst = shell.install(c)
        if inst is None:
            continue
        m = inst.manager
        if m is None:
            if "DL3042" not in c.ignore and not shell.pip_no_cache(inst, pip_cache_off(c.line)):
                e = _flag_edit(lines, c, "install", "--no-cache-dir", ("DL3042",), "pip install --no-cache-dir")
                if e:
                    yield e
            continue
        if m.yes_rule not in c.ignore and not shell.says_yes(inst):
            e = _flag_edit(lines, c, _sub(c, m), m.yes_flag, (m.yes_rule,), f"{c.program} {_sub(c, m)} {m.yes_flag}")
            if e:
                yield e
        if m is shell.APT and "DL3015" not in c.ignore and not shell.no_recommends(inst):
            add, what = "--no-install-recommends", f"{c.program} {_sub(c, m)} --no-install-recommends"
            if "ca-certificates" not in inst.packages and _uses_https([*commands[k + 1:], *later()]):
                add, what = add + " ca-certificates", what + " ca-certificates (a later step uses HTTPS)"
            e = _flag_edit(lines, c, _sub(c, m), add, ("DL3015",), what, unsafe=RECOMMENDS)
            if e:
                yield e


APT_CACHE_CLEAN = re.compile(r"^(apt-get|apt) (.* )?clean$|^rm .*/var/cache/apt(/archives)?/?(\*|\*\.deb)?( |$)")


def _apt_risk(sub: str, after: Sequence[shell.Command]) -> str:
    """Why `apt SUB` -> `apt-get SUB` may change what the step leaves in the image ("": it provably does not);
    `after`: the commands after the install that the step runs."""
    if sub == "upgrade":
        return "apt upgrade installs the new packages an upgrade needs, apt-get upgrade holds those upgrades back"
    if sub == "install" and not any(APT_CACHE_CLEAN.search(" ".join(d.words)) for d in after):
        return ("apt deletes the .deb files it downloaded, apt-get keeps them in /var/cache/apt/archives (unless the "
                "image's apt configuration removes them): add `apt-get clean` after it")
    return ""


# what reads the apt lists (/var/lib/apt/lists): resolving, downloading or showing packages
_READS_LISTS = {"apt-get": {"install", "download", "source", "build-dep", "upgrade", "dist-upgrade", "full-upgrade",
                            "satisfy", "reinstall", "check"},
                "apt": {"install", "reinstall", "upgrade", "full-upgrade", "show", "search", "list", "policy",
                        "depends", "rdepends", "satisfy", "download", "source", "build-dep", "showsrc", "madison"}}


def apt_sub(c: shell.Command) -> str:
    """The subcommand of an apt-get/apt/apt-cache command (`-o X=Y`, `-t REL`, `-c FILE` skipped)."""
    skip = False
    for w in c.words[1:]:
        if skip:
            skip = False
        elif w in shell.APT.value_options:
            skip = True
        elif not w.startswith("-"):
            return w
    return ""


_APT_IN_WORD = re.compile(r"(^|[\s;&|(`])(apt-get|apt|apt-cache|aptitude)($|\s)")   # xargs apt-get, sh -c "apt-get …"


# programs known not to read the apt lists: any other (a copied-in `install-prereqs`, `./setup`) may
_NO_APT = frozenset(
    "echo printf cd mkdir rm rmdir cp mv ln chmod chown chgrp touch cat tee ls find grep egrep sed awk sort uniq "
    "head tail wc cut tr tar gzip gunzip bzip2 xz unxz zstd unzip zip curl wget git make cmake ninja meson gcc g++ cc "
    "c++ gfortran ld ldconfig strip install patch diff python python3 pip pip3 useradd groupadd usermod userdel "
    "adduser addgroup id whoami sha256sum sha512sum md5sum gpg true false test [ export set unset exit env sleep "
    "date uname nproc which command type du df readlink realpath basename dirname xargs locale-gen localedef "
    "update-alternatives update-ca-certificates dpkg-reconfigure dpkg rpm yum dnf microdnf zypper apk conda mamba "
    "micromamba npm node cargo go rustup spack mpicc mpicxx mpif90 mpirun mpiexec nvcc hipcc ccache autoreconf "
    "libtool pkg-config ldd file sync chpasswd passwd git-lfs apt-get apt apt-cache "
    # builtins that run nothing else (not source, ., eval, exec, command, builtin: those run what they are given)
    ": pwd umask export unset set shopt alias unalias trap ulimit readonly declare typeset local read hash let "
    "getopts mapfile readarray exit return wait shift break continue times pushd popd".split()) | {""}


def reads_apt_lists(commands: Sequence[shell.Command]) -> shell.Command | None:
    """The first command that needs the apt lists while none are there (no `apt-get update` before it), or may:
    one that hands `apt-get` to another program (`xargs apt-get`, `sh -c "apt-get …"`, `su -c`), runs a script,
    or is rosdep, gdebi or mk-build-deps."""
    for c in commands:
        sub = apt_sub(c)
        if c.program in ("apt-get", "apt") and sub == "update":
            return None
        if c.program in ("apt-cache", "aptitude", "rosdep") or sub in _READS_LISTS.get(c.program, ()) \
                or c.program not in ("apt-get", "apt") and any(_APT_IN_WORD.search(w) for w in c.words[1:]) \
                or c.program not in _NO_APT \
                or c.program.endswith(".sh") or c.program in shell.SHELLS and len(c.words) > 1 \
                and not c.words[1].startswith("-"):
            return c
    return None


def _sub(c: shell.Command, m: shell.Manager) -> str:
    return next((w for w in c.words[1:] if w in m.installs), "install")


# the shell's own echo and printf: with fixed words they fail only when their reader has gone
QUIET_WRITERS = frozenset({"echo", "printf"})
# filters that read their whole input and fail only on an unreadable input or a bad option
FILTERS = frozenset({"tr", "sort", "uniq", "cut", "tac", "rev", "base64", "cat"})
# readers that read their input to the end (with the options that would stop them early excluded below)
READS_ALL = FILTERS | {"tee", "wc", "sed", "awk", "grep", "sha256sum", "sha512sum", "md5sum", "gpg", "apt-key", "xxd",
                       "od", "column", "paste", "fold", "nl", "dd"}
_STOPS_GREP = re.compile(r"-[A-Za-z]*[qlLm][A-Za-z0-9]*|--(quiet|silent|max-count|files-with(out)?-match(es)?)(=.*)?")
_SED_QUIT = re.compile(r"(^|[;{}\s]|^[0-9]+|\$|/)[qQ](\s*[0-9]*\s*($|[;}]))")


def _never_ends(c: shell.Command) -> bool:
    return c.program == "yes" or c.program == "tail" and any(w in ("-f", "-F", "--follow") or w.startswith("--follow=")
                                                              for w in c.words[1:]) \
        or c.program in ("cat", "head", "dd") and any(w.endswith(("/dev/zero", "/dev/urandom", "/dev/random"))
                                                      for w in c.words[1:])


def _stops_early(c: shell.Command) -> bool:
    args = c.words[1:]
    return c.program == "head" or c.program in shell.SHELLS or re.fullmatch(r"python[0-9.]*|perl|ruby|node", c.program) \
        is not None or c.program == "grep" and any(_STOPS_GREP.fullmatch(w) for w in args) \
        or c.program == "sed" and any(_SED_QUIT.search(w) for w in args if not w.startswith("-")) \
        or c.program == "awk" and any(re.search(r"\bexit\b", w) for w in args)


def pipe_risk(pipe: Sequence[shell.Command]) -> str:
    """Why `set -o pipefail` may change this pipeline's status in a build that passes without it ("" when it
    provably does not: only echo/printf with fixed words, or filters, write into readers of the whole input)."""
    if len(pipe) < 2:
        return ""
    for c in pipe[:-1]:
        if _never_ends(c):
            return (f"`{' '.join(c.words)[:40]}` (line {c.line}) never ends: its reader's exit ends it with SIGPIPE, which "
                    "fails the step under pipefail")
    for c in pipe[1:]:
        if _stops_early(c):
            return (f"a pipe into `{c.program}` (line {c.line}) may close early: with pipefail the writer's SIGPIPE "
                    "fails the step")
    for k, c in enumerate(pipe[:-1]):
        fixed = not any("__SUB__" in w for w in c.words) and not (
            c.program == "printf" and len(c.words) > 1 and re.search(r"%[-+ #0-9.]*[^s%-+ #0-9.]", c.words[1]))
        if not (c.program in QUIET_WRITERS and fixed or k > 0 and c.program in FILTERS and len(c.words) == 1):
            return (f"under pipefail a failure of `{c.program}` (line {c.line}) fails the step; without it only "
                    f"`{pipe[-1].program}`'s status counts")
    for c in pipe[1:]:
        if c.program not in READS_ALL:
            return (f"`{c.program}` (line {c.line}) may stop reading before its writer ends: with pipefail the "
                    "writer's SIGPIPE fails the step")
    return ""


# what bash does differently from dash (Debian's and Ubuntu's /bin/sh), found in a script's text
BASHISMS = (
    (re.compile(r"(?<![$\\\w])\{[^\s{}'\"$]*,[^\s{}'\"]*\}|(?<![$\\])\{-?\w+\.\.-?\w+\}"),
     "brace expansion {}: dash keeps the braces, bash expands them"),
    (re.compile(r"\becho\s+(-[neE]+\s+)*-[neE]*[eE]"), "echo -e: dash's echo prints the -e, bash's takes it as an option"),
    (re.compile(r"\becho\b[^\n|;&]*\\[abcefnrtv0\\]"), "echo with backslash escapes: sh's echo interprets them, "
                                                          "bash's does not"),
    (re.compile(r"\$'"), "$'...' strings: bash expands the escapes, sh keeps them"),
    (re.compile(r"\[\s[^]\n]*\s==\s|\btest\s[^\n;&|]*\s==\s"), "== in [ ]: dash stops with an error, bash compares"),
    (re.compile(r"&>|\|&|<<<|[<>]\(|\[\[|\$\{![\w@*]|\$\{\w+(:[-=?+]?[0-9]|/|\^|,)"),
     "bash-only syntax (&>, |&, <<<, <(), [[, ${x:n}, ${x/a/b}): dash reads it otherwise or stops"),
    (re.compile(r"(^|[;&|({]\s*)(source|shopt|declare|typeset|let|pushd|popd|function)\s"),
     "a bash builtin or keyword (source, shopt, declare, let, pushd, function): dash has none of them"),
    (re.compile(r"\$RANDOM|\$\{?(BASH\w*|PIPESTATUS|SECONDS|HOSTTYPE|OSTYPE|UID|EUID|HOSTNAME|GROUPS)\b"),
     "a bash variable: empty under dash"),
    (re.compile(r"\$\"|\[\s+-v\s"), "$\"...\" or [ -v ]: dash reads them otherwise"),
)
# images whose /bin/sh is dash (the Debian family): switching them to bash changes what a bashism does
DASH = re.compile(r"^(docker\.io/)?(library/)?(debian|ubuntu|buildpack-deps)[:/@]|^(nvcr\.io/)?nvidia/cuda:|^rocm/|"
                  r"^(docker\.io/)?(library/)?python:(?!.*alpine)", re.I)


SHELL_SWITCH = ("the steps then run under bash instead of sh (dash on Debian and Ubuntu, bash in POSIX mode "
                "elsewhere), which differ where no reading of the script can rule it out: $BASH_ENV read before each "
                "step, ~ expanded in words like PATH=~/bin, echo escapes, the variables bash sets; review the steps")


def _shell_risk(image: str, script: Sequence[tuple[int, str]], docker: bool = False) -> str:
    """Why running a script, given as (line, text) pairs, with bash -o pipefail instead of sh may change the
    build: the first difference found, else the general one (a shell switch is never proven safe)."""
    return _shell_difference(image, script, docker) or SHELL_SWITCH


def _shell_difference(image: str, script: Sequence[tuple[int, str]], docker: bool = False) -> str:
    if not HAS_BASH.search(image):
        return f"`{image}` is not an image known to have bash"
    commands, _ = shell.split_script(script, docker)
    if any(c.program in ("alias", "unalias") for c in commands):
        return "aliases: sh expands them in scripts, non-interactive bash does not"
    for number, text in script:
        if text.lstrip().startswith("#"):
            continue
        for pattern, why in BASHISMS if DASH.search(image) else BASHISMS[2:4]:
            m = pattern.search(text)
            if m:
                return f"{why} (line {number}: `{m.group(0).strip()[:30]}`)"
    return next((r for r in map(pipe_risk, shell.all_pipelines(script, docker)) if r), "")


# ---------------------------------------------------------------------------------------------
# Dockerfiles
# ---------------------------------------------------------------------------------------------

def _base(stage: dockerfile.Stage, stages: Sequence[dockerfile.Stage]) -> str:
    """The external image a stage starts from, through `FROM <earlier stage>`."""
    parent = next((s for s in stages if s.name and s.name.lower() == stage.image.lower() and s is not stage), None)
    return _base(parent, [s for s in stages if s is not stage]) if parent else stage.image


def _chain(stage: dockerfile.Stage, stages: Sequence[dockerfile.Stage]) -> list[dockerfile.Stage]:
    """The stage and the earlier stages it is built FROM."""
    parent = next((s for s in stages if s.name and s.name.lower() == stage.image.lower() and s is not stage), None)
    return [stage, *(_chain(parent, [s for s in stages if s is not stage]) if parent else [])]


def _children(stage: dockerfile.Stage, stages: Sequence[dockerfile.Stage]) -> list[dockerfile.Stage]:
    """The later stages built FROM this one (directly or through others)."""
    return [s for s in stages if s is not stage and stage in _chain(s, stages)[1:]]


def _looks_like_base(stage: dockerfile.Stage, stages: Sequence[dockerfile.Stage]) -> bool:
    """The final stage with no CMD/ENTRYPOINT of its own or inherited from a stage: made to be extended."""
    return stage is stages[-1] and not any(i.keyword in ("CMD", "ENTRYPOINT") for s in _chain(stage, stages)
                                           for i in s.instructions)


def _appendable(ins: dockerfile.Instruction, lines: Sequence[str]) -> bool:
    last = lines[ins.end - 1].rstrip()
    return ins.keyword == "RUN" and ins.shell_form and not last.endswith(("\\", ";", "&", "|")) and "#" not in last


def _append(ins: dockerfile.Instruction, lines: Sequence[str], command: str, rule: str, what: str,
            unsafe: str = "") -> Edit:
    return Edit(ins.end - 1, ins.end, (lines[ins.end - 1].rstrip() + " && \\", "    " + command), (rule,), what,
                unsafe=unsafe)


def _lists_risk(stage, stages, ins, lines) -> str:
    """Why removing the apt lists at the end of RUN `ins` may break a build (see LISTS_RISK): a later step of
    the stage, or of a stage built from it, reads them without an `apt-get update` of its own."""
    if _looks_like_base(stage, stages):
        return LISTS_RISK
    unknown = next((s for s in stages[stages.index(stage) + 1:] if "$" in s.image), None)
    if unknown is not None:
        return (f"the stage of line {unknown.start.start} is built FROM {unknown.image}, which may be this stage: "
                "its steps may read the lists")
    for step in _later_steps(stage, stages, ins):
        c = reads_apt_lists(dockerfile.commands(step, lines))
        if c is not None:
            return f"line {c.line} runs `{' '.join(c.words[:3])}`, which reads (or may read) the apt lists, without apt-get update"
    return ""


def _docker_cleanups(stage, stages, ins, lines, cmds):
    for m in shell.MANAGERS:
        used = [c for c in cmds if c.program in m.programs and any(w in (*m.installs, "update") for w in c.words)]
        cached = m is shell.APT and any(re.search(r"type=cache", f) and re.search(r"(target|dst|destination)=/var/lib/apt"
                                                                                  r"(/lists)?/?(,|$)", f) for f in ins.flags)
        if used and not cached and m.clean_rule not in ins.ignore and not any(shell.is_clean(c, m) for c in cmds) \
                and any(shell.install(c) for c in used) and _appendable(ins, lines):    # cached: not in the image
            risk = _lists_risk(stage, stages, ins, lines) if m is shell.APT else _cache_only(
                m, [c for step in _later_steps(stage, stages, ins) for c in dockerfile.commands(step, lines)])
            clean = _clean_command(m, next(c.program for c in used if shell.install(c)))
            yield _append(ins, lines, clean, m.clean_rule, f"added `{clean}` to the RUN", risk)


def _clean_command(m: shell.Manager, program: str) -> str:
    """The manager's clean command, run by the program that installed (`microdnf clean all`: minimal images
    have no dnf)."""
    return m.clean_command if program == m.programs[0] or program not in m.programs else \
        m.clean_command.replace(m.programs[0], program, 1)


def _cache_only(m: shell.Manager, after: Sequence[shell.Command]) -> str:
    """Why cleaning yum/dnf/zypper's cache may break a later step: one that runs from the cache alone."""
    c = next((c for c in after if c.program in m.programs and any(w in ("-C", "--cacheonly") for w in c.words)), None)
    return f"line {c.line} runs `{' '.join(c.words[:3])}` from the cache alone, which the clean empties" if c else ""


def _later_steps(stage, stages, ins) -> list[dockerfile.Instruction]:
    """The instructions after `ins` in its stage, then those of the stages built from it."""
    return [*stage.instructions[stage.instructions.index(ins) + 1:],
            *(i for child in _children(stage, stages) for i in child.instructions)]


WORKDIR_RISK = ("WORKDIR resolves symbolic links, cd does not: with a link on the way (/usr/local/cuda, a Spack view, "
                "a conda prefix) $PWD and `pwd` of the step and of every shell it starts name another path; and "
                "WORKDIR makes a missing directory where cd fails")


def _docker_workdir(stage, ins, lines, cmds, wd, index):
    if "DL3003" in ins.ignore or not cmds or cmds[0].program != "cd" or len(cmds[0].words) != 2 \
            or cmds[0].op != "&&" or sum(c.program in ("cd", "pushd", "popd") for c in cmds) != 1:
        return
    target = cmds[0].words[1]
    if re.search(r"[$*?~`\\\"']", target) or target == "-":
        return
    previous = wd[ins.start]
    where = shell.absolute(target, previous)
    if where is None:                               # relative to a WORKDIR we cannot see
        return
    mounts = [m.group(2).rstrip("/") or "/" for f in ins.flags
              if (m := re.search(r"(^|,)(?:target|dst|destination)=([^,]+)", f.partition("=")[2]))]
    if any(where == t or where.startswith(t.rstrip("/") + "/") for t in mounts):
        return                                      # in a mount: WORKDIR would leave empty folders in the image
    first = lines[ins.start - 1]
    new_first = re.sub(rf"^(\s*RUN\s+(?:--\S+\s+)*)cd\s+{re.escape(target)}\s*&&\s*", r"\1", first, count=1,
                       flags=re.I)
    if new_first == first:
        return
    following = stage.instructions[index + 1] if index + 1 < len(stage.instructions) else None
    absolute_next = following is not None and following.keyword == "WORKDIR" and following.args.startswith("/")
    restore = () if absolute_next else (f"WORKDIR {previous or '/'}",)
    risk = WORKDIR_RISK if previous is not None or absolute_next else \
        "the WORKDIR inherited from the base image is unknown: restoring it as / may change later steps and the " \
        "image's working directory"
    block = tuple(lines[ins.above - 1:ins.start - 1])
    body = (new_first, *lines[ins.start:ins.end])
    yield Edit(ins.above - 1, ins.end, (f"WORKDIR {where}", *block, *body, *restore), ("DL3003",),
               f"`cd {target} &&` -> WORKDIR {where}", ins.start - 1, risk)


def _has_pipe(ins, lines) -> bool:
    """A pipe in a RUN the SHELL runs (shell form or heredoc, not JSON form)."""
    return not dockerfile.json_form(ins) and any(c.op in ("|", "|&") for c in dockerfile.commands(ins, lines))


def _shell_form_elsewhere(stages_affected) -> dockerfile.Instruction | None:
    """A shell-form CMD, ENTRYPOINT or HEALTHCHECK, or an ONBUILD: the SHELL runs them too, and the proof reads
    only RUNs."""
    for s in stages_affected:
        for i in s.instructions:
            if i.keyword == "ONBUILD" or i.keyword in ("CMD", "ENTRYPOINT") and not i.args.lstrip().startswith("[") \
                    or i.keyword == "HEALTHCHECK" and re.match(r"(--\S+\s+)*CMD\s+(?!\[)", i.args, re.I):
                return i
    return None


def _docker_pipefail(stage, stages, lines):
    if any(i.keyword == "SHELL" for s in _chain(stage, stages)[1:] for i in s.instructions):
        return                                      # a SHELL inherited from the stage it is built FROM
    for index, ins in enumerate(stage.instructions):
        if ins.keyword == "SHELL":
            return
        if ins.keyword == "RUN" and _has_pipe(ins, lines):
            base = _base(stage, stages)
            if "DL4006" in ins.ignore or NO_BASH.search(base) or "$" in base:
                return
            runs = [i for s in [stage, *_children(stage, stages)] for i in
                    (s.instructions[index:] if s is stage else s.instructions)
                    if i.keyword == "RUN" and not dockerfile.json_form(i)]
            script = [pair for i in runs for pair in dockerfile.script(i, lines)]
            other = _shell_form_elsewhere([stage, *_children(stage, stages)])
            risk = (f"the SHELL also runs the {other.keyword} of line {other.start}, which the proof does not read"
                    if other else "") or _shell_difference(base, script, docker=True) or \
                ("the image looks like a base: images built FROM it inherit the SHELL" if any(
                    _looks_like_base(s, stages) for s in [stage, *_children(stage, stages)]) else SHELL_SWITCH)
            yield Edit(ins.above - 1, ins.above - 1, (SHELL_LINE,), ("DL4006",),
                       "SHELL with -o pipefail before the first RUN with a pipe", ins.start - 1, risk)
            return


def _strip_run(text: str) -> str:
    return re.sub(r"^\s*RUN\s+((--\S+)\s+)*", "", text, flags=re.I)


# builtins that change the shell that runs them (its directory, umask, variables, options, traps, limits,
# functions) or end it: in a merged RUN they would reach the steps after them, so their RUN goes in ( )
STATEFUL = frozenset({"cd", "pushd", "popd", "umask", "export", "unset", "set", "shopt", "alias", "unalias", "trap",
                      "ulimit", "readonly", "declare", "typeset", "local", "source", ".", "eval", "read", "hash", "let",
                      "getopts", "mapfile", "readarray", "exit", "return", "enable", "builtin", "command"})
_STATEFUL_TEXT = re.compile(r"\bexec\b|\bfunction\s|\w\s*\(\s*\)|(^|&&|\|\||[;({]|\bthen|\bdo|\belse)\s*"
                            r"[A-Za-z_]\w*=\S*\s*($|&&|\|\||[;)}])")
ERREXIT = re.compile(r"\bset\b[^;&|\n]*\s(-[A-Za-z]*e[A-Za-z]*\b|-o\s+errexit)")


def _bare_assignment(body: str) -> bool:
    """An assignment that is a command of its own (`A=1 &&`, `V=$(...)`, `P="a b"`): it stays in the shell."""
    toks = shell._tokens(body.replace("\n", " "))
    return any(re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", t) and (k == 0 or toks[k - 1] in shell._OPS)
               and (k + 1 == len(toks) or toks[k + 1] in shell._OPS) for k, t in enumerate(toks))


# assignments inside expansions: ${V:=x}, ${V=x}, $((i=1)), $((i++))
_EXPANSION_ASSIGNS = re.compile(r"\$\{[A-Za-z_]\w*:?=|\$\(\([^)]*(\+\+|--|[^=!<>]=(?!=))")


def _needs_parens(cmds: Sequence[shell.Command], body: str) -> bool:
    return any(c.program in STATEFUL or c.op in (";", "||", "&") for c in cmds) \
        or body.rstrip().endswith((";", "&")) or bool(_STATEFUL_TEXT.search(body)) or _bare_assignment(body) \
        or bool(_EXPANSION_ASSIGNS.search(body)) \
        or any(c.program == "printf" and c.words[1:2] and c.words[1].startswith("-v") for c in cmds)  # bash


def _plain_sh(args: str) -> bool:
    """A SHELL instruction that keeps the default: `["/bin/sh", "-c"]` (or `sh`, `-e`/`-x` flags)."""
    try:
        argv = json.loads(args)
    except ValueError:
        return False
    return isinstance(argv, list) and argv[:1] in (["/bin/sh"], ["sh"]) and argv[-1:] == ["-c"] \
        and all(isinstance(a, str) and re.fullmatch(r"-[ex]+", a) for a in argv[1:-1])


def _open(body: str) -> str:
    """`body` in an opening `(`: `( (` where it starts with one (bash reads `((` as arithmetic)."""
    return ("( " if body.lstrip().startswith("(") else "(") + body


def _docker_merge(stage, stages, ins, lines, wd):
    """DOWNLOAD_IN_LAYER: a download deleted by a later RUN → the RUNs from the download to the deletion merged."""
    pairs = dockerfile.tracked(ins, lines, wd[ins.start])
    for k, (c, cwd) in enumerate(pairs):
        path = shell.downloaded(c, cwd)
        if not path or DOWNLOAD_IN_LAYER.id in ins.ignore or shell.deleted(path, pairs[k + 1:]):
            continue
        later = dockerfile.deleted_later(stage, ins, path, lines, wd)
        if later is None:
            continue
        span = stage.instructions[stage.instructions.index(ins):stage.instructions.index(later) + 1]
        texts = ["\n".join(lines[i.start - 1:i.end]) for i in span]
        if any(i.keyword != "RUN" or not i.shell_form or i.flags != ins.flags for i in span) \
                or any(i.ignore for i in span[1:]) or any("#" in t for t in texts):
            return
        merged: list[str] = []
        for n, i in enumerate(span):
            body = [_strip_run(lines[i.start - 1]) if n else lines[i.start - 1], *lines[i.start:i.end]]
            if _needs_parens(dockerfile.commands(i, lines), "\n".join([_strip_run(body[0]), *body[1:]])):
                if n == 0:
                    head = re.match(r"^(\s*RUN\s+(?:--\S+\s+)*)", body[0], re.I).group(1)
                    body[0] = head + _open(body[0][len(head):])
                else:
                    body[0] = _open(body[0])
                body[-1] = body[-1].rstrip() + ")"
            body = body if n == 0 else ["    " + body[0].lstrip(), *body[1:]]
            if n < len(span) - 1:
                body[-1] = body[-1].rstrip() + " && \\"
            merged += body
        bodies = {j for i in span for j in range(i.start - 1, i.end)}
        moved = [lines[j] for j in range(ins.end, later.end) if j not in bodies and lines[j].strip()]
        block = lines[ins.above - 1:ins.start - 1]
        errexit = next((i for i in span[:-1] if ERREXIT.search("\n".join(lines[i.start - 1:i.end]))), None)
        shell_e = next((i for s in _chain(stage, stages) for i in s.instructions if i.keyword == "SHELL"
                        and (s is not stage or i.start < ins.start)
                        and re.search(r'"-[A-Za-z]*e[A-Za-z]*"|"errexit"', i.args)), None)
        other_shell = next((i for s in _chain(stage, stages) for i in s.instructions if i.keyword == "SHELL"
                            and (s is not stage or i.start < ins.start) and not _plain_sh(i.args)), None)
        risk = f"the SHELL of line {shell_e.start} sets -e: merged, a RUN runs in ( ) before &&, where -e is ignored" \
            if shell_e else (
            f"the RUN of line {errexit.start} sets -e: merged, it runs in ( ) before &&, where sh ignores -e"
            if errexit else "") or (
            f"the SHELL of line {other_shell.start} is not sh: it may read a profile or $BASH_ENV, whose functions "
            "(conda activate, module load) change the shell they run in, and merged, that change reaches the "
            "steps after them" if other_shell else "")
        yield Edit(ins.above - 1, later.end, (*moved, *block, *merged), (DOWNLOAD_IN_LAYER.id,),
                   f"merged the RUNs of lines {ins.start}-{later.start}: {path} is deleted in its own layer",
                   ins.start - 1, risk)
        return


def _docker_user(stages, lines):
    last = stages[-1]
    base = _base(last, stages)
    if dockerfile.user_of(last, stages) is not None or ROOT_USER.id in last.start.ignore or NO_BASH.search(base) \
            or "$" in base:
        return
    end = last.instructions[-1] if last.instructions else last.start
    what = "non-root user 10001 at the end of the final stage"
    if _appendable(end, lines):
        e = _append(end, lines, USER_LINES[0], ROOT_USER.id, what)
        yield Edit(e.start, e.end, (*e.new, USER_LINES[1]), (ROOT_USER.id,), what, last.start.start - 1, USER_RISK)
    else:
        yield Edit(end.end, end.end, ("RUN " + USER_LINES[0], USER_LINES[1]), (ROOT_USER.id,), what,
                   last.start.start - 1, USER_RISK)


def _docker_edits(lines: list[str]):
    """Every rewrite the text offers now, in file order (the first allowed one is applied). Each instruction's
    commands are read once: the checks of one RUN look at the later ones (linear, not quadratic, in RUNs)."""
    instructions = dockerfile.parse("\n".join(lines))
    stages = dockerfile.stages(instructions)
    cmds = {i.start: dockerfile.commands(i, lines) for s in stages for i in s.instructions
            if i.keyword in ("RUN", "ONBUILD")}
    for number, (stage, wd) in enumerate(zip(stages, dockerfile.workdirs(stages))):
        runs = [(k, ins) for k, ins in enumerate(stage.instructions) if ins.keyword == "RUN" and ins.shell_form]
        env, read = "", 0                   # the ENV and ARG text before the RUN
        for r, (index, ins) in enumerate(runs):
            env += " ".join(i.args for i in stage.instructions[read:index] if i.keyword in ("ENV", "ARG")) + " "
            read = index
            scoped = [shell.Command(c.words, c.assigns, c.line, c.end, c.pipeline, c.stage, c.op,
                                    c.ignore | ins.ignore) for c in cmds[ins.start]]

            def later(r=r, number=number, runs=runs):
                return [c for _, i in runs[r + 1:] for c in cmds[i.start]] + [
                    c for s in stages[number + 1:] for i in s.instructions for c in cmds.get(i.start, ())]
            yield from _install_edits(lines, scoped, lambda _, env=env: "PIP_NO_CACHE_DIR" in env, later)
            yield from _docker_cleanups(stage, stages, ins, lines, cmds[ins.start])
            yield from _docker_workdir(stage, ins, lines, cmds[ins.start], wd, index)
            yield from _docker_merge(stage, stages, ins, lines, wd)
        yield from _docker_pipefail(stage, stages, lines)
    if stages:
        yield from _docker_user(stages, lines)


# ---------------------------------------------------------------------------------------------
# Definitions
# ---------------------------------------------------------------------------------------------

def _indent(text: str) -> str:
    return text[:len(text) - len(text.lstrip())]


_OPEN = {"do": 1, "done": -1, "then": 1, "fi": -1, "case": 1, "esac": -1, "{": 1, "}": -1}


def _nesting(script: Sequence[tuple[int, str]], last: int) -> int:
    """How many loops, ifs, cases, functions and { } groups are open after line `last` of a script."""
    depth = 0
    for start, _, text, _ in shell.logical_lines(script):
        if start > last:
            break
        words = shell._tokens(text)
        depth += sum(_OPEN.get(w, 0) for k, w in enumerate(words) if k == 0 or words[k - 1] in shell._OPS
                     or w in ("{", "}", "do", "then"))
    return max(depth, 0)


def _definition_cleanups(lines, stage, commands):
    base = not stage.of("runscript", "startscript")
    for m in shell.MANAGERS:
        unclean = [c for k, c in enumerate(commands) if shell.install(c) and shell.install(c).manager is m
                   and m.clean_rule not in c.ignore and not any(shell.is_clean(d, m) for d in commands[k + 1:])]
        if unclean:
            c = unclean[-1]
            risk = LISTS_RISK.replace("FROM it", "from it (Bootstrap: localimage)") if base and m is shell.APT else ""
            reader = reads_apt_lists(commands[commands.index(c) + 1:]) if m is shell.APT else None
            depth = _nesting(definition.post_script(stage), c.end)
            if depth:
                risk = (f"the install on line {c.line} is inside a loop, function, if or case: the removal after it "
                        "would run before its next round")
            elif reader is not None:
                risk = (f"line {reader.line} runs `{' '.join(reader.words[:3])}`, which reads (or may read) the apt "
                        "lists, after the line the removal goes to")
            elif m is not shell.APT:
                risk = _cache_only(m, commands[commands.index(c) + 1:])
            clean = _clean_command(m, c.program)
            yield Edit(c.end, c.end, (_indent(lines[c.line - 1]) + clean,), (m.clean_rule,),
                       f"added `{clean}` after the last {m.name} install of the stage", c.line - 1, risk)


def _definition_pipefail(lines, stage, commands):
    posts = stage.of("post")
    pipefail = definition.pipefail_after("sh", [], commands)
    pipes = [c for c in commands if c.op in ("|", "|&") and "DL4006" not in c.ignore and c.program not in ("echo", "printf")
             and not (pipefail is not None and pipefail < c.line)]
    if not posts or not pipes or any(s.args for s in posts):
        return
    image = stage.get("from").value if stage.get("from") else ""
    agent = stage.get("bootstrap").value.lower() if stage.get("bootstrap") else ""
    if agent in ("busybox", "scratch") or NO_BASH.search(image) or "$" in image or "{{" in image:
        return
    first = posts[0]
    body = next((t for _, t in first.body if t.strip()), "    ")
    header = re.sub(r"^(\s*%post)\b", r"\1 -c /bin/bash", lines[first.line - 1], count=1)
    known = image if agent in ("docker", "oci", "docker-daemon") else f"{agent}: {image}"
    risk = _shell_risk(known, definition.post_script(stage))
    yield Edit(first.line - 1, first.line, (header, _indent(body) + "set -eo pipefail"), ("DL4006",),
               "%post -c /bin/bash with `set -eo pipefail` (Apptainer applies it to every %post of the stage)",
               pipes[0].line - 1, risk)


def _definition_edits(lines: list[str]):
    for stage in definition.parse("\n".join(lines)):
        script = definition.post_script(stage)
        commands, _ = shell.split_script(script)
        no_cache = [n for n, t in script if re.search(r"\bPIP_NO_CACHE_DIR=\S", t)]
        yield from _install_edits(lines, commands, lambda line, no_cache=no_cache: any(n < line for n in no_cache))
        yield from _definition_cleanups(lines, stage, commands)
        yield from _definition_pipefail(lines, stage, commands)
