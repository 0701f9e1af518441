"""Every download in a generated recipe is verified before it is used.

hpccm's building blocks and ours fetch with `wget -P DIR URL` or `wget -O FILE URL`; `verified(text,
fmt)` rewrites the rendered recipe once, in one place, so that each such download is followed by a
check of its sha256 from generator/checksums.toml:

    Dockerfile:  wget ... URL && \\
                 echo "<sha256>  FILE" > FILE.sha256 && sha256sum -c FILE.sha256 && rm -f FILE.sha256 && \\
    %post:       wget ... URL
                 echo "<sha256>  FILE" | sha256sum -c -

(no pipe in RUN: the generated Dockerfiles run /bin/sh without pipefail). A download whose upstream
publishes no checksum (the table's [unpublished], with the reason) gets the reason on a comment line
and a GR004 ignore above it. A download with neither (a version of your own site that the table does not
know) is left unverified with a comment that says so, and `gen-recipe lint` reports it (GR004); the
shipped sites have none (tests/lint/test_checksums.py).
"""

from __future__ import annotations

import posixpath
import re

from generator.recipe import checksums

_WGET = re.compile(r"\bwget\s+(?P<args>[^&;|\n]*?)(?P<url>https?://\S+?)(?=\s*(?:&&|;|\||\\?$))")


def _file(args: str, url: str) -> str:
    out = re.search(r"(?:^|\s)-O\s+(\S+)", args)
    if out:
        return out.group(1)
    folder = re.search(r"(?:^|\s)-P\s+(\S+)", args)
    return posixpath.join(folder.group(1) if folder else ".", posixpath.basename(url))


def _docker_check(sha: str, path: str) -> str:
    return f'echo "{sha}  {path}" > {path}.sha256 && sha256sum -c {path}.sha256 && rm -f {path}.sha256'


def _pragma_docker(lines: list[str], run: int, reason: str) -> int:
    """Add GR004 to the hadolint ignore above the RUN at `run` (the reason above that); returns where
    the RUN line is now."""
    above = lines[run - 1] if run else ""
    note = f"# {reason} (generator/checksums.toml)"
    if above.startswith("# hadolint ignore=") and "GR004" in above:
        if note not in lines[max(0, run - 6):run]:
            lines.insert(run - 1, note)
            return run + 1
        return run
    if above.startswith("# hadolint ignore="):
        lines[run - 1] = above + ",GR004"
        lines.insert(run - 1, note)
        return run + 1
    lines[run:run] = [note, "# hadolint ignore=GR004"]
    return run + 2


def verified(text: str, fmt: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    run = 0                                   # index in `out` of the current RUN line (Dockerfile)
    for line in lines:
        if fmt == "docker" and line.startswith("RUN "):
            run = len(out)
        m = _WGET.search(line)
        if not m or line.lstrip().startswith("#"):
            out.append(line)
            continue
        url, path = m.group("url"), _file(m.group("args"), m.group("url"))
        sha = checksums.for_url(url)
        reason = None if sha else checksums.unpublished(url)
        indent = re.match(r"\s*", line).group()
        if not sha and not reason:
            note = f"# no sha256 for {posixpath.basename(url)} in generator/checksums.toml: add it with its source"
            if fmt == "docker":
                at = run - 1 if run and out[run - 1].startswith("# hadolint ignore=") else run
                out.insert(at, note)            # above the RUN and its pragma, which must stay next to it
                run += 1
                out.append(line)
            else:
                out += [indent + note, line]
            continue
        if fmt == "docker":
            if reason:
                out.append(line)
                run = _pragma_docker(out, run, reason)
                continue
            head, tail = line[:m.end()], line[m.end():]
            cont = tail.strip()
            out.append(f"{head} && \\")
            out.append(f"    {_docker_check(sha, path)}" + (f" {cont}" if cont else ""))
        else:
            if reason:
                out += [f"{indent}# {reason} (generator/checksums.toml)", f"{indent}# gen-recipe: ignore=GR004", line]
                continue
            out += [line, f'{indent}echo "{sha}  {path}" | sha256sum -c -']
    return "\n".join(out)
