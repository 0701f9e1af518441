"""Python recipes from a path or module:function: imported, never exec'd; errors name the file and line;
`gen-recipe new-recipe` writes a template that generates, lints clean and is a valid recipe as it is;
`gen-recipe launch --recipe` runs the app's workload command."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from generator.recipe import catalog, render
from generator.cli import main as cli
from generator.run import launch
from generator.model import site
from generator.lint.engine import lint_text
from generator.lint.model import target_of

REPO = Path(__file__).resolve().parents[2]
RECIPE = '''\
"""Demo recipe."""
from generator import api

NAME = "demo"
FILES = {"src": "/opt/demo"}


def python(site):
    return api.python_spec(site, api.plan(site))


def build(site):
    p = api.plan(site)
    return api.two_stage(site, NAME, p, keep=[api.python_env(site, python(site)), api.app_files(FILES)],
                         command=["python3", "/opt/demo/main.py"])
'''


def write(tmp_path: Path, text: str, name: str = "recipe.py") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "main.py").write_text("print(1)\n")
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_python_recipe_from_a_path(tmp_path, capsys):
    path = write(tmp_path, RECIPE)
    rc, out, err = run_cli(capsys, "--site", "alps", "--recipe", str(path), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    text = (tmp_path / "out" / "alps" / "demo.Dockerfile").read_text()
    assert "COPY app/src /opt/demo" in text and f"--recipe {path}" in text
    assert not lint_text(text, "alps/demo.Dockerfile", target=target_of(site.load("alps")))
    r = catalog.load(str(path))
    assert r.name == "demo" and r.context == ("src",) and r.python(site.load("local")).wheels


def test_module_function_form(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write(pkg, RECIPE.replace("def build(site):", "def gpu_image(site):"), "recipes.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    r = catalog.load("mypkg.recipes:gpu_image")
    assert r.name == "demo" and "FROM" in render.recipe_text(site.load("frontier"), r, "docker")
    with pytest.raises(Exception, match="defines no function nothing"):
        catalog.load("mypkg.recipes:nothing")
    with pytest.raises(Exception, match="no module named 'nopkg'"):
        catalog.load("nopkg.recipes:build")
    sys.modules.pop("mypkg.recipes", None)
    sys.modules.pop("mypkg", None)


@pytest.mark.parametrize("text,fragment", [
    ("x = (\n", "recipe.py:1: SyntaxError"),
    ("import no_such_module_here\n", "recipe.py:1: ModuleNotFoundError"),
    ("\n\ndef build(site):\n    return [1 / 0]\n", "recipe.py:4: ZeroDivisionError: division by zero (building for site local)"),
    ("def build(site):\n    return site.gpu.nonexistent\n", "recipe.py:2: AttributeError"),
    ("NAME = 'pytorch'\ndef build(site):\n    return []\n", "NAME 'pytorch' is a built-in recipe's"),
    ("NAME = 'Bad Name'\ndef build(site):\n    return []\n", "NAME 'Bad Name' is not lower-case"),
    ("CONTEXT = ('../etc',)\ndef build(site):\n    return []\n", "CONTEXT '../etc': must be a relative path"),
    ("FILES = {'src': 'relative'}\ndef build(site):\n    return []\n", "FILES must map paths"),
    ("FILES = {'src': '/usr/lib'}\ndef build(site):\n    return []\n", "FILES['src']: /usr/lib is a folder the image itself uses"),
    ("FILES = {'src': '/srv/x/app'}\ndef build(site):\n    return []\n", "the parent of /srv/x/app is not /, /opt or /srv"),
    ("ENV = {'A': '$(id)'}\ndef build(site):\n    return []\n", "ENV must map variable names"),
    ("WORKLOAD = {'command': ['x']}\ndef build(site):\n    return []\n", "WORKLOAD must be made with generator.api.workload"),
    ("from generator import api\nWORKLOAD = api.workload(command=['x'], unit='u')\ndef build(site):\n    return []\n",
     "give exactly one of json_key and regex"),
    ("def make(site):\n    return []\n", "defines no function build(site)"),
])
def test_broken_python_recipe_is_one_line_naming_file_and_line(tmp_path, capsys, text, fragment):
    path = write(tmp_path, text)
    rc, out, err = run_cli(capsys, "--site", "local", "--recipe", str(path), "--out", str(tmp_path / "out"))
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert fragment in err and (str(path) in err or "WORKLOAD" in err), err


def test_new_recipe_templates(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args, main in ((["new-recipe", "myapp"], "myapp/app.toml"), (["new-recipe", "pyapp", "--python"], "pyapp/recipe.py")):
        rc, out, err = run_cli(capsys, *args)
        assert rc == 0 and out.startswith(main), err
        assert (tmp_path / main).is_file() and (tmp_path / main).parent.joinpath("src/main.py").is_file()
        for site_name in ("frontier", "local"):
            s = site.load(site_name)
            for fmt in ("docker", "apptainer"):
                text = render.recipe_text(s, main, fmt)
                assert not lint_text(text, f"{site_name}/x.{fmt}", target=target_of(s))
        rc, out, err = run_cli(capsys, *args)
        assert rc == 2 and "exist (use --force to overwrite)" in err
    rc, out, err = run_cli(capsys, "new-recipe", "Bad Name")
    assert rc == 2 and "is not a valid recipe name" in err


def test_launch_runs_the_apps_workload(monkeypatch):
    monkeypatch.chdir(REPO)
    spec = "examples/trainer/app.toml"
    def flat(text: str) -> str:
        return text.replace("\\\n    ", "")

    script = flat(launch.script(site.load("frontier"), launch.Job(recipe=spec, nodes=2, account="abc123")))
    assert "python3 /opt/trainer/train.py --steps 600 --warmup 20 --threads 1" in script
    assert "#SBATCH --job-name=trainer-frontier" in script and f"--recipe {spec}" in script
    bare = flat(launch.script(site.load("local"), launch.Job(recipe=spec, bare=True)))
    assert f"{REPO}/examples/trainer/src/train.py --steps 600" in bare and "export OMP_NUM_THREADS=1" in bare
    assert "GEN_RECIPE_WORKLOADS" not in bare
    extra = flat(launch.script(site.load("local"), launch.Job(recipe=spec, workload_args=("--steps", "5"))))
    assert "--threads 1 --steps 5" in extra
    with pytest.raises(Exception, match="--workload picks a built-in workload"):
        launch.script(site.load("local"), launch.Job(recipe=spec, workload="cnn"))
