"""Every download in a generated recipe is verified before it is used.

The blocks write each download together with the check of its sha256 from generator/checksums.toml,
right after it:

    Dockerfile:  wget ... URL && \\
                 echo "<sha256>  FILE" > FILE.sha256 && sha256sum -c FILE.sha256 && rm -f FILE.sha256 && \\
    %post:       wget ... URL
                 echo "<sha256>  FILE" | sha256sum -c -

(no pipe in RUN: the generated Dockerfiles run /bin/sh without pipefail). Our blocks build the step
with `download(url, directory=...)` or `download(url, outfile=...)`; hpccm's building blocks
(generic_autotools, openmpi, ucx, ...) write their `wget -P DIR URL` inside hpccm, so
`checked_block(block)` (or the class `checked_downloads(cls)`) gives the wget lines of the block's
shell primitives their check where our code creates the block, before anything is rendered.

A download whose upstream publishes no checksum (the table's [unpublished], with the reason) gets the
reason on a comment line and an ignore of the unchecked-download rule (UNCHECKED_DOWNLOAD_RULE): lines
of %post above the download, or in a Dockerfile lines above its RUN (`clean.Note`). A download with
neither (a version of your own site that the table does not know) stops the generation with one line
naming the file and the table (ChecksumError, exit 2): nothing is downloaded unverified.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

import hpccm.templates.wget
from hpccm.building_blocks.base import bb_instructions
from hpccm.primitives.shell import shell

from generator.lint.rules import UNVERIFIED
from generator.recipe import checksums
from generator.recipe.blocks.clean import DEF_PRAGMA, Note, docker, items

UNCHECKED_DOWNLOAD_RULE = UNVERIFIED.id     # the lint rule that reports a download without its check
TABLE = "generator/checksums.toml"      # as the generated comments name it

_WGET = re.compile(r"\bwget\s+(?P<args>[^&;|\n]*?)(?P<url>https?://\S+?)(?=\s*(?:&&|;|\||\\?$))")


def checked(command: str, url: str, path: str, end: int | None = None) -> list[str]:
    """Shell commands: `command`, which downloads `url` to `path`, then the check of its sha256 (in a
    Dockerfile right after the URL, which ends at `end`), or the note why there is none before it."""
    sha = checksums.for_url(url)
    if sha and docker():
        rest = command[end:].strip() if end else ""
        check = f'echo "{sha}  {path}" > {path}.sha256 && sha256sum -c {path}.sha256 && rm -f {path}.sha256'
        return [command[:end], check + (f" {rest}" if rest else "")]
    if sha:
        return [command, f'echo "{sha}  {path}" | sha256sum -c -']
    reason = checksums.unpublished(url)
    if not reason:
        raise checksums.ChecksumError(
            f"no sha256 for {posixpath.basename(url)} ({url}) in {TABLE}: a version the site file selects (mpi.version, "
            "the fabric's and software's versions) is one the table lacks; pin a version it has, or add the sha256 with its "
            "source (the project's published checksum, or Spack's package.py)")
    if docker():
        return [Note(f"# {reason} ({TABLE})", ignore=UNCHECKED_DOWNLOAD_RULE), command]
    return [f"# {reason} ({TABLE})", DEF_PRAGMA.format(rules=UNCHECKED_DOWNLOAD_RULE), command]


def download(url: str, *, directory: str = "", outfile: str = "") -> list[str]:
    """Shell commands that fetch `url` to `outfile` or into `directory` (with hpccm's wget template
    command), checked (see `checked`)."""
    if outfile:
        return checked(f"wget -q -O {outfile} {url}", url, outfile)
    command = hpccm.templates.wget().download_step(url=url, directory=directory)
    return checked(command, url, posixpath.join(directory, posixpath.basename(url)))


def _file(args: str, url: str) -> str:
    out = re.search(r"(?:^|\s)-O\s+(\S+)", args)
    if out:
        return out.group(1)
    folder = re.search(r"(?:^|\s)-P\s+(\S+)", args)
    return posixpath.join(folder.group(1) if folder else ".", posixpath.basename(url))


def checked_commands(commands: Sequence[str]) -> list[str]:
    """A shell primitive's commands with each wget line checked. hpccm joins a download and its unpacking
    into one command, with the separator its shell primitive puts between commands: such a command is
    split there, which renders the same."""
    join = " && \\\n    " if docker() else "\n    "
    out: list[str] = []
    for command in commands:
        lines = command.split(join) if command else []
        found = [None if line.lstrip().startswith("#") else _WGET.search(line) for line in lines]
        if not any(found):
            out.append(command)
            continue
        for line, m in zip(lines, found):
            out += checked(line, m.group("url"), _file(m.group("args"), m.group("url")), m.end()) if m else [line]
    return out


def checked_block(block: bb_instructions) -> bb_instructions:
    """hpccm building block `block` with the downloads of all its shell primitives checked, in place."""
    for item in items(block):
        if isinstance(item, shell):
            item.commands = checked_commands(item.commands)
        elif isinstance(item, bb_instructions):
            checked_block(item)
    return block


def checked_downloads(cls: type) -> type:
    """A subclass of hpccm block `cls` whose instances have their downloads checked (`checked_block`)."""

    class Checked(cls):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            checked_block(self)

    Checked.__name__ = Checked.__qualname__ = cls.__name__
    Checked.__doc__ = cls.__doc__
    return Checked
