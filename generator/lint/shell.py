"""Shell scripts → simple commands, and the package-manager / download smells found in them.

Shared by the definition linter (`%post` scripts), the Dockerfile rules (RUN bodies) and the
fixer. This is not a shell parser: it splits logical lines (backslash continuations joined,
heredoc bodies skipped) into simple commands at `&&`, `||`, `;`, `&` and `|`, which is enough to
recognise `apt-get install ...`, `pip install ...`, `wget ... | sh` and `rm -rf ...`.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PRAGMA = re.compile(r"^\s*#\s*gen-recipe:\s*ignore=([A-Za-z0-9_,\s]+?)\s*$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ARITH = re.compile(r"\$\(\([^()]*\)\)")
_SUBST = re.compile(r"\$\([^()]*\)|`[^`]*`")
_FD = re.compile(r"(?<=\s)[0-9]+(?=[<>])")
_OPS = {"&&", "||", ";", "&", "|", "|&", ";;", "(", ")", "\n"}
_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "exec", "sudo", "env", "nohup"}
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SHELLS = {"sh", "bash", "dash", "ash", "ksh", "zsh", "busybox"}
ARCHIVE = re.compile(r"\.(tar(\.(gz|bz2|xz|zst|lz4))?|tgz|tbz2?|txz|zip|7z|whl|deb|rpm|run|gz|bz2|xz|zst|iso)$")


@dataclass(frozen=True)
class Command:
    """One simple command: its words (leading VAR=value assignments split off), where it is, and
    how it connects to the next command."""

    words: tuple[str, ...]
    assigns: tuple[str, ...]
    line: int                 # first line of its logical line
    end: int                  # last line of its logical line
    pipeline: int             # index of the pipeline it belongs to, in script order
    stage: int                # position in that pipeline (0 = first)
    op: str                   # operator after it: &&, ||, ;, &, | or "" (end of line)
    ignore: frozenset[str]    # rule ids silenced by a `# gen-recipe: ignore=` pragma

    @functools.cached_property
    def program(self) -> str:
        return posixpath.basename(self.words[0]) if self.words else ""


@dataclass(frozen=True)
class Span:
    """A logical line (with its continuation lines) and the ids a pragma silences on it."""

    line: int
    end: int
    ignore: frozenset[str]


def pragma_ids(text: str) -> frozenset[str]:
    m = PRAGMA.match(text)
    return frozenset(i.strip().upper() for i in m.group(1).split(",") if i.strip()) if m else frozenset()


def continued(text: str, escape: str = "\\") -> bool:
    stripped = text.rstrip()
    return (len(stripped) - len(stripped.rstrip(escape))) % 2 == 1


def logical_lines(lines: Sequence[tuple[int, str]], skip_comments_in_continuation: bool = False,
                  escape: str = "\\") -> list[tuple[int, int, str, frozenset[str]]]:
    """(first line, last line, joined text, pragma ids) per logical line; comments and heredoc
    bodies are dropped, a pragma comment applies to the next logical line."""
    out, pending, i = [], frozenset(), 0
    while i < len(lines):
        number, text = lines[i]
        if not text.strip():
            i += 1
            continue
        if text.lstrip().startswith("#"):
            pending |= pragma_ids(text)
            i += 1
            continue
        start, parts = number, [text]
        while continued(parts[-1], escape) and i + 1 < len(lines):
            i += 1
            nxt = lines[i][1]
            if skip_comments_in_continuation and (nxt.lstrip().startswith("#") or not nxt.strip()):
                continue
            parts[-1] = parts[-1].rstrip()[:-1]
            parts.append(nxt)
        end = lines[i][0]
        joined = " ".join(p.strip() for p in parts)
        out.append((start, end, joined, pending))
        pending = frozenset()
        i += 1
        for m in _HEREDOC.finditer(joined):          # skip the heredoc body up to its delimiter
            while i < len(lines) and lines[i][1].strip() != m.group(2):
                i += 1
            i += 1
    return out


# One piece of a shell line as shlex (posix, whitespace_split, punctuation_chars=";&|()<>") reads it: blanks, a
# comment (to the end of the line: `#` starts one even inside a word), a run of operator characters, plain
# characters, a '...' string, a "..." string (a backslash escapes only " and itself there), a backslash and the
# character after it.
_PIECE = re.compile(r"""([ \t\r\n]+)|(#[^\n]*\n?)|([;&|()<>]+)|([^ \t\r\n#;&|()<>'"\\]+)|'([^']*)'|"""
                    r'''"([^"\\]*(?:\\.[^"\\]*)*)"|\\(.)''', re.S)
_PLAIN = re.compile(r"[;&|()<>]+|[^ \t\r\n;&|()<>]+")
_DQ_ESCAPE = re.compile(r'\\([\\"])')
MAX_NESTING = 16        # substitutions nested deeper than this are left as they are (each level is one pass)


def words(text: str) -> tuple[str, ...]:
    """The words and operators of a shell line as `shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")`
    with `whitespace_split` gives them (quotes removed, a run of `;&|()<>` one token, `#` starts a comment even
    inside a word), in linear time: shlex grows each token a character at a time, which is quadratic in the
    length of a word. ValueError for an unclosed quote or a trailing backslash, as shlex."""
    if not any(c in text for c in "#'\"\\"):
        return tuple(_PLAIN.findall(text))
    out: list[str] = []
    word: list[str] | None = None           # the pieces of the word being read (None: between words)
    i = 0
    while i < len(text):
        m = _PIECE.match(text, i)
        if m is None:
            raise ValueError(f"unclosed {text[i]}")
        i, k = m.end(), m.lastindex
        if k <= 3:                          # blanks, a comment or an operator end the word
            if word is not None:
                out.append("".join(word))
                word = None
            if k == 3:
                out.append(m.group(3))
            continue
        word = word if word is not None else []
        word.append(_DQ_ESCAPE.sub(r"\1", m.group(6)) if k == 6 else m.group(k))
    if word is not None:
        out.append("".join(word))
    return tuple(out)


@functools.lru_cache(maxsize=1 << 16)
def _tokens(text: str) -> tuple[str, ...]:
    text = _ARITH.sub("__SUB__", text)
    for _ in range(MAX_NESTING):
        previous, text = text, _SUBST.sub("__SUB__", text)
        if text == previous:
            break
    text = _FD.sub("", text)
    try:
        return words(text)
    except ValueError:                              # unbalanced quotes: good enough
        return tuple(text.split())


def _simple(words: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split leading VAR=value assignments and wrapper words (if, sudo, env, exec, ...) off."""
    assigns: list[str] = []
    while words and (_ASSIGN.match(words[0]) or words[0] in _KEYWORDS):
        word = words.pop(0)
        if _ASSIGN.match(word):
            assigns.append(word)
    return tuple(words), tuple(assigns)


def split_script(lines: Sequence[tuple[int, str]], docker: bool = False) -> tuple[list[Command], list[Span]]:
    """The simple commands of a script given as (line number, text) pairs (docker: the body of a
    RUN, where comment lines inside continuations are dropped)."""
    commands, spans = _split(tuple(lines), docker)
    return list(commands), list(spans)


def _parts(lines: tuple[tuple[int, str], ...], start: int, end: int, docker: bool) -> list[tuple[int, int]]:
    """(offset in the joined text, line number) of each physical line that logical_lines joined into the
    logical line `start`..`end` (the same skips and joins)."""
    out, offset, continuing = [], 0, False
    for number, text in lines:
        if number < start or number > end:
            continue
        if continuing and docker and (text.lstrip().startswith("#") or not text.strip()):
            continue
        part = text.rstrip()[:-1] if continued(text) and number < end else text
        out.append((offset, number))
        offset += len(part.strip()) + 1
        continuing = True
    return out


def _line_of(words: Sequence[str], text: str, cursor: int, parts: list[tuple[int, int]], line: int) -> tuple[int, int]:
    """The line a command's program is on in a joined logical line (searched from `cursor`, past the words of
    the commands before), and the cursor past its own words; where the program is not found as written (a
    substitution, quotes), the line before."""
    found = None
    for k, word in enumerate(words):
        m = re.compile(rf"(?<![\w/.-]){re.escape(word)}(?![\w.-])").search(text, cursor) \
            if word and "__SUB__" not in word else None
        if m is None:
            if k == 0:
                return line, cursor
            break
        found = m.start() if k == 0 else found
        cursor = m.end()
    return next(number for offset, number in reversed(parts) if offset <= found), cursor


@functools.lru_cache(maxsize=1 << 14)
def _split(lines: tuple[tuple[int, str], ...], docker: bool) -> tuple[tuple[Command, ...], tuple[Span, ...]]:
    """The commands of a script; each command's `line` is the physical line its program is on (in a continued
    chain, not the chain's first line), `end` its logical line's last."""
    commands, spans, pipeline = [], [], 0
    for start, end, text, ignore in logical_lines(lines, skip_comments_in_continuation=docker):
        spans.append(Span(start, end, ignore))
        parts, cursor, line = (_parts(lines, start, end, docker), 0, start) if end > start else ([], 0, start)
        words: list[str] = []
        stage, toks, j = 0, [*_tokens(text), "\n"], 0
        while j < len(toks):
            tok = toks[j]
            if tok in _OPS:
                if words:
                    simple, assigns = _simple(words)
                    if simple:
                        op = tok if tok in ("&&", "||", ";", "&", "|", "|&") else ""
                        if parts:
                            line, cursor = _line_of(simple, text, cursor, parts, line)
                        commands.append(Command(simple, assigns, line, end, pipeline, stage, op, ignore))
                    words = []
                if tok in ("|", "|&"):
                    stage += 1
                elif tok not in ("(", "{"):
                    pipeline, stage = pipeline + 1, 0
            elif set(tok) <= set("<>&|") and ("<" in tok or ">" in tok):
                j += 1                              # a redirection and its target
            elif tok != "}":
                words.append(tok)
            j += 1
    return tuple(commands), tuple(spans)


def in_substitutions(lines: Sequence[tuple[int, str]], docker: bool = False) -> list[list[Command]]:
    """The pipelines inside the script's command substitutions (`$(...)`, backquotes), innermost first, each
    substitution's body split as a script of its own on the line it starts on."""
    out: list[list[Command]] = []
    for start, _, text, _ in logical_lines(lines, skip_comments_in_continuation=docker):
        text = _ARITH.sub("__SUB__", text)
        for _ in range(MAX_NESTING):
            bodies = [m.group(0) for m in _SUBST.finditer(text)]
            if not bodies:
                break
            for body in bodies:
                inner = body[2:-1] if body.startswith("$(") else body[1:-1]
                out += pipelines(split_script([(start, inner)])[0]).values()
            text = _SUBST.sub("__SUB__", text)
    return out


def all_pipelines(lines: Sequence[tuple[int, str]], docker: bool = False) -> list[list[Command]]:
    """Every pipeline of a script, those inside command substitutions included."""
    return [*pipelines(split_script(lines, docker)[0]).values(), *in_substitutions(lines, docker)]


def pipelines(commands: Iterable[Command]) -> dict[int, list[Command]]:
    out: dict[int, list[Command]] = {}
    for c in commands:
        out.setdefault(c.pipeline, []).append(c)
    return out


# ---------------------------------------------------------------------------------------------
# Package managers: one table row each
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Manager:
    name: str                       # as in messages
    programs: tuple[str, ...]
    installs: tuple[str, ...]       # subcommands that install packages
    yes: tuple[str, ...]            # flags that answer yes (anywhere in the command)
    yes_letters: str                # short-option letters that answer yes (clusters like -qy)
    pinned: str                     # regex a pinned package matches
    clean: str                      # regex on a later command that cleans the cache
    value_options: tuple[str, ...]  # options that take the next word as their value
    pin_rule: str
    yes_rule: str
    clean_rule: str
    yes_flag: str                   # what the fixer adds
    clean_command: str              # what the fixer adds


APT = Manager("apt-get", ("apt-get", "apt"), ("install",), ("--yes", "--assume-yes"),
              "y", r"=|\.deb$|/", r"^rm .*/var/lib/apt/lists",
              ("-o", "-t", "-c", "--option", "--target-release", "--config-file", "--default-release"),
              "DL3008", "DL3014", "DL3009", "-y", "rm -rf /var/lib/apt/lists/*")
YUM = Manager("yum", ("yum",), ("install", "groupinstall", "localinstall", "reinstall"), ("--assumeyes",), "y",
              r"-[0-9]|\.rpm$|/", r"^(yum clean all|rm .*/var/cache/yum)",
              ("-c", "--config", "--enablerepo", "--disablerepo", "--installroot", "--releasever", "-x", "--exclude",
               "--setopt"), "DL3033", "DL3030", "DL3032", "-y", "yum clean all")
DNF = Manager("dnf", ("dnf", "microdnf"), ("install", "reinstall"), ("--assumeyes",), "y",
              r"-[0-9]|\.rpm$|/", r"^((dnf|microdnf) clean all|rm .*/var/cache/(dnf|yum))",
              ("-c", "--config", "--enablerepo", "--disablerepo", "--installroot", "--releasever", "-x", "--exclude",
               "--setopt"), "DL3041", "DL3038", "DL3040", "-y", "dnf clean all")
ZYPPER = Manager("zypper", ("zypper",), ("install", "in"), ("--non-interactive", "--no-confirm"), "ny",
                 r"[=<>]|\.rpm$|/", r"^(zypper (clean|cc)|rm .*/var/cache/zypp)",
                 ("-r", "--repo", "--from", "-t", "--type", "--root", "-R"), "DL3037", "DL3034", "DL3036",
                 "-y", "zypper clean")
MANAGERS = (APT, YUM, DNF, ZYPPER)
PIP_VALUE_OPTIONS = ("-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
                     "--find-links", "-t", "--target", "--prefix", "--root", "--no-binary", "--only-binary",
                     "--platform", "--python-version", "--implementation", "--abi", "-e", "--editable",
                     "--trusted-host", "--cert", "--client-cert", "--progress-bar", "--upgrade-strategy", "--src",
                     "-C", "--config-settings", "--global-option", "--log", "--proxy", "--retries", "--timeout",
                     "--exists-action", "--cache-dir", "--report", "--use-feature", "--use-deprecated", "--python",
                     "--root-user-action", "--keyring-provider")


@dataclass(frozen=True)
class Install:
    """A package installation found in a command."""

    manager: Manager | None         # None: pip
    options: tuple[str, ...]
    packages: tuple[str, ...]
    command: Command


def _split_args(words: Sequence[str], value_options: Sequence[str]) -> tuple[list[str], list[str]]:
    options, operands, skip = [], [], False
    for w in words:
        if skip:
            options.append(w)
            skip = False
        elif w.startswith("-") and w != "-":
            options.append(w)
            skip = w in value_options
        else:
            operands.append(w)
    return options, operands


def _manager(program: str) -> Manager | None:
    return next((m for m in MANAGERS if program in m.programs), None)


def _pip_args(c: Command) -> list[str] | None:
    """The words after `pip` (pip, pip3, pip3.11, python -m pip), or None."""
    p = c.program
    if re.fullmatch(r"pip[0-9.]*", p):
        return list(c.words[1:])
    if re.fullmatch(r"python[0-9.]*", p) and len(c.words) > 2 and c.words[1] == "-m" and c.words[2] == "pip":
        return list(c.words[3:])
    return None


def install(c: Command) -> Install | None:
    """The package installation `c` performs, if any."""
    m = _manager(c.program)
    if m is not None:
        options, operands = _split_args(c.words[1:], m.value_options)
        if not operands or operands[0] not in m.installs:
            return None
        return Install(m, tuple(options), tuple(operands[1:]), c)
    args = _pip_args(c)
    if args is None:
        return None
    options, operands = _split_args(args, PIP_VALUE_OPTIONS)
    if not operands or operands[0] != "install":
        return None
    return Install(None, tuple(options), tuple(operands[1:]), c)


def says_yes(i: Install) -> bool:
    """-y, --yes, a cluster like -qy, or apt's -o APT::Get::Assume-Yes=true."""
    m = i.manager
    return any(o in m.yes or (re.fullmatch(r"-[A-Za-z]+", o) and set(o[1:]) & set(m.yes_letters))
               or re.search(r"assume-yes=(true|1)$", o, re.I) for o in i.options)


def no_recommends(i: Install) -> bool:
    return "--no-install-recommends" in i.options or any(
        re.search(r"APT::Install-Recommends=(false|0)", o, re.I) for o in i.options)


def unpinned(i: Install) -> list[str]:
    if i.manager is None:
        return [p for p in i.packages if not re.search(r"==|>=|<=|~=|!=|<|>|@|/|\.whl$|\.tar\.gz$|\.zip$|^\.$", p)
                and not p.startswith("$") and p != "__SUB__"]
    return [p for p in i.packages if not re.search(i.manager.pinned, p) and not p.startswith("$") and p != "__SUB__"]


def pip_no_cache(i: Install, exported: bool = False) -> bool:
    return exported or "--no-cache-dir" in i.options or any(
        a.startswith("PIP_NO_CACHE_DIR=") for a in i.command.assigns) or "--no-cache-dir" in i.command.words


def is_clean(c: Command, m: Manager) -> bool:
    return bool(re.search(m.clean, " ".join(c.words)))


INTERPRETER = re.compile(r"python[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node(js)?|php[0-9.]*|lua[0-9.]*|Rscript")


def runs_stdin(c: Command) -> bool:
    """A shell or an interpreter that runs what it reads: `sh`, `bash -s`, `python3 -`, `perl`."""
    return c.program in SHELLS or bool(INTERPRETER.fullmatch(c.program)) and (
        len(c.words) == 1 or "-" in c.words[1:] or all(w.startswith("-") for w in c.words[1:]))


def is_pipe_to_shell(chain: Sequence[Command]) -> Command | None:
    """The downloading command of `curl|wget ... | sh` (or `| python3 -`, `| perl`), if the pipeline is one."""
    found, reader = None, False
    for c in reversed(chain):                       # (one pass: a pipeline may be long)
        if c.program in ("curl", "wget") and reader:
            found = c
        reader = reader or runs_stdin(c)
    return found


def option_value(words: Sequence[str], short: str, long: str) -> str | None:
    """The value of option `short` (also clustered: -qO-, -fsSLo FILE) or `long` (--x V, --x=V)."""
    for k, w in enumerate(words):
        following = words[k + 1] if k + 1 < len(words) else None
        if long and w == long:
            return following
        if long and w.startswith(long + "="):
            return w.split("=", 1)[1]
        m = re.fullmatch(rf"-[A-Za-z]*{short[1]}(.*)", w) if short and not w.startswith("--") else None
        if m:
            return m.group(1) or following
    return None


def download(c: Command) -> str | None:
    """The archive file `wget`/`curl` writes, or None (no file, or not an archive)."""
    urls = [w for w in c.words[1:] if "://" in w]
    if not urls:
        return None
    name = posixpath.basename(urls[-1].split("?")[0].rstrip("/"))
    if c.program == "wget":
        out = option_value(c.words, "-O", "--output-document")
        if out is None:
            directory = option_value(c.words, "-P", "--directory-prefix")
            out = posixpath.join(directory, name) if directory else name
    elif c.program == "curl":
        out = option_value(c.words, "-o", "--output")
        if out is None and any(w in ("-O", "--remote-name") or re.fullmatch(r"-[A-Za-z]*O[A-Za-z]*", w)
                               for w in c.words):
            directory = option_value(c.words, "", "--output-dir")
            out = posixpath.join(directory, name) if directory else name
    else:
        return None
    if not out or out == "-" or not ARCHIVE.search(out):
        return None
    return out


LONGEST_PATH = 1024     # a folder path longer than this is unknown: chained `cd x`/`WORKDIR x` would grow without end


def absolute(path: str, cwd: str | None) -> str | None:
    """`path` made absolute against `cwd` (None: unknown, or longer than LONGEST_PATH), normalised."""
    if path.startswith("/"):
        return posixpath.normpath(path) if len(path) <= LONGEST_PATH else None
    return posixpath.normpath(posixpath.join(cwd, path)) if cwd and len(cwd) + 1 + len(path) <= LONGEST_PATH else None


def _literal(word: str) -> bool:
    return not re.search(r"[$`*?~]|__SUB__", word)


def tracked(commands: Sequence[Command], start: str | None = None) -> list[tuple[Command, str | None]]:
    """Each command with the directory it runs in (None: unknown), following `cd`/`pushd` from
    `start` (a RUN's WORKDIR; None when inherited from an unknown image)."""
    out, cwd = [], start
    for c in commands:
        out.append((c, cwd))
        if c.program in ("cd", "pushd"):
            args = [w for w in c.words[1:] if not w.startswith("-")]
            cwd = absolute(args[0], cwd) if len(args) == 1 and _literal(args[0]) else None
        elif c.program == "popd":
            cwd = None
    return out


def downloaded(c: Command, cwd: str | None) -> str | None:
    """The archive `c` downloads, made absolute where the directory is known."""
    path = download(c)
    return (absolute(path, cwd) or path) if path else None


def _target(word: str, cwd: str | None) -> str:
    """An `rm` argument as `removes` compares it: absolute where the directory is known, no trailing slash."""
    return (absolute(word, cwd) or word).rstrip("/") or "/"


def _deletes(target: str, path: str) -> bool:
    """Whether deleting `target` (see _target) deletes `path`: exactly, by a glob, or with a parent directory;
    paths whose directory is unknown are compared by name."""
    if target == path or fnmatch.fnmatchcase(path, target) or path.startswith(target + "/"):
        return True
    if not path.startswith("/") or not target.startswith("/"):
        name = posixpath.basename(target)
        return name == posixpath.basename(path) or fnmatch.fnmatchcase(posixpath.basename(path), name)
    return False


def removes(c: Command, path: str, cwd: str | None = None) -> bool:
    """Whether `rm` command `c`, run in `cwd`, deletes `path` (exactly, by a glob, or with a parent
    directory). Paths whose directory is unknown are compared by name."""
    return c.program == "rm" and any(_deletes(_target(w, cwd), path) for w in c.words[1:] if not w.startswith("-"))


def deleted(path: str, pairs: Iterable[tuple[Command, str | None]]) -> bool:
    return any(removes(c, path, cwd) for c, cwd in pairs)


_GLOB = re.compile(r"[*?[]")


class Removals:
    """The `rm` commands of a script (or of a Dockerfile stage's RUNs, in order), indexed by what they delete: the
    first one after a position that deletes a path (as `removes` says) is found by walking the path's folders down a
    tree of the targets and looking its name up, not by asking every later `rm` again. (A target without *, ? or [
    deletes exactly itself and what is below it, or, where one side's folder is unknown, what has its name; globs
    are asked, once per path.)"""

    def __init__(self, pairs: Sequence[tuple[Command, str | None]]):
        self.tree: dict = {}                                # folder name → subtree; None → positions of targets there
        self.names: dict[tuple[bool, str], list[int]] = {}  # (absolute target?, its name) → positions
        self.globs: dict[str, list[int]] = {}
        self._globbed: dict[str, list[list[int]]] = {}
        for k, (c, cwd) in enumerate(pairs):
            for w in (c.words[1:] if c.program == "rm" else ()):
                if w.startswith("-"):
                    continue
                t = _target(w, cwd)
                if _GLOB.search(t):
                    self.globs.setdefault(t, []).append(k)
                    continue
                node = self.tree
                for part in t.split("/"):
                    node = node.setdefault(part, {})
                node.setdefault(None, []).append(k)
                self.names.setdefault((t.startswith("/"), posixpath.basename(t)), []).append(k)

    def first_after(self, path: str, position: int) -> int | None:
        """The first position after `position` whose `rm` deletes `path`, or None."""
        found, node = [], self.tree
        for part in path.split("/"):                        # the path itself and the folders above it
            node = node.get(part)
            if node is None:
                break
            found.append(node.get(None, []))
        name = posixpath.basename(path)
        found += [self.names.get((False, name), []), self.names.get((True, name), []) if not path.startswith("/") else []]
        if path not in self._globbed:
            self._globbed[path] = [ks for t, ks in self.globs.items() if _deletes(t, path)]
        after = [ks[i] for ks in found + self._globbed[path] if (i := bisect.bisect_right(ks, position)) < len(ks)]
        return min(after, default=None)


# ---------------------------------------------------------------------------------------------
# Downloads without verification, cleanup, toolchains, authentication switched off
# ---------------------------------------------------------------------------------------------

INSTALLER = re.compile(r"\.(sh|run|bin|py|pl|jar|appimage)$", re.I)
KEY = re.compile(r"\.(asc|gpg|key|pub|pem|crt)$|gpg-?key|/keys?/", re.I)
_CHECKSUMS = ("sha256sum", "sha512sum", "sha384sum", "sha224sum", "sha1sum", "b2sum", "shasum", "cksum")


def fetched_url(c: Command) -> str | None:
    """The URL of an archive, installer or key that curl/wget fetch (to a file or a pipe)."""
    if c.program not in ("curl", "wget"):
        return None
    for url in (w for w in c.words[1:] if re.match(r"(https?|ftp)://", w)):
        path = url.split("?")[0].split("#")[0].rstrip("/")
        name = posixpath.basename(path)
        if ARCHIVE.search(name) or INSTALLER.search(name) or KEY.search(path.split("://", 1)[-1]):
            return url
    return None


def verifies(c: Command) -> bool:
    """A checksum or signature check: `sha256sum -c`, `shasum -a 256 -c`, `gpg --verify`, `gpgv`,
    `cosign verify-blob`, `minisign -V`."""
    words = c.words[1:]
    if c.program in _CHECKSUMS:
        return any(w in ("-c", "--check") or re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", w) for w in words)
    if c.program in ("gpg", "gpg2"):
        return "--verify" in words
    return c.program == "gpgv" or (c.program == "cosign" and "verify-blob" in words) or \
        (c.program == "minisign" and "-V" in words)


CACHE_PATHS = re.compile(r"^(/tmp|/var/tmp)(/\*?)?$|^/var/lib/apt/lists|^/var/cache/|^(/root|~|\$HOME|\$\{HOME\})/\.cache")


def cleans(c: Command) -> str | None:
    """What a cleanup command cleans (`rm -rf /tmp/*`, `apt-get clean`, `pip cache purge`, ...), or None."""
    words = c.words
    if c.program == "rm":
        targets = [w for w in words[1:] if not w.startswith("-")]
        return " ".join(targets) if targets and all(CACHE_PATHS.search(t) for t in targets) else None
    if c.program in ("apt-get", "apt") and "clean" in words[1:2] + words[2:3]:
        return f"{c.program} clean"
    if c.program in ("yum", "dnf", "microdnf", "zypper", "conda", "mamba", "npm") and \
            any(w in ("clean", "cc") for w in words[1:3]):
        return " ".join(words[:3])
    if re.fullmatch(r"pip[0-9.]*", c.program) and words[1:3] in (("cache", "purge"), ("cache", "remove")):
        return " ".join(words[:3])
    return None


TOOLCHAIN = re.compile(r"^(build-essential|gcc|g\+\+|gcc-c\+\+|gfortran|gcc-gfortran|clang|llvm|make|cmake|ninja-build|"
                       r"autoconf|automake|libtool|pkg-config|pkgconf|.+-dev|.+-devel)(-[0-9][\w.]*)?$")
BUILDS = re.compile(r"^(make|cmake|ninja|gcc|g\+\+|cc|c\+\+|gfortran|nvcc|meson|configure|scons)$")


def toolchain(i: Install) -> list[str]:
    """Compilers, build tools and headers among the packages an installation installs."""
    if i.manager is None:
        return []
    return [p for p in i.packages if TOOLCHAIN.match(re.split(r"[=<>]", p)[0].split(":")[0])]


def builds(c: Command) -> bool:
    return bool(BUILDS.match(c.program)) or (c.program.startswith("python") and "setup.py" in c.words
                                             and any(w in ("build", "install", "build_ext") for w in c.words))


def uninstalls(c: Command) -> bool:
    m = _manager(c.program)
    return m is not None and any(w in ("remove", "purge", "autoremove", "erase", "rm") for w in c.words[1:3])


_INSECURE = re.compile(r"^(--allow-unauthenticated|--no-gpg-checks?|--nogpgcheck|--no-gpgcheck|--force-yes|"
                       r"--allow-insecure-repositories|--no-check-certificate|--insecure|--trusted-host(=.*)?)$|"
                       r"AllowUnauthenticated=(true|1|yes)|AllowInsecureRepositories=(true|1|yes)|"
                       r"\[trusted=yes\]|gpgcheck\s*=\s*0|sslverify\s*=\s*(0|false)", re.I)


def insecure(c: Command) -> str | None:
    """A switch that turns package signature or TLS checks off, or None."""
    for w in c.words[1:]:
        if _INSECURE.search(w) or (c.program == "curl" and re.fullmatch(r"-[A-Za-z]*k[A-Za-z]*", w)):
            return w if len(w) < 60 else w[:57] + "..."
    return None


def substituted(c: Command) -> str | None:
    """Where a command substitution (`$(...)`, backticks) decides what runs, what is installed or what is
    downloaded — the shape of an injected value (a build argument or a site value spliced into a script).
    None when it only computes an argument (`make -j$(nproc)`)."""
    if c.words and "__SUB__" in c.words[0]:
        return "the program to run"
    i = install(c)
    if i is not None and any("__SUB__" in p for p in i.packages):
        return "a package to install"
    if c.program in ("wget", "curl") and any("__SUB__" in w and "://" in w for w in c.words[1:]):
        return "a download URL"
    return None
