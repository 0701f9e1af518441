"""Hostile input to `gen-recipe lint` and `lint --fix` (issue #28): one regression test per defect."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.lint import dockerfile, shell, tools
from generator.lint.model import DOCKER, read_source

from .helpers import CORPUS, matrix_sources
from .test_lint_cli import lint

GEN_RECIPE = [sys.executable, "-m", "generator.cli.main"]
NESTED = "FROM debian:12\nRUN echo " + '"$(echo ' * 50 + "x" + ')"' * 50 + "\nUSER 1\n"   # hadolint: minutes


def shlex_words(text: str):
    """What shell._tokens split with before: shlex, character by character."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        return tuple(lexer)
    except ValueError:
        return None


def new_words(text: str):
    try:
        return shell.words(text)
    except ValueError:
        return None


def gen_recipe(args, env=None, **kw) -> subprocess.Popen:
    return subprocess.Popen([*GEN_RECIPE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2], env={**os.environ, **(env or {})}, **kw)


def test_special_files_are_refused_in_one_line_without_blocking(tmp_path):
    fifo = tmp_path / "Dockerfile"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), ("/dev/zero", "a device")):
        proc = gen_recipe(["lint", str(path)])
        out, err = proc.communicate(timeout=120)            # before: blocked forever / MemoryError
        assert proc.returncode == 2 and out == "" and err.count("\n") == 1, err
        assert err.startswith(f"gen-recipe: lint: {path}: {what}") and "not a regular file" in err
    (tmp_path / "x.def").write_text("Bootstrap: docker\nFrom: debian:12\n")
    proc = gen_recipe(["lint", str(tmp_path)])
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and f"skipped {fifo}: not a regular file" in err


def test_tokenizer_is_linear_and_splits_as_shlex_did():
    seen = set()
    real = shell._tokens

    def spy(text):
        seen.add(text)
        return real(text)

    shell._tokens = spy
    try:
        for src in [read_source(p) for p in CORPUS] + [s for s, _ in matrix_sources()]:
            shell.split_script([(n, t) for n, t in enumerate(src.text.splitlines(), 1)], docker=src.kind == DOCKER)
    finally:
        shell._tokens = real
    assert len(seen) > 300
    assert [t for t in seen if shlex_words(t) != new_words(t)] == []
    rnd = random.Random(28)
    for _ in range(20_000):
        text = "".join(rnd.choice(" \t\r\n#;&|()<>'\"\\ab$`-=\x1b") for _ in range(rnd.randint(0, 30)))
        assert shlex_words(text) == new_words(text), repr(text)
    start = time.monotonic()                                 # before: 800k characters took 22 s, 5 MB over 300 s
    assert len(shell.words("echo " + "a" * 5_000_000 + " 'b\\c' \"d\\\"e\"")) == 4
    text = "FROM debian:12\nRUN echo " + "$(" * 100_000 + ")" * 100_000 + " x" * 500_000 + "\n"
    assert dockerfile.check(text)
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("tool", ["hadolint", "shellcheck"])
def test_linter_out_of_time_is_a_finding(capsys, tmp_path, monkeypatch, tool):
    path = tmp_path / ("Dockerfile" if tool == "hadolint" else "x.def")
    path.write_text("FROM debian:12\nRUN echo a\nUSER 1\n" if tool == "hadolint" else
                    "Bootstrap: docker\nFrom: debian:12\n%post\n    echo $a\n")
    monkeypatch.setenv(tools.TIMEOUT_ENV, "0.001")           # no process starts that fast
    rc, out, _ = lint(capsys, "--format", "json", path)
    found = json.loads(out)["findings"]
    assert rc == 1 and [(f["rule"], f["severity"]) for f in found] == [("GR009", "error")]
    assert found[0]["message"].startswith(f"{tool} did not finish within 0.001 s")
    monkeypatch.setenv(tools.TIMEOUT_ENV, "60")              # not cached: checked for real next time
    rc, out, _ = lint(capsys, "--format", "json", path)
    assert "GR009" not in out
    monkeypatch.setenv(tools.TIMEOUT_ENV, "soon")
    rc, _, err = lint(capsys, path)
    assert rc == 2 and "GEN_RECIPE_LINT_TIMEOUT=soon" in err


def test_nested_and_huge_files_return_with_a_finding(tmp_path):
    nested, huge = tmp_path / "nested.Dockerfile", tmp_path / "huge.Dockerfile"
    nested.write_text(NESTED)
    huge.write_text("FROM debian:12\nRUN echo " + "ab " * 1_700_000 + "\nUSER 1\n")       # 5 MB, one line
    proc = gen_recipe(["lint", "--format", "json", str(nested), str(huge)],
                      {tools.TIMEOUT_ENV: "5", "GEN_RECIPE_LINT_CACHE": "0"})
    out, err = proc.communicate(timeout=300)                 # before: hours; now about 2 x 5 s + our checks
    found = {(Path(f["file"]).name, f["rule"]) for f in json.loads(out)["findings"]}
    assert proc.returncode == 1 and ("nested.Dockerfile", "GR009") in found, (found, err)


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def _running(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_leaves_no_linter_running(tmp_path, sig):
    """SIGTERM, and SIGHUP (a closed terminal or ssh session), end hadolint and ShellCheck with the tool."""
    path = tmp_path / "Dockerfile"
    path.write_text(NESTED)
    # as from a terminal: SIGHUP's default disposition (under nohup it is ignored, and gen-recipe keeps that)
    proc = gen_recipe(["lint", str(path)], {tools.TIMEOUT_ENV: "600", "GEN_RECIPE_LINT_CACHE": "0"},
                      preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        deadline, children = time.monotonic() + 120, []
        while not children and time.monotonic() < deadline and proc.poll() is None:
            children = [c for c in _children(proc.pid) if "hadolint" in Path(f"/proc/{c}/cmdline").read_text()]
            time.sleep(0.1)
        assert children, "hadolint never started"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)                 # before: waited for hadolint (minutes)
        assert proc.returncode == 128 + sig and f"ended by {sig.name}" in err, (proc.returncode, err)
        deadline = time.monotonic() + 30
        while any(map(_running, children)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_running, children))               # before: hadolint went on at full CPU
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for child in children:                                 # a SIGKILLed tool leaves its linter: not this test's
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)


def test_fix_refuses_links_before_writing_anything(capsys, tmp_path):
    real = tmp_path / "real.Dockerfile"
    smelly = "FROM debian:12\nRUN apt install -y curl=7.88.1-10+deb12u8 && apt-get clean && rm -rf /var/lib/apt/lists/*\nUSER 1\n"
    real.write_text(smelly)
    link, hard = tmp_path / "Dockerfile", tmp_path / "hard.Dockerfile"
    link.symlink_to(real.name)
    os.link(real, hard)
    named = "is a symbolic link: not replaced (name its target real.Dockerfile instead, or remove the link)"
    for path, why in ((link, named), (hard, "other hard link")):
        rc, out, err = lint(capsys, "--fix", path)
        assert rc == 2 and out == "" and err.count("\n") == 1 and why in err and "--follow" not in err, err
        assert real.read_text() == smelly and link.is_symlink()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile", "hard.Dockerfile", "real.Dockerfile"]


def test_fix_of_several_files_checks_every_one_before_writing_any(capsys, tmp_path):
    smelly = "FROM debian:12\nRUN apt install -y curl=7.88.1-10+deb12u8 && apt-get clean && rm -rf /var/lib/apt/lists/*\nUSER 1\n"
    for name in ("a.Dockerfile", "z.Dockerfile"):
        (tmp_path / name).write_text(smelly)
    os.link(tmp_path / "z.Dockerfile", tmp_path / "hard")
    rc, out, err = lint(capsys, "--fix", tmp_path)
    assert rc == 2 and "z.Dockerfile has 1 other hard link" in err and "(no file was rewritten)" in err, err
    assert (tmp_path / "a.Dockerfile").read_text() == smelly            # before: fixed, with a.Dockerfile.orig
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.Dockerfile", "hard", "z.Dockerfile"]
    (tmp_path / "hard").unlink()
    rc, out, err = lint(capsys, "--fix", tmp_path)
    assert rc == 1 and out.count("fixed DL3027") == 2, out + err     # 1: findings left (DL3015)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.Dockerfile", "a.Dockerfile.orig", "z.Dockerfile",
                                                          "z.Dockerfile.orig"]


def test_echoed_names_and_content_are_escaped(capsys, tmp_path):
    path = tmp_path / "Dockerfile.\x1b]0;title\x07"
    path.write_text("FROM debian:12\nRUN pip install --trusted-host=\x1b[31mevil\u202e a==1\nUSER 1\n")
    (tmp_path / "notes\x1b[2J.txt").write_text("x")
    rc, out, err = lint(capsys, tmp_path)
    assert rc == 1 and "--trusted-host=\\x1b[31mevil\\u202e" in out and "Dockerfile.\\x1b]0;title\\x07" in out
    assert "notes\\x1b[2J.txt" in err
    assert not any(c in out + err for c in "\x1b\x07\u202e")
    rc, out, err = lint(capsys, "--format", "json", path)
    assert "\x1b" not in out and json.loads(out)["findings"][0]["file"] == str(path)
