"""The lint fuzzer: hostile Dockerfiles and definitions (the lint fixtures mutated: random bytes, long words and
lines, deep nesting, escape codes, payloads, special files, links) through `gen-recipe lint` and `lint --fix` on
copies in a temporary folder. Every case ends with exit 0, 1 or 2 (2: one line on stderr), in bounded time,
with no raw escape code on stdout or stderr, no payload run and nothing outside the folder written (a sentinel
folder beside it, which links point into, is hashed before and after). hadolint and ShellCheck are replaced by
a stub in most cases (our own parsing, checks, fixes and output are what is fuzzed); one case in 40 runs them
for real, with a 3 s budget. 300 cases here, 20,000 with --fuzz-long (README, Hostile input).

A second fuzzer (test_hostile_build_arguments) writes definitions whose %arguments values name themselves and
one another: the build-argument templating stays bounded (8 MiB) or refuses in one line, never a traceback.
150 cases here, 20,000 with --fuzz-long."""

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

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.lint import definition, shell, tools
from generator.lint.model import MAX_INPUT, LintError, Target

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


# ---------------------------------------------------------------------------------------------
# Build arguments: %arguments values that name themselves and one another
# ---------------------------------------------------------------------------------------------

TEMPLATING_CASES = 20_000 if "--fuzz-long" in sys.argv else 150
ARG_NAMES = ["A", "B", "X", "lib_2", "N" * 300, "é"]         # é: no build argument to Apptainer (its \w is ASCII)
REFERENCES = ["{{ %s }}", "{{%s}}", "{{\t%s  }}", "{{ {{ %s }} }}", "# {{ %s }}", "{{ %s }", "#!{{ %s }}"]
ERROR = re.compile(r"lint: x\.def:\d+: \{\{ [\w.é]+ \}\}[: ][^\n]*")


@st.composite
def templated(draw) -> tuple[str, list[str], bool]:
    """A definition of one or two stages whose %arguments values name themselves and one another (directly, in
    cycles, nested, spaced, commented, unknown names), some repeated thousands of times or huge, used in From:,
    %post and %files; --build-arg values like them; whether to run it through `gen-recipe lint` with the real tools."""
    def value() -> str:
        pieces = []
        for _ in range(draw(st.integers(0, 5))):
            kind = draw(st.sampled_from([0, 1, 1, 2, 2, 3, 4]))
            name = draw(st.sampled_from([*ARG_NAMES, "UNKNOWN"]))
            if kind == 0:
                pieces.append(draw(st.text(alphabet="ab/-_.:$ ={}#", max_size=12)))
            elif kind == 1:
                pieces.append(draw(st.sampled_from(REFERENCES)) % name)
            elif kind == 2:                                 # a blow-up: one reference, many times
                pieces.append(draw(st.sampled_from(REFERENCES)) % name * draw(st.integers(1, 5000)))
            elif kind == 3:                                 # a huge default
                pieces.append("x" * draw(st.integers(0, 60_000)))
            else:
                pieces.append(draw(st.sampled_from(["{{", "}}", "{{ }}", "{{ 1x }}", "{{{ A }}}", "\\"])))
        return "".join(pieces)

    def stage() -> str:
        names = draw(st.lists(st.sampled_from(ARG_NAMES), max_size=5))
        return ("Bootstrap: docker\nFrom: debian:{{ X }}\n%arguments\n" + "".join(f"    {n}={value()}\n" for n in names)
                + "%post\n" + "".join(f"    echo {value()}\n" for _ in range(draw(st.integers(0, 3))))
                + "%files\n    {{ A }} /opt\n")

    text = stage() + (stage() if draw(st.booleans()) else "")
    given = [f"{draw(st.sampled_from(ARG_NAMES))}={value()}" for _ in range(draw(st.integers(0, 2)))]
    return text, given, draw(st.integers(0, 39)) == 0


def memory(field: str) -> int:
    """VmRSS (now) or VmHWM (the peak since clear_refs was last written) of this process, in MiB."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s*(\d+) kB", status, re.M).group(1)) >> 10


@settings(max_examples=TEMPLATING_CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=templated())
def test_hostile_build_arguments(case, tmp_path):
    """Every case: the definition as Apptainer would build it is at most 8 MiB, or one line (file, line, argument)
    says why not; no traceback; bounded time and memory (the case's peak resident memory, its parsing caches emptied
    first, at most 512 MiB above what the process held before it). 150 cases here (through `gen-recipe lint` with
    the real tools for one in 40), 20,000 with --fuzz-long."""
    text, given, real_tools = case
    shell._split.cache_clear()                       # what earlier cases left in them is not this case's memory
    shell._tokens.cache_clear()
    Path("/proc/self/clear_refs").write_text("5")    # the peak (VmHWM) starts again from now
    before = memory("VmRSS")
    start = time.monotonic()
    target = Target().with_build_args(given)
    try:
        out, _ = definition.templated(text, definition.parse(text), target.build_args, "x.def")
        assert len(out) <= MAX_INPUT
        definition.check(text, target, "x.def")
        event("accepted")
    except LintError as exc:                                      # before: 22.9 GB, or a MemoryError traceback
        assert ERROR.fullmatch(str(exc)) and len(str(exc)) < 1000, str(exc)[:500]
        event("refused: larger than 8 MiB" if "larger than" in str(exc) else "refused: names itself")
    if real_tools:
        path = tmp_path / "x.def"
        path.write_text(text, encoding="utf-8")
        with mock.patch.dict(os.environ, {tools.TIMEOUT_ENV: "3"}):
            code, _, err, _ = run("lint", *(f"--build-arg={g}" for g in given), str(path))
        assert code in (0, 1, 2) and (code != 2 or err.count("\n") == 1), (code, err[:500])
        assert not RAW.search(err), err[:300]
    assert time.monotonic() - start < SLOW
    assert memory("VmHWM") - before < 512, (memory("VmHWM"), before)
