"""App files: the example loads; a corpus of broken ones each gets one line naming the file, the key and a
fix, exit code 2, no traceback; requirements files and metrics are read as documented."""

from __future__ import annotations

import os
import re

from pathlib import Path

import pytest

from generator.model import app
from generator.suite import metric
from generator.recipe import catalog
from generator.cli import main as cli
from generator.errors import GenRecipeError

REPO = Path(__file__).resolve().parents[2]
GOOD = """schema = 1
name = "demo"
base = "pytorch"
[files]
"src" = "/opt/demo"
[run]
workdir = "/opt/demo"
[workload]
command = ["python3", "/opt/demo/main.py"]
json_key = "rate"
unit = "items/s"
tolerance = 0.1
"""

# (what replaces/extends the good file, the fragment the one-line error must carry)
BROKEN = [
    ('name = "demo"', 'name = "Demo App"', "app.toml: name: 'Demo App' is not lower-case letters"),
    ('name = "demo"', 'name = "pytorch"', "name: 'pytorch' is a built-in recipe's name"),
    ('base = "pytorch"', 'base = "pytorh"', "did you mean 'pytorch'?"),
    ('base = "pytorch"', 'base = "pytorch"\nbasee = 1', "basee: unknown key (did you mean 'base'?)"),
    ('schema = 1', 'schema = 2', "schema: 2 is not a schema this gen-recipe reads"),
    ('schema = 1', 'schema = "1"', "schema: expected an integer"),
    ('"src" = "/opt/demo"', '"src" = "opt/demo"', "files.src: 'opt/demo' is not an absolute path in the image"),
    ('"src" = "/opt/demo"', '"missing" = "/opt/demo"', "files.missing: ", ),
    ('"src" = "/opt/demo"', '"../x" = "/opt/demo"', "files key: '../x'"),
    ('"src" = "/opt/demo"', '"src" = "/opt/venv"', "files.src: /opt/venv is a folder the image itself uses"),
    ('"src" = "/opt/demo"', '"src" = "/opt/a/b"', "the parent of /opt/a/b is not /, /opt or /srv"),
    ('"src" = "/opt/demo"', '"src" = "/opt/../etc"', "is not an absolute path in the image"),
    ('workdir = "/opt/demo"', 'workdir = "/opt/other"', "run.workdir: /opt/other is not one of the [files] destinations"),
    ('[run]', '[run]\nenv = { A = "x\\"; rm -rf /" }', "run.env.A:"),
    ('[run]', '[run]\nenv = { "1A" = "x" }', "run.env key: '1A' is not an environment variable name"),
    ('[run]', '[run]\nlabels = { a = "$(id)" }', "run.labels.a: '$(id)' is not letters, digits, spaces"),
    ('[run]', '[run]\ncommand = ["python3", "a\\nb"]', "run.command[1]: 'a\\nb' contains a control or bidirectional character"),
    ('base = "pytorch"', 'base = "pytorch"\n[python]\nrequirements = ["numpy"]', "is not a pinned pip requirement such as numpy==2.1.3"),
    ('base = "pytorch"', 'base = "pytorch"\n[python]\nrequirements = ["numpy==1; os.system(1)"]', "python.requirements[0]"),
    ('base = "pytorch"', 'base = "pytorch"\n[python]\nrequirements = ["a==1", "A==2"]', "python: a==1 and A==2 pin the same package"),
    ('base = "pytorch"', 'base = "pytorch"\n[python]\nrequirements_file = "nope.txt"', "python.requirements_file: cannot read"),
    ('base = "pytorch"', 'base = "pytorch"\n[build]\ncommands = ["make\\nrm -rf /"]',
     "build.commands[0]: 'make\\nrm -rf /' contains a control or bidirectional character"),
    ('json_key = "rate"', 'json_key = "rate"\nregex = "r: (.*)"', "give exactly one of json_key and regex"),
    ('json_key = "rate"', 'regex = "r: [0-9"', "workload.regex: not a regular expression"),
    ('json_key = "rate"', 'regex = "rate: [0-9.]+"', "workload.regex: has no group for the value"),
    ('unit = "items/s"', '', "workload.unit: missing: the metric's unit"),
    ('tolerance = 0.1', 'tolerance = 5', "workload.tolerance: 5.0 is not a fraction between 0 and 1"),
    ('tolerance = 0.1', 'better = "faster"', "workload.better: 'faster' is not one of higher, lower"),
    ('command = ["python3", "/opt/demo/main.py"]', 'command = []', "workload.command: missing"),
    ('[workload]', '[workload', "invalid TOML"),
]


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "main.py").write_text("print('{\"rate\": 1}')\n")
    path = tmp_path / "app.toml"
    path.write_text(text)
    return path


def test_the_example_loads():
    a = app.load(REPO / "examples/trainer/app.toml")
    assert a.name == "trainer" and a.base == "pytorch" and a.pins == ("tqdm==4.67.1",)
    assert a.workload.json_key == "samples_per_s" and a.workload.tolerance == 0.15
    assert dict(a.files) == {"src": "/opt/trainer"} and a.command == ("python3", "/opt/trainer/train.py")


def test_good_file_loads(tmp_path):
    a = app.load(write(tmp_path, GOOD))
    assert a.workload.better == "higher" and a.workload.timeout == 600 and a.workload.faster == 0.5


def test_no_workload_table_means_none(tmp_path):
    a = app.load(write(tmp_path, GOOD.split("[workload]")[0]))
    assert a.workload is None and a.command == ("/bin/bash",)


@pytest.mark.parametrize("old,new,fragment", BROKEN, ids=[b[2][:40] for b in BROKEN])
def test_broken_app_file_is_one_line_exit_2(tmp_path, capsys, old, new, fragment):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    rc = cli.main(["--site", "local", "--recipe", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith(f"gen-recipe: {path}") and "Traceback" not in err, err
    assert fragment in err, err
    assert not (tmp_path / "out").exists()


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "src").symlink_to(outside)
    (folder / "app.toml").write_text('schema = 1\nname = "demo"\nbase = "none"\n[files]\n"src" = "/opt/demo"\n')
    with pytest.raises(GenRecipeError, match="leads outside the app's folder"):
        app.load(folder / "app.toml")


@pytest.mark.parametrize("entry, fragment", [
    ("link-out", "src/sub/creds leads outside the app's folder (a link)"),
    ("fifo", "src/sub/creds is not a regular file or folder (a FIFO"),
    ("dangling", "src/sub/creds is a link to nothing"),
])
def test_entries_inside_a_files_folder_are_checked(tmp_path, entry, fragment):
    """A [files] folder goes whole into the build context: a link inside it must not bring in a file from
    outside (copytree follows links), and a FIFO or device must not block or break the copy."""
    (tmp_path / "secret").write_text("secret\n")
    folder = tmp_path / "app"
    (folder / "src" / "sub").mkdir(parents=True)
    (folder / "src" / "sub" / "inside.py").write_text("")
    (folder / "src" / "ok.py").symlink_to("sub/inside.py")            # a link inside the folder is fine
    creds = folder / "src" / "sub" / "creds"
    {"link-out": lambda: creds.symlink_to(tmp_path / "secret"), "fifo": lambda: os.mkfifo(creds),
     "dangling": lambda: creds.symlink_to("nothing")}[entry]()
    (folder / "app.toml").write_text('schema = 1\nname = "demo"\nbase = "none"\n[files]\n"src" = "/opt/demo"\n')
    with pytest.raises(GenRecipeError, match=re.escape(fragment)):
        app.load(folder / "app.toml")
    creds.unlink()
    assert app.load(folder / "app.toml").files == {"src": "/opt/demo"}


def test_requirements_file(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("# comment\nnumpy == 2.1.3  # trailing\n\ntqdm==4.67.1\n")
    path = write(tmp_path, GOOD.replace('base = "pytorch"', 'base = "pytorch"\n[python]\nrequirements_file = "requirements.txt"'))
    assert app.load(path).pins == ("numpy==2.1.3", "tqdm==4.67.1")
    for line, fragment in (("-r other.txt", "pip options are not supported"), ("numpy>=2", "is not a pinned requirement"),
                           ("numpy==2.1.3 --hash=sha256:00", "pip options are not supported")):
        req.write_text(f"tqdm==4.67.1\n{line}\n")
        with pytest.raises(GenRecipeError) as exc:
            app.load(path)
        assert str(exc.value).startswith(f"{req}:2: ") and fragment in str(exc.value)


def test_metric_from_json_or_regex():
    w = app.AppWorkload(command=("x",), json_key="rate", unit="u")
    assert metric.metric(w, 'noise\n{"rate": 1.5}\n{"other": 2}\n') == 1.5
    assert metric.metric(w, '{"rate": "fast"}\n') is None and metric.metric(w, "nothing") is None
    assert metric.metric(w, '{"rate": NaN}') is None
    assert metric.metric(w, '{"rate": 1' + "0" * 400 + '}') is None          # past float's range: no OverflowError
    r = app.AppWorkload(command=("x",), regex=r"rate: ([0-9.]+)", unit="u")
    assert metric.metric(r, "rate: 1\nrate: 2.5 items/s\n") == 2.5 and metric.metric(r, "rate: n/a") is None
    assert "JSON line" in metric.expected(w) and "rate: " in metric.expected(r)


def test_recipe_spec_resolution(tmp_path):
    assert catalog.load("pytorch").builtin and catalog.load("pytorch").payload
    r = catalog.load(str(REPO / "examples/trainer/app.toml"))
    assert r.name == "trainer" and r.context == ("src",) and not r.payload and r.workload is not None
    with pytest.raises(GenRecipeError, match="unknown recipe 'pytorh'.*did you mean 'pytorch'"):
        catalog.load("pytorh")
    with pytest.raises(GenRecipeError, match="cannot read"):
        catalog.load(str(tmp_path / "missing.toml"))


def test_wheels_of_your_own(tmp_path):
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "mypkg-1.0-py3-none-any.whl").write_bytes(b"PK")
    base = GOOD.replace('base = "pytorch"', 'base = "pytorch"\n[python]\nwheels = ["dist/mypkg-1.0-py3-none-any.whl"]')
    r = catalog.load(str(write(tmp_path, base)))
    assert r.context == ("src", "dist/mypkg-1.0-py3-none-any.whl")
    from generator.recipe import render
    from generator.model import site
    text = render.recipe_text(site.load("local"), r, "docker")
    assert "--mount=type=bind,source=app,target=/app-wheels" in text
    assert "install /app-wheels/dist/mypkg-1.0-py3-none-any.whl" in text
    definition = render.recipe_text(site.load("local"), r, "apptainer")
    assert "app/dist/mypkg-1.0-py3-none-any.whl /opt/wheels/mypkg-1.0-py3-none-any.whl" in definition
    assert "rm -rf /opt/wheels" in definition.split("Python packages beyond the shared stack")[1]
    for wheel, fragment in (("dist/mypkg.tar.gz", "is not a wheel file name"), ("dist/other-1.0-py3-none-any.whl", "does not exist")):
        with pytest.raises(GenRecipeError, match=f"python.wheels\\[0\\]: .*{fragment}"):
            app.load(write(tmp_path, base.replace("dist/mypkg-1.0-py3-none-any.whl", wheel)))


def test_a_recipe_folder_is_answered_with_the_file_in_it(tmp_path, monkeypatch, capsys):
    """`--recipe app` (the folder new-recipe made) names app/app.toml: before, the hint said ./app, which failed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "app.toml").write_text(GOOD)
    for spec in ("app", "./app", "app/"):
        assert cli.main(["--site", "local", "--recipe", spec]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is a folder: give the recipe in it, e.g. --recipe " in err, err
        assert err.rstrip().endswith(spec.rstrip("/") + "/app.toml"), err
