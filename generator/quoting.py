"""Quoting at the sinks: one helper per target, for every value that reaches a shell script or a
comment line. Site values are validated at load (generator/model/site.py); these helpers make the output
safe whatever they hold.

- `word`: a shell word (`$NAME`/`${NAME}` stay host-variable references, everything else literal);
- `line`: argv as one shell command line; `name`: an environment variable name (refused otherwise);
- `comment`: one `#` comment line (or scheduler directive); `heredoc_marker`: a here-document delimiter the text cannot end early.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence

from generator.errors import UNSAFE_FOR_TERMINAL, UsageError

_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def word(s: str) -> str:
    """A shell word for `s`: `$NAME`/`${NAME}` stay host-variable references (written `${NAME:-}`
    so that `set -u` accepts unset ones), everything else is literal."""
    if _SAFE.fullmatch(s):
        return s
    if "$" not in s:
        return shlex.quote(s)
    parts, pos = [], 0
    for m in _REF.finditer(s):
        parts.append(dq(s[pos:m.start()]) + "${" + (m.group(1) or m.group(2)) + ":-}")
        pos = m.end()
    parts.append(dq(s[pos:]))
    return '"' + "".join(parts) + '"'


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def name(s: str) -> str:
    """An environment variable name as a shell word: names are never quoted, so anything else is refused."""
    if not _NAME.fullmatch(s):
        raise UsageError(f"{ascii(s)} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return s


def comment(text: str, mark: str = "# ") -> str:
    """`text` as one shell comment line starting with `mark` ("#SBATCH " for a scheduler directive), whatever
    it holds: line breaks, control, escape and bidirectional characters become a space, so nothing ends
    the line early or drives the terminal that shows the script."""
    return mark + re.sub(f"(?:{UNSAFE_FOR_TERMINAL.pattern}|[\ud800-\udfff])+", " ", text)


def heredoc_marker(text: str) -> str:
    """A here-document delimiter that no line of `text` equals: EOF, else EOF_<hash of text>."""
    lines = set(text.splitlines())
    if "EOF" not in lines:
        return "EOF"
    marker = "EOF_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    while marker in lines:          # pragma: no cover - a text that names its own hash
        marker += "_"
    return marker


def dq(s: str) -> str:
    """`s` as the inside of a double-quoted shell word: \\ " ` $ escaped."""
    return re.sub(r'([\\"`$])', r"\\\1", s)


def line(argv: Sequence[str], indent: str = "    ") -> str:
    """argv as one shell command, wrapped at about 100 columns with backslashes (before --options only)."""
    words = [word(a) for a in argv]
    out, cur = [], words[0]
    for w in words[1:]:
        if len(cur) + 1 + len(w) > 100 and w.startswith("--") and cur.strip():
            out.append(cur + " \\")
            cur = indent + w
        else:
            cur += " " + w
    return "\n".join([*out, cur])
