"""App files, Python recipes, the recipe API and the generate command at the boundary (#28): paths stay in
their folder, special files are refused before they are read, a recipe's values pass the schema's kinds,
every echoed string is escaped; each bad input is one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from generator import api
from generator.cli import main as cli
from generator.errors import RecipeError
from generator.model import site

from tests.helpers import run_cli

APP = """schema = 1
name = "demo"
base = "none"
[files]
"src" = "/opt/demo"
"""


def one_line(r, *fragments: str) -> None:
    assert r.code == 2 and r.err.count("\n") == 1 and r.err.startswith("gen-recipe: "), (r.code, r.err)
    assert "Traceback" not in r.err and "\x1b" not in r.err + r.out, r.err
    for fragment in fragments:
        assert fragment in r.err, r.err


def app_dir(tmp_path: Path, text: str = APP, name: str = "app") -> Path:
    folder = tmp_path / name
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "main.py").write_text("print(1)\n")
    (folder / "app.toml").write_text(text)
    return folder / "app.toml"


def recipe(tmp_path: Path, body: str, name: str = "recipe.py", header: str = 'NAME = "demo"\n') -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "main.py").write_text("print(1)\n")
    path = tmp_path / name
    path.write_text("from generator import api\n" + header + textwrap.dedent(body))
    return path


BUILD = """
def build(site):
    return api.two_stage(site, NAME, api.plan(site), keep=[api.app_files({"src": "/opt/demo"})])
"""


def generate(tmp_path: Path, *specs: Path | str, extra: tuple[str, ...] = ()):
    argv = ["--site", "local", "--out", str(tmp_path / "out"), *extra]
    for spec in specs:
        argv += ["--recipe", str(spec)]
    return run_cli(*argv)


def test_requirements_file_outside_the_app_folder_is_refused_without_its_content(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("topsecret-line\n")
    outside = tmp_path / "pins.txt"
    outside.write_text("numpy==2.1.3\n")
    for rel, fragment in (("src/../../secret.txt", "must be a relative path inside"),
                          ("link.txt", "leads outside"), ("linkpins.txt", "leads outside")):
        app = app_dir(tmp_path / rel.replace("/", "_"), APP.replace("[files]", f'[python]\nrequirements_file = "{rel}"\n[files]'))
        (app.parent / "link.txt").symlink_to(secret)
        (app.parent / "linkpins.txt").symlink_to(outside)     # valid pins outside: refused all the same
        r = generate(tmp_path, app)
        one_line(r, "python.requirements_file", fragment)
        assert "topsecret" not in r.err and "numpy" not in r.err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_special_files_as_inputs_are_one_line_and_never_block(tmp_path, kind):
    def special(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "device":
            path.symlink_to("/dev/zero")
        else:
            path.mkdir()
        return path

    what = {"fifo": "a FIFO", "device": "a device or special file", "directory": "a directory"}[kind]
    one_line(generate(tmp_path, special(tmp_path / "x" / "app.toml")), "app.toml: ", what)
    one_line(generate(tmp_path, special(tmp_path / "y" / "recipe.py")), "recipe.py: ", what)
    one_line(run_cli("--site", str(special(tmp_path / "z" / "site.toml")), "--out", str(tmp_path / "out")), "site.toml: ", what)
    app = app_dir(tmp_path, APP.replace("[files]", '[python]\nrequirements_file = "reqs.txt"\n[files]'))
    special(app.parent / "reqs.txt")
    one_line(generate(tmp_path, app), "python.requirements_file", what if kind != "device" else "leads outside")
    with pytest.raises(RecipeError, match=what):      # a Python recipe's requirements file: the same read path
        api.requirements_file(app.parent / "reqs.txt")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("body,got", [
    ("CONTEXT = None\n" + BUILD, "CONTEXT must be a tuple of paths"),
    ("def build(site):\n    return None\n", "returned NoneType"),
    ("def build(site):\n    return 42\n", "returned int"),
    ("def build(site):\n    return 'FROM evil'\n", "returned str"),
    ("def build(site):\n    return [1, 2]\n", "returned a list of int"),
    ("def build(site):\n    return [None]\n", "returned a list of NoneType"),
    ("def build(site):\n    return []\n", "returned an empty list"),
])
def test_python_recipe_attributes_and_build_results_are_checked(tmp_path, body, got):
    path = recipe(tmp_path, body)
    r = generate(tmp_path, path)
    one_line(r, str(path), got)
    if "returned" in got:
        assert "build must return a list of hpccm Stages" in r.err
    assert not (tmp_path / "out").exists()


def test_two_recipes_with_one_name_are_refused_naming_both(tmp_path):
    a, b = recipe(tmp_path, BUILD, "a.py"), recipe(tmp_path, BUILD, "b.py")
    one_line(generate(tmp_path, a, b), f"--recipe {a} and --recipe {b} are both named 'demo'")
    app = app_dir(tmp_path)
    one_line(generate(tmp_path, app, a), f"--recipe {app} and --recipe {a} are both named 'demo'")
    assert not (tmp_path / "out").exists()
    assert generate(tmp_path, a, a).code == 0       # the same recipe twice is one recipe


def test_opt_itself_is_a_reserved_destination(tmp_path):
    one_line(generate(tmp_path, app_dir(tmp_path, APP.replace('"/opt/demo"', '"/opt"'))),
             "files.src: /opt is a folder the image itself uses")
    py = recipe(tmp_path, BUILD, header='NAME = "demo"\nFILES = {"src": "/opt"}\n')
    one_line(generate(tmp_path, py), "FILES['src']: /opt is a folder the image itself uses")
    via_api = recipe(tmp_path, BUILD.replace('"/opt/demo"', '"/opt"'), "api.py")
    one_line(generate(tmp_path, via_api), "generator.api.app_files: files.src: /opt is a folder the image itself uses")


@pytest.mark.parametrize("kwargs,fragment", [
    ({"name": "demo\nFROM evil"}, "two_stage: name: 'demo\\nFROM evil' contains a control or bidirectional character"),
    ({"env": {"A": "1\nFROM evil"}}, "two_stage: env.A:"),
    ({"env": {"A": "$(touch x)"}}, "two_stage: env.A: '$(touch x)' is not letters"),
    ({"env": {"A B": "1"}}, "two_stage: env key: 'A B' is not an environment variable name"),
    ({"labels": {"a": '"; x'}}, "two_stage: labels.a:"),
    ({"labels": {"a b": "1"}}, "two_stage: labels key:"),
    ({"command": ["a\nb"]}, "two_stage: command[0]:"),
    ({"command": "python3"}, "two_stage: command: expected a non-empty list of strings, got str"),
    ({"command": []}, "two_stage: command: expected a non-empty list"),
    ({"workdir": "/opt/x; rm"}, "two_stage: workdir: '/opt/x; rm' is not an absolute path"),
    ({"runtime_packages": ["gcc; id"]}, "two_stage: runtime_packages[0]:"),
    ({"build_packages": ["-o=evil"]}, "two_stage: build_packages[0]:"),
    ({"env": ["A"]}, "two_stage: env: expected a mapping of strings, got list"),
])
def test_api_two_stage_checks_every_string_like_a_site_value(kwargs, fragment):
    s = site.load("local")
    args = {"name": "demo", **kwargs}
    with pytest.raises(RecipeError) as exc:
        api.two_stage(s, args.pop("name"), api.plan(s), **args)
    assert fragment in str(exc.value) and "\n" not in str(exc.value), str(exc.value)
    for call, fragment in ((lambda: api.app_files({"../x": "/opt/x"}), "app_files: files key"),
                           (lambda: api.app_files({"src": "/opt/x"}, commands=["a\nb"]), "app_files: commands[0]"),
                           (lambda: api.python_spec(s, api.plan(s), ["numpy; id"]), "python_spec: extra[0]"),
                           (lambda: api.ospackages(packages=["a b"]), "ospackages: packages[0]")):
        with pytest.raises(RecipeError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
            call()


def test_api_values_quoted_where_they_land(tmp_path):
    """Valid values with spaces land quoted: ENV / %environment / LABEL."""
    path = recipe(tmp_path, BUILD.replace("keep=", 'env={"A": "x y"}, labels={"k": "v w"}, keep='))
    assert generate(tmp_path, path).code == 0
    docker, apptainer = ((tmp_path / "out/local" / f"demo.{e}").read_text() for e in ("Dockerfile", "def"))
    assert 'ENV A="x y"' in docker and 'k="v w"' in docker and 'export A="x y"' in apptainer


@pytest.mark.parametrize("kind", ["binary", "fifo", "directory"])
def test_check_over_a_special_or_non_utf8_file_is_differs(tmp_path, kind):
    out = tmp_path / "out"
    assert run_cli("--site", "local", "--recipe", "osu", "--out", str(out), "-q").code == 0
    target = out / "local" / "osu.def"
    target.unlink()
    if kind == "binary":
        target.write_bytes(b"\xff\xfe\x00garbage")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    r = run_cli("--site", "local", "--recipe", "osu", "--out", str(out), "--check")
    assert r.code == 1 and r.err.count("\n") == 1 and f"{target} (differs)" in r.err and "Traceback" not in r.err, r.err


def test_out_through_a_symlinked_site_folder_is_refused(tmp_path):
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "local").symlink_to(elsewhere)
    r = run_cli("--site", "local", "--recipe", "osu", "--out", str(tmp_path / "out"))
    one_line(r, "is a symbolic link to a folder", "--follow-symlinks")
    assert list(elsewhere.iterdir()) == []
    assert run_cli("--site", "local", "--recipe", "osu", "--out", str(tmp_path / "out"), "--follow-symlinks").code == 0
    assert (elsewhere / "osu.Dockerfile").is_file()


def test_explain_and_listings_escape_a_recipes_docstring(tmp_path):
    path = tmp_path / "recipe.py"
    path.write_text('"""\\x1b[31mRed\\x1b]0;title\\x07 \\u202e recipe."""\nNAME = "demo"\n\ndef build(site):\n    return []\n')
    r = run_cli("--site", "local", "--recipe", str(path), "--explain")
    assert r.code == 0, r.err
    assert "\\x1b[31mRed\\x1b]0;title\\x07 \\u202e recipe" in r.out
    assert not any(c in r.out for c in "\x1b\x07\u202e")
    r = run_cli("--list-recipes")
    assert r.code == 0 and "pytorch" in r.out and "\x1b" not in r.out


@pytest.mark.parametrize("body, words", [
    ("import sys\ndef build(site):\n    sys.exit(0)\n", "r.py:3: it called sys.exit(0); a recipe returns its stages"),
    ("import sys\nsys.exit(3)\n", "r.py:2: it called sys.exit(3)"),
    ("def build(site):\n    raise RecursionError()\n", "r.py:2: RecursionError (building for site local)"),
])
def test_a_recipe_that_exits_or_raises_without_text_is_one_line(tmp_path, monkeypatch, capsys, body, words):
    """Before: sys.exit(0) in build() ended gen-recipe with exit 0 and nothing written or said."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.py").write_text(body)
    assert cli.main(["--site", "local", "--recipe", "./r.py", "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "out").exists()
