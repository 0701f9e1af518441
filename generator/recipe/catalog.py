"""Recipes: the built-in ones (modules of the top-level `recipes` package) and the user's own.

`load(spec)` resolves what `--recipe` was given into one `Recipe`:

- a built-in name (`pytorch`, `llm`, `osu`);
- an app file (`./myapp/app.toml`: `generator.model.app`, built by `recipes/_app.py`);
- a Python recipe file (`./myapp/recipe.py`, or `./recipe.py:function`);
- an importable `module:function` (`mypkg.recipes:gpu_image`).

A Python recipe is imported (importlib), never exec'd; `generator.api` documents what it defines. An
error raised while importing it or building its stages names its file and line.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import hpccm

import recipes as _recipes_pkg
from recipes import _app as app_recipe

from generator.files import read_bytes
from generator.errors import UNPRINTABLE, RecipeError, UsageError, did_you_mean, shown
from generator.model import app as app_model
from generator.model.schema import KINDS


@dataclass(frozen=True)
class Recipe:
    name: str                              # images <name>-<site>, files <site>/<name>.Dockerfile
    spec: str                              # as given to --recipe
    description: str
    build: Callable                        # build(site) -> list[hpccm.Stage]
    python: Callable                       # python(site) -> PythonSpec | None: the bare twin's environment
    source: str = ""                       # the user's file ("" for built-in recipes)
    folder: Path | None = None             # where `context` paths are relative to
    context: tuple[str, ...] = ()          # paths copied to app/ in the build context
    files: Mapping[str, str] = field(default_factory=dict)    # context path → destination in the image
    env: Mapping[str, str] = field(default_factory=dict)      # the application's environment
    workdir: str = ""                      # its working directory in the image
    workload: app_model.AppWorkload | None = None   # what the suite measures
    payload: bool = False                  # the build context carries the workloads package

    @property
    def builtin(self) -> bool:
        return not self.source

    def local(self, words) -> tuple[str, ...]:
        """`words` with image paths under a FILES destination turned into the local copies they come from
        (a whole word, or after the '=' of --flag=PATH): a bare run uses the user's own files."""
        def one(word: str) -> str:
            for src, dest in self.files.items():
                if word == dest or word.startswith(dest + "/"):
                    return str((self.folder / src).absolute()) + word[len(dest):]
            return word

        out = []
        for word in words:
            flag, eq, value = word.partition("=")
            out.append(f"{flag}={one(value)}" if eq and flag.startswith("-") else one(word))
        return tuple(out)


def names() -> list[str]:
    """The built-in recipe names, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(_recipes_pkg.__path__)
                  if not m.ispkg and not m.name.startswith("_"))


def describe(recipe: Recipe | ModuleType) -> str:
    """The first line of a recipe's description (a module's docstring), as it came: escape it to print it."""
    doc = recipe.description if isinstance(recipe, Recipe) else getattr(recipe, "__doc__", None)
    return doc.strip().splitlines()[0] if isinstance(doc, str) and doc.strip() else ""


def load(spec: str | Recipe) -> Recipe:
    """Resolve `spec` (see the module docstring); bad specs and broken recipes raise one-line errors."""
    if isinstance(spec, Recipe):
        return spec
    if len(spec) > 4096 or UNPRINTABLE.search(spec) or not spec:
        raise UsageError(f"{ascii(spec)[:60]} is not a recipe name or path")
    if spec.endswith(".toml"):
        return _app(spec)
    if spec in names():
        return _builtin(spec)
    file, _, function = spec.rpartition(":") if re.search(r":[A-Za-z_]\w*$", spec) else (spec, "", "")
    inside = [f"{file.rstrip('/')}/{n}" for n in ("app.toml", "recipe.py") if (Path(file) / n).is_file()]
    if inside:
        raise UsageError(f"{shown(file)} is a folder: give the recipe in it, e.g. --recipe {shown(inside[0])}")
    if file.endswith(".py") or "/" in file:
        return _python_file(spec, Path(file), function or "build")
    if function and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", file):
        return _python_module(spec, file, function)
    hint = f"; a file {spec} is here: say ./{spec}" if Path(spec).is_file() else ""
    raise UsageError(f"unknown recipe '{spec}' ({did_you_mean(spec, names())}){hint}; give a built-in name "
                     "(gen-recipe --list-recipes), an app file (app.toml), a Python recipe (recipe.py) or module:function")


def load_all(specs) -> list[Recipe]:
    """`load` for each spec; two different recipes with one name (they would write one file) are refused."""
    recipes: dict[str, Recipe] = {}
    for spec in specs:
        r = load(spec)
        other = recipes.setdefault(r.name, r)
        if other.spec != r.spec:
            raise UsageError(f"--recipe {shown(other.spec)} and --recipe {shown(r.spec)} are both named '{r.name}' "
                             "(their files would overwrite each other): give each recipe its own NAME / name")
    return list(recipes.values())


def _builtin(name: str) -> Recipe:
    module = importlib.import_module(f"{_recipes_pkg.__name__}.{name}")
    return Recipe(name=name, spec=name, description=describe(module), build=module.build, python=module.python,
                  payload=True)


def _app(spec: str) -> Recipe:
    a = app_model.load(spec, reserved=tuple(names()))
    context = tuple(dict.fromkeys([*a.files, *a.python.wheels]))
    return Recipe(name=a.name, spec=spec, description=a.description or f"application {a.name} ({a.base} stack)",
                  build=lambda site: app_recipe.stages(a, site), python=lambda site: app_recipe.python_spec(a, site),
                  source=a.path, folder=a.folder, context=context, files=dict(a.files), env=dict(a.run.env),
                  workdir=a.run.workdir, workload=a.workload)


def _python_file(spec: str, path: Path, function: str) -> Recipe:
    data = read_bytes(path, "Python recipe")        # a regular file of bounded size: a FIFO cannot block
    key = hashlib.sha256(str(path.resolve()).encode() + b"\0" + data).hexdigest()[:16]
    module_name = f"_gen_recipe_user_{key}"
    module = sys.modules.get(module_name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise UsageError(f"{path}: not a Python recipe (name it .py)")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)      # the import system's own loading: an import
        except (Exception, SystemExit) as exc:          # noqa: BLE001 - any error of the user's module; sys.exit too
            del sys.modules[module_name]
            raise user_error(exc, str(path), "importing it") from None
    return _from_module(spec, module, function, str(path), path.stem)


def _python_module(spec: str, module_name: str, function: str) -> Recipe:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(f"--recipe {spec}: no module named {exc.name!r} (is its folder on PYTHONPATH?)") from None
        raise user_error(exc, module_name, "importing it") from None
    except Exception as exc:                             # noqa: BLE001
        raise user_error(exc, module_name, "importing it") from None
    return _from_module(spec, module, function, getattr(module, "__file__", None) or module_name,
                        module_name.rsplit(".", 1)[-1])


def _from_module(spec: str, module: ModuleType, function: str, source: str, default_name: str) -> Recipe:
    build = getattr(module, function, None)
    if not callable(build):
        raise UsageError(f"{source}: defines no function {function}(site) (a recipe's build function)")
    name = getattr(module, "NAME", default_name.lower().replace("_", "-"))
    if not isinstance(name, str) or not KINDS["name"][0].fullmatch(name):
        raise UsageError(f"{source}: NAME {ascii(name)[:40]} is not {KINDS['name'][1]} (set NAME = \"myapp\")")
    if name in names():
        raise UsageError(f"{source}: NAME '{name}' is a built-in recipe's (set NAME to another)")
    folder = Path(source).parent
    files, env, workdir = getattr(module, "FILES", {}), getattr(module, "ENV", {}), getattr(module, "WORKDIR", "")
    context = getattr(module, "CONTEXT", ())
    if not isinstance(context, (tuple, list)) or not all(isinstance(c, str) for c in context):
        raise UsageError(f"{source}: CONTEXT must be a tuple of paths relative to the recipe, e.g. (\"src\",)")
    if not isinstance(files, Mapping) or not all(isinstance(k, str) and isinstance(v, str) and
                                                 KINDS["imgpath"][0].fullmatch(v) for k, v in files.items()):
        raise UsageError(f"{source}: FILES must map paths relative to the recipe to absolute image paths, "
                         "e.g. {\"src\": \"/opt/app\"}")
    if not isinstance(env, Mapping) or not all(isinstance(k, str) and KINDS["env"][0].fullmatch(k) and isinstance(v, str)
                                               and KINDS["value"][0].fullmatch(v) for k, v in env.items()):
        raise UsageError(f"{source}: ENV must map variable names to values of {KINDS['value'][1]}")
    if not isinstance(workdir, str) or (workdir and not KINDS["imgpath"][0].fullmatch(workdir)):
        raise UsageError(f"{source}: WORKDIR must be an absolute path in the image, e.g. \"/opt/app\"")
    def refuse(key: str, problem: str, hint: str):
        raise UsageError(f"{source}: {key}: {problem} ({hint})")
    for rel, dest in files.items():       # the destinations app files may use, checked alike
        app_model.check_dest(dest, f"FILES[{rel!r}]", refuse)
    for rel in dict.fromkeys([*files, *context]):      # named by the attribute the user set
        check_local(folder, rel, f"{source}: " + (f"FILES[{rel!r}]" if rel in files else f"CONTEXT {rel!r}"))
    context = tuple(dict.fromkeys([*files, *context]))
    workload = getattr(module, "WORKLOAD", None)
    if workload is not None and not isinstance(workload, app_model.AppWorkload):
        raise UsageError(f"{source}: WORKLOAD must be made with generator.api.workload(...)")
    if workload is not None:            # made directly as a dataclass, it skipped the checks: made again
        workload = app_model.checked_workload(vars(workload), f"{source}: WORKLOAD")
    python = getattr(module, "python", None)
    return Recipe(name=name, spec=spec, description=describe(module) or f"recipe {name} ({source})",
                  build=_guarded(_stages(build, source, function), source), python=_guarded(python, source) if callable(python) else _no_python,
                  source=source, folder=folder, context=context, files=dict(files), env=dict(env), workdir=workdir,
                  workload=workload)


def _no_python(site) -> None:
    return None


def check_local(folder: Path, rel: str, where: str) -> Path:
    """A path the build context takes from the user's folder: relative, existing, inside the folder."""
    if not KINDS["relpath"][0].fullmatch(rel):
        raise UsageError(f"{where}: must be a relative path inside {shown(str(folder))} ({KINDS['relpath'][1]})")
    problem = app_model.local_problem(folder, rel, str(folder), "give a path relative to the recipe file")
    if problem:
        raise UsageError(f"{where}: {problem[0]} ({problem[1]})")
    return folder / rel


def _stages(build: Callable, source: str, function: str) -> Callable:
    """`build(site)`, refused unless it returns a non-empty list of hpccm Stages (not a garbage Dockerfile)."""
    def call(site):
        stages = build(site)
        if not isinstance(stages, list) or not stages or not all(isinstance(s, hpccm.Stage) for s in stages):
            got = f"a list of {', '.join(sorted({type(s).__name__ for s in stages}))}" if isinstance(stages, list) and stages \
                else "an empty list" if isinstance(stages, list) else type(stages).__name__
            raise RecipeError(f"{source}: {function}(site) returned {got}: build must return a list of hpccm Stages "
                              "(return api.two_stage(...))")
        return stages
    return call


def _guarded(function: Callable, source: str) -> Callable:
    """`function(site)` with any error it raises turned into a RecipeError naming the user's file and line."""
    def call(site):
        try:
            return function(site)
        except RecipeError as exc:
            raise RecipeError(str(exc) if str(exc).startswith(source) else f"{source}: {exc}") from None
        except (Exception, SystemExit) as exc:          # noqa: BLE001 - any error of the user's code; sys.exit too
            raise user_error(exc, source, f"building for site {site.name}") from None
    return call


def user_error(exc: BaseException, source: str, doing: str) -> RecipeError:
    """One line for an error in the user's recipe: file:line of its innermost frame in that file."""
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    if line is None:
        target = Path(source).resolve()
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == target]
        line = frames[-1].lineno if frames else None
    where = f"{source}:{line}" if line else source
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, SystemExit):
        what = f"it called sys.exit({exc.code!r}); a recipe returns its stages or raises an error"
    return RecipeError(f"{where}: {what} ({doing})")
