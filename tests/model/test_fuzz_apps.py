"""The app-file and Python-recipe fuzzer (#28): mutated app files (keys, values, unicode, control and escape
characters, shell payloads, traversal paths, special files as the requirements file) and Python recipes
(NAME, CONTEXT, FILES, ENV, WORKDIR, WORKLOAD set to hostile values; build() returning hostile values or
passing them to the recipe API) through `gen-recipe --site local --recipe FILE --out DIR` and
`gen-recipe launch --site local --recipe FILE`, in-process. Every case: exit 0, 1 or 2 (one line on stderr),
never an uncaught exception; no payload runs (not while generating, nor from the printed launch script run
with stub commands); nothing outside the output folder changes (a sentinel folder, reachable through links,
is hashed); stdout and stderr carry no raw escape, control or bidirectional character. A small number of
cases in CI; 20,000 with --fuzz-long (figures in README, Hostile input)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.model import site as site_mod

from tests.model.test_fuzz import toml_value

CASES = 20_000 if "--fuzz-long" in sys.argv else 300
RAW_CHARS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")   # all but \n
STUBS = ("srun", "mpirun", "mpiexec", "module", "ch-run", "ch-convert", "podman", "udocker", "python3")
MARK = "MARKER"          # replaced by the case's marker file


PAYLOADS = [f"$(touch {MARK})", f"`touch {MARK}`", f"; touch {MARK}", f"x\ntouch {MARK}", f"# \ntouch {MARK}",
            f"'; touch {MARK}; '", f"\"; touch {MARK}; \"", "EOF", "\x1b[31mred", "\x1b]0;title\x07", "\u202eevil",
            "\x9b2J", "\u2028", "\x00", "", " ", "x" * 3000, "ünïcødé ☃", "-rf", "--output=/etc/x"]
PATHS = ["../..", "../../etc/passwd", "/etc/passwd", "/opt", "/opt/venv", "/srv", "/", "src/../../outside",
         "link-out", "link-out/secret.txt", "fifo", "dev", "dir", "src", "/opt/app", "/opt/app/x", "~root", "src/*"]
GOOD = ["demo", "/opt/app", "src", "1", "OMP_NUM_THREADS", "numpy==2.1.3", "python3", "samples/s", "x==1"]
words = st.one_of(st.sampled_from(PAYLOADS + PATHS + GOOD), st.text(max_size=30))
values = st.one_of(words, st.integers(-2**65, 2**65), st.floats(), st.booleans(),
                   st.lists(words, max_size=3), st.dictionaries(words, words, max_size=2))


def special_tree(folder: Path, sentinel: Path) -> None:
    """The case folder: src/ and the special files a hostile value may name."""
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "main.py").write_text("print(1)\n")
    (folder / "requirements.txt").write_text("tqdm==4.67.1\n")
    os.mkfifo(folder / "fifo")
    (folder / "dev").symlink_to("/dev/zero")
    (folder / "dir").mkdir()
    (folder / "link-out").symlink_to(sentinel)


# ---- app files -------------------------------------------------------------------------------------------------

APP = {"schema": 1, "name": "demo", "description": "fuzzed", "base": "none", "files": {"src": "/opt/app"},
       "build": {"packages": ["make"], "commands": ["make -C /opt/app"], "keep": ["/opt/app-build"]},
       "python": {"requirements": ["numpy==2.1.3"], "requirements_file": "requirements.txt"},
       "run": {"packages": ["libgomp1"], "env": {"OMP_NUM_THREADS": "1"}, "workdir": "/opt/app",
               "command": ["python3", "/opt/app/main.py"], "labels": {"org.example.k": "v"}},
       "workload": {"command": ["python3", "/opt/app/main.py"], "json_key": "rate", "unit": "items/s", "tolerance": 0.1}}
KEYS = ["name", "base", "files", "src", "env", "workdir", "requirements_file", "\x1b[31m", "../x", "extra"]


def tables(doc: dict):
    yield doc
    for v in doc.values():
        if isinstance(v, dict):
            yield from tables(v)


@st.composite
def app_text(draw) -> str:
    doc = json.loads(json.dumps(APP))
    for _ in range(draw(st.integers(1, 3))):
        table = draw(st.sampled_from(list(tables(doc))))
        action = draw(st.sampled_from(["set", "set", "path", "delete", "add"]))
        key = draw(st.sampled_from(sorted(table) or ["x"]))
        if action == "delete":
            table.pop(key, None)
        elif action == "add":
            table[draw(st.one_of(st.sampled_from(KEYS + PAYLOADS + PATHS), st.text(max_size=10)))] = draw(values)
        elif action == "path":
            doc["python"] = {"requirements_file": draw(st.sampled_from(PATHS))}
        else:
            table[key] = draw(values)
    text = "\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items()) + "\n"
    if draw(st.integers(0, 19)) == 0:            # broken text
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(PAYLOADS)) + text[cut:]
    return text


# ---- Python recipes --------------------------------------------------------------------------------------------

HOSTILE = st.one_of(values, st.sampled_from(["()", "None", "42", "'FROM evil'", "[1, 2]", "[None]", "[]", "object()",
                                             "{'src': '/opt'}", "{'src': '/opt/app'}", "('src', 'src')"]).map(lambda s: ("raw", s)))


def py(v) -> str:
    """A Python expression for a drawn value (("raw", text): the text itself)."""
    return v[1] if isinstance(v, tuple) else repr(v)


KWARGS = {"name": "'demo'", "env": "{'A': '1'}", "labels": "{'k': 'v'}", "command": "['python3', '/opt/app/main.py']",
          "workdir": "'/opt/app'", "runtime_packages": "['libgomp1']", "build_packages": "['make']"}


@st.composite
def recipe_text(draw) -> str:
    attrs = {"NAME": "'demo'", "FILES": "{'src': '/opt/app'}", "CONTEXT": "('src',)", "ENV": "{'A': '1'}",
             "WORKDIR": "'/opt/app'",
             "WORKLOAD": "api.workload(command=['python3', '/opt/app/main.py'], json_key='rate', unit='items/s')"}
    kwargs, files, result = dict(KWARGS), "{'src': '/opt/app'}", ""
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["attr", "attr", "kwarg", "kwarg", "files", "result", "doc", "workload"]))
        if what == "attr":
            attrs[draw(st.sampled_from(sorted(attrs)))] = py(draw(HOSTILE))
        elif what == "kwarg":
            kwargs[draw(st.sampled_from(sorted(kwargs)))] = py(draw(HOSTILE))
        elif what == "files":
            files = py(draw(HOSTILE))
        elif what == "result":
            result = py(draw(HOSTILE))
        elif what == "workload":
            attrs["WORKLOAD"] = (f"api.Workload(command=({py(draw(words))},), json_key={py(draw(words))}, "
                                 f"unit={py(draw(words))})")
        else:
            attrs["__doc__"] = py(draw(words))
    body = "\n".join(f"{k} = {v}" for k, v in attrs.items())
    call = ", ".join(f"{k}={v}" for k, v in kwargs.items() if k != "name")
    build = f"    return {result}\n" if result else (
        f"    p = api.plan(site)\n    return api.two_stage(site, {kwargs['name']}, p, keep=[api.app_files({files})], "
        f"{call})\n")
    return f"from generator import api\n{body}\n\n\ndef build(site):\n{build}"


# ---- the checks ------------------------------------------------------------------------------------------------

def fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        h.update(str(p).encode() + b"\0" + (p.read_bytes() if p.is_file() and not p.is_symlink() else b"-"))
    return h.hexdigest()


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """(sentinel folder, stub folder, its hash): the sentinel holds files that must never change. The shipped
    site names are read once (site.builtin_names parses every site file on each call: most of a case's time)."""
    patch = pytest.MonkeyPatch()
    patch.setattr(site_mod, "builtin_names", functools.cache(site_mod.builtin_names))
    root = tmp_path_factory.mktemp("fuzzapps")
    sentinel, stubs = root / "sentinel", root / "stubs"
    sentinel.mkdir()
    (sentinel / "secret.txt").write_text("topsecret\n")
    (sentinel / "local").mkdir()
    stubs.mkdir()
    for name in STUBS:
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
        (stubs / name).chmod(stat.S_IRWXU)
    yield sentinel, stubs, fingerprint(sentinel)
    patch.undo()


def check_case(folder: Path, text: str, file_name: str, place, linked_out: bool) -> None:
    sentinel, stubs, sentinel_hash = place
    marker = folder / "pwned"
    special_tree(folder, sentinel)
    recipe = folder / file_name
    recipe.write_text(text.replace(MARK, str(marker)), encoding="utf-8", errors="surrogatepass")
    out = folder / "out"
    if linked_out:                                  # out/local -> the sentinel: must be refused
        out.mkdir()
        (out / "local").symlink_to(sentinel / "local")
    for argv in (("--site", "local", "--recipe", str(recipe), "--out", str(out), "-q"),
                 ("--site", "local", "--recipe", str(recipe), "--out", str(out), "--check", "-q"),
                 ("launch", "--site", "local", "--recipe", str(recipe))):
        code, stdout, stderr = run(*argv)
        assert code in (0, 1, 2), (argv, code, stderr)
        assert code == 0 or (stderr.count("\n") == 1 and stderr.startswith("gen-recipe: ")), (argv, code, stderr[:500])
        assert not RAW_CHARS.search(stdout + stderr), (argv, ascii(stdout[-300:] + stderr[:300]))
        if code == 0 and argv[0] == "launch":       # the printed script, run with stub commands
            (folder / "job.sh").write_text(stdout)
            subprocess.run(["bash", str(folder / "job.sh")], cwd=folder, capture_output=True, timeout=60,
                           env={"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(folder), "USER": "nobody"})
        assert not marker.exists(), (argv, text)
    assert fingerprint(sentinel) == sentinel_hash, text
    made = {p.name for p in folder.iterdir()} - {"src", "requirements.txt", "fifo", "dev", "dir", "link-out", "out",
                                                  "job.sh", file_name}
    assert not made, made


SETTINGS = settings(max_examples=CASES // 2, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@SETTINGS
@given(text=app_text(), linked_out=st.integers(0, 9).map(lambda n: n == 0))
def test_fuzzed_app_files(text, linked_out, place, tmp_path_factory):
    check_case(tmp_path_factory.mktemp("app"), text, "app.toml", place, linked_out)


@SETTINGS
@given(text=recipe_text(), linked_out=st.integers(0, 9).map(lambda n: n == 0))
def test_fuzzed_python_recipes(text, linked_out, place, tmp_path_factory):
    check_case(tmp_path_factory.mktemp("py"), text, "recipe.py", place, linked_out)
