"""A bare twin whose image adds an app's packages to a stack starts from the stack's twin (hard links), as the
image's layers do: llm's twin is pytorch's plus transformers, without a second install of torch."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from generator.model import site as site_mod
from generator.recipe import catalog
from generator.suite import harness


def fake_twin(folder, spec) -> None:
    """A real venv (without pip: seconds) holding a 'package' and a script naming the twin's folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    pkg = next((folder / "lib").glob("python3*")) / "site-packages" / "stackpkg.py"
    pkg.write_text("VALUE = 1\n")
    (folder / "bin" / "tool").write_text(f"#!{folder}/bin/python\nimport stackpkg\n")
    (folder / ".complete").write_text(repr(spec) + "\n")


def test_the_llm_twin_starts_from_the_pytorch_twin(tmp_path):
    local = site_mod.load("local")
    llm = catalog.load("llm").python(local)
    stack = dataclasses.replace(llm, app=(), app_wheels=())
    assert harness._stack_recipe(local, llm) == "pytorch" and harness._stack_recipe(local, stack) == ""
    assert harness.stack_twin(local, llm, tmp_path) is None
    src = harness.twin_dir(local, catalog.load("pytorch"), stack, tmp_path)
    fake_twin(src, stack)
    (tmp_path / f".{src.name}.lock").touch()
    assert harness.stack_twin(local, llm, tmp_path) == src
    (src / ".complete").write_text(repr(llm) + "\n")                     # holds something else: not the stack
    assert harness.stack_twin(local, llm, tmp_path) is None
    (src / ".complete").write_text(repr(stack) + "\n")

    dest = harness.twin_dir(local, catalog.load("llm"), llm, tmp_path)
    harness.copy_twin(src, dest)
    assert not (dest / ".complete").exists() and (src / ".complete").is_file()    # complete only once pip ran
    assert harness.complete(src, stack) and not harness.complete(dest, llm) and not harness.complete(src, llm)
    pkg = next((dest / "lib").glob("python3*")) / "site-packages" / "stackpkg.py"
    assert pkg.stat().st_ino == next((src / "lib").glob("python3*")).joinpath("site-packages", "stackpkg.py").stat().st_ino
    for name in ("tool", "activate"):                 # what names the folder: written anew, the stack's untouched
        assert str(dest) in (dest / "bin" / name).read_text() and str(src) not in (dest / "bin" / name).read_text()
        assert str(src) in (src / "bin" / name).read_text()
        assert (dest / "bin" / name).stat().st_ino != (src / "bin" / name).stat().st_ino
    assert str(src) not in (dest / "pyvenv.cfg").read_text()
    ran = subprocess.run([str(dest / "bin" / "python"), "-c", "import sys, stackpkg; print(sys.prefix)"],
                         capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == str(dest)


def test_a_twin_is_complete_only_when_it_says_it_holds_its_spec(tmp_path):
    """`.complete` is written last and says what the twin holds: a half-made twin (none), one holding another spec
    (a stack's marker copied along) or an unreadable marker is not a twin to reuse."""
    llm = catalog.load("llm").python(site_mod.load("local"))
    stack = dataclasses.replace(llm, app=(), app_wheels=())
    assert not harness.complete(tmp_path, llm)
    (tmp_path / ".complete").write_text(repr(stack) + "\n")
    assert not harness.complete(tmp_path, llm) and harness.complete(tmp_path, stack)
    (tmp_path / ".complete").write_bytes(b"\xff\xfe")
    assert not harness.complete(tmp_path, stack)
