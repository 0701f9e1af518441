"""The lint fuzzer: hostile Dockerfiles and definitions (the lint fixtures mutated: random bytes, long words and
lines, deep nesting, escape codes, payloads, special files, links) through `gen-recipe lint` and `lint --fix` on
copies in a temporary folder. Every case ends with exit 0, 1 or 2 (2: one line on stderr), in bounded time,
with no raw escape code on stdout or stderr, no payload run and nothing outside the folder written (a sentinel
folder beside it, which links point into, is hashed before and after). hadolint and ShellCheck are replaced by
a stub in most cases (our own parsing, checks, fixes and output are what is fuzzed); one case in 40 runs them
for real, with a 3 s budget. 300 cases here, 20,000 with --fuzz-long (README, Hostile input)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import sys
import time
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.lint import tools

from .helpers import CORPUS

CASES = 20_000 if "--fuzz-long" in sys.argv else 300
TEXTS = [(p.name, p.read_bytes()) for p in CORPUS]
MARKER = Path("/tmp/gen-recipe-fuzz-lint")
PAYLOADS = [f"$(touch {MARKER})", f"`touch {MARKER}`", "; touch x #", "\n", "#", "\x1b[31m", "\x1b]0;title\x07",
            "\u202e", "\u2028", "\r", "\x00", "../../", "/etc/passwd", "'", '"', "\\", "<<EOF", "%post", "FROM",
            "RUN ", "\ufeff", "&&", "|", "(", ")", "{{ x }}"]
# what may never reach the terminal raw (newline ends lines: allowed)
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SLOW = 120          # seconds: far above any case (the real tools get a 3 s budget each)


def nested(depth: int, kind: int) -> str:
    left, right = [("$(echo ", ")"), ('"$(echo ', ')"'), ("`echo ", "`"), ("(", ")"), ("'\"", "\"'")][kind]
    return left * depth + "x" + right * depth


@st.composite
def contents(draw) -> bytes:
    """A fixture with 1-4 mutations."""
    name, data = TEXTS[draw(st.integers(0, len(TEXTS) - 1))]
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.integers(0, 7))
        if kind == 0:
            piece = draw(st.binary(max_size=20))
        elif kind == 1:
            piece = draw(st.sampled_from(PAYLOADS)).encode("utf-8", "surrogatepass")
        elif kind == 2:
            piece = draw(st.sampled_from(["a", "-", "x=", "\\", "$", "/"])).encode() * draw(st.integers(1, 100_000))
        elif kind == 3:
            piece = nested(draw(st.integers(1, 3000)), draw(st.integers(0, 4))).encode()
        elif kind == 4:
            piece = draw(st.text(max_size=30)).encode("utf-8", "surrogatepass")
        elif kind == 5:
            piece = b"RUN apt-get install " + b"\\\n x" * draw(st.integers(1, 3000)) + b"\n"
        elif kind == 6:                         # cut or duplicate a part
            end = draw(st.integers(at, len(data)))
            data, piece = data[:at] + data[end:], data[at:end] * draw(st.integers(0, 3))
        else:
            piece = b"\r\n"
        data = data[:at] + piece + data[at:]
    return data


NAMES = ["Dockerfile", "x.def", "Singularity", "notes.txt", "Dockerfile.\x1b[31mred", "a\u202eb.def", "Containerfile",
         "-rf.def", "Apptainer.x\ny"]
SPECIAL = ["fifo", "devzero", "dir", "link-out", "hardlink-out", "dangling", "dir-with-fifo", "link-dir-out"]


@st.composite
def cases(draw):
    special = draw(st.sampled_from(SPECIAL)) if draw(st.integers(0, 9)) == 0 else ""
    return draw(st.sampled_from(NAMES)), draw(contents()), special, draw(st.integers(0, 39)) == 0, \
        draw(st.sampled_from([(), ("--fix",), ("--unsafe-fixes",), ("--fix", "--no-backup"), ("--format", "json"),
                              ("--fix", "--format", "json")]))


def run(*argv: str) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


def tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for root, dirs, names in sorted(os.walk(folder)):
        for name in sorted(dirs + names):
            p = Path(root) / name
            st_ = p.lstat()
            h.update(f"{p}:{st_.st_mode}:{st_.st_size}:{st_.st_nlink}".encode())
            if p.is_file() and not p.is_symlink():
                h.update(p.read_bytes())
    return h.hexdigest()


def make_input(work: Path, sentinel: Path, name: str, data: bytes, special: str) -> Path:
    path = work / name
    if special == "fifo":
        os.mkfifo(path)
    elif special == "devzero":
        return Path("/dev/zero")
    elif special == "dir":
        (work / "sub").mkdir()
        (work / "sub" / "Dockerfile").write_bytes(data)
        return work / "sub"
    elif special == "dir-with-fifo":
        os.mkfifo(work / "Dockerfile")
        (work / "x.def").write_bytes(data)
        return work
    elif special == "link-out":
        path.symlink_to(sentinel / "Dockerfile")
    elif special == "hardlink-out":
        os.link(sentinel / "x.def", path)
    elif special == "dangling":
        path.symlink_to(work / "missing")
    elif special == "link-dir-out":             # directory mode does not follow a link out
        (work / "in").symlink_to(sentinel)
        path.write_bytes(data)
        return work
    else:
        path.write_bytes(data)
    return path


def no_tools(items, jobs=None):
    return [[] for _ in items]


@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_hostile_lint_inputs(case, tmp_path):
    name, data, special, real_tools, options = case
    work, sentinel = tmp_path / "work", tmp_path / "sentinel"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    if not sentinel.exists():
        sentinel.mkdir()
        (sentinel / "Dockerfile").write_text("FROM debian:12\nRUN apt install curl\n")
        (sentinel / "x.def").write_text("Bootstrap: docker\nFrom: debian:12\n%post\n    apt install curl\n")
    path = make_input(work, sentinel, name, data, special)
    before = tree_hash(sentinel)
    stub = contextlib.nullcontext() if real_tools else contextlib.ExitStack()
    if not real_tools:
        stub.enter_context(mock.patch.object(tools, "hadolint_many", no_tools))
        stub.enter_context(mock.patch.object(tools, "shellcheck_many", no_tools))
    with stub, mock.patch.dict(os.environ, {tools.TIMEOUT_ENV: "3"}):
        code, out, err, took = run("lint", *options, str(path))
    assert code in (0, 1, 2), (code, err[:300])
    lines = err.splitlines()
    assert all(line.startswith("gen-recipe: lint: ") for line in lines) and (code != 2 or lines), err[:500]
    assert not RAW.search(out) and not RAW.search(err), (out[:300], err[:300])
    assert took < SLOW, took
    assert not MARKER.exists()
    assert tree_hash(sentinel) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sentinel", "work"]
