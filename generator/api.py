"""The public API for recipe authors: what the built-in recipes, app files and your own recipes use.

A recipe is a Python module (a file given as `--recipe ./myapp.py`, or `module:function`) with

    def build(site: Site) -> list[hpccm.Stage]       # required: the stages, for one site
    def python(site: Site) -> PythonSpec | None      # its Python environment (the suite's bare twin copies it)
    NAME = "myapp"                                   # image name <NAME>-<site> (default: the file's name)
    CONTEXT = ("src",)                               # files next to the recipe the build needs (app/ in the context)
    WORKLOAD = workload(command=[...], json_key="samples_per_s", unit="samples/s")   # what the suite measures

A typical `build`:

    p = api.plan(site)
    return api.two_stage(site, NAME, p, keep=[*api.comm_stack(site, p), api.python_env(site, python(site)),
                                              api.app_files({"src": "/opt/app"})],
                         command=["python3", "/opt/app/train.py"])

Everything a recipe needs from the site comes from `site` (a frozen `Site`: `site.gpu.stack`,
`site.mpi.flavour`, `site.software.torch`, ...) and from `plan(site)` (a frozen `Plan`: what to build
from those facts). Names here stay stable across minor releases; everything else in `generator` is
internal. docs/apps.md walks through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import hpccm

from generator.errors import RecipeError, SiteError
from generator.model.app import AppWorkload as Workload, check_dest, checked_workload, requirements_file as _read_requirements
from generator.model.schema import Loader
from generator.model.site import Site
from generator.recipe.blocks.common import app_files as _app_files, ospackages as _ospackages, payload as _payload
from generator.recipe.blocks.ollama import ollama
from generator.recipe.blocks.osu import osu
from generator.recipe.blocks.stack import (PythonSpec, comm_stack, mpicc, python_blocks, python_spec as _python_spec,
                                           two_stage as _two_stage)
from generator.recipe.plan import Plan, plan

__all__ = ["Site", "Plan", "PythonSpec", "Workload", "RecipeError", "plan", "comm_stack", "python_spec", "python_env",
           "app_files", "two_stage", "ospackages", "llm_requirements", "llm_engine", "requirements_file", "workload",
           "workloads_payload", "osu_benchmarks"]


def _fail(function: str):
    def fail(key: str, problem: str, hint: str = ""):
        raise RecipeError(f"generator.api.{function}: {key}: {problem}" + (f" ({hint})" if hint else ""))
    return fail


def _word(function: str, argument: str, kind: str, value, example: str | None = None) -> str:
    """A string a recipe gave `argument`, checked like a site value of the schema `kind` at the API's boundary: a
    RecipeError naming the function and the argument otherwise."""
    try:
        return Loader(f"generator.api.{function}").check_string(value, argument, kind, example)
    except SiteError as exc:
        raise RecipeError(str(exc)) from None


def _words(function: str, argument: str, kind: str, values, *, empty: bool = True) -> tuple[str, ...]:
    """A list of strings (see `_word`)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not (values or empty):
        _fail(function)(argument, f"expected a{'' if empty else ' non-empty'} list of strings, got {type(values).__name__}",
                        'write e.g. ["word"]')
    return tuple(_word(function, f"{argument}[{i}]", kind, v) for i, v in enumerate(values))


def _table(function: str, argument: str, keys: str, kind: str, table: Mapping[str, str] | None) -> dict[str, str]:
    """A mapping of strings: keys of the schema kind `keys`, values of `kind` (see `_word`)."""
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        _fail(function)(argument, f"expected a mapping of strings, got {type(table).__name__}", 'write e.g. {"KEY": "value"}')
    return {_word(function, f"{argument} key", keys, k): _word(function, f"{argument}.{k}", kind, v) for k, v in table.items()}


def python_spec(site: Site, p: Plan, extra: Sequence[str] = (), *, torch: bool = True, mpi4py: bool = True,
                app: Sequence[str] = (), app_wheels: Sequence[str] = ()) -> PythonSpec:
    """torch for the GPU stack (index or local wheel) unless `torch` is false, mpi4py on the container MPI unless
    `mpi4py` is false, `extra` pins (name==version), then the application's own pins (`app`) and wheel files
    (`app_wheels`, relative to the recipe and in CONTEXT)."""
    return _python_spec(site, p, _words("python_spec", "extra", "requirement", extra), torch=torch, mpi4py=mpi4py,
                        app=_words("python_spec", "app", "requirement", app),
                        app_wheels=_words("python_spec", "app_wheels", "relpath", app_wheels))


def ospackages(*, packages: Sequence[str], pins: Mapping[str, str] | None = None, **kwargs):
    """Distro packages (`pins`: exact versions for some of them), installed in the stage that holds the block."""
    return _ospackages(packages=_words("ospackages", "packages", "package", packages),
                       pins=_table("ospackages", "pins", "package", "pin", pins), **kwargs)


def python_env(site: Site, spec: PythonSpec):
    """The image's virtual environment /opt/venv holding `spec` (see `python_spec`), copied whole to the
    runtime stage; `python3` there is the venv's."""
    return python_blocks(site, spec)


def app_files(files: Mapping[str, str], *, commands: Sequence[str] = (), keep: Sequence[str] = ()):
    """Your files (paths relative to the recipe file, listed in CONTEXT) copied to absolute destinations
    whose parent is /, /opt or /srv; `commands`: shell lines run in the build stage after the copy;
    `keep`: more paths those commands create that the runtime stage keeps."""
    fail = _fail("app_files")
    files = _table("app_files", "files", "relpath", "imgpath", files)
    for src, dest in files.items():
        check_dest(dest, f"files.{src}", fail)
    keep = _words("app_files", "keep", "imgpath", keep)
    for i, dest in enumerate(keep):
        check_dest(dest, f"keep[{i}]", fail, parent_exists=False)
    return _app_files(files=files, commands=_words("app_files", "commands", "command", commands), keep=keep)


def two_stage(site: Site, name: str, p: Plan, *, keep: Sequence = (), build: Sequence = (),
              runtime_extra: Sequence = (), build_packages: Sequence[str] = (), runtime_packages: Sequence[str] = (),
              command: Sequence[str] = ("/bin/bash",), env: Mapping[str, str] | None = None, workdir: str = "",
              labels: Mapping[str, str] | None = None, distro_mpi4py: bool | None = None) -> list[hpccm.Stage]:
    """A build stage (the site's devel base, `build` and `keep` blocks, `build_packages`) and a runtime
    stage (the site's runtime base, `runtime_packages`, what the `keep` blocks leave behind, `runtime_extra`,
    `env`, `workdir`, `labels`, a non-root user and `command`). Every string is checked like a site value."""
    workdir = _word("two_stage", "workdir", "imgpath", workdir) if workdir else ""
    return _two_stage(site, _word("two_stage", "name", "name", name, "myapp"), p, build=build, keep=keep, runtime_extra=runtime_extra,
                      runtime_packages=_words("two_stage", "runtime_packages", "package", runtime_packages),
                      command=_words("two_stage", "command", "arg", command, empty=False),
                      build_packages=_words("two_stage", "build_packages", "package", build_packages),
                      distro_mpi4py=distro_mpi4py, env=_table("two_stage", "env", "env", "value", env) or None,
                      workdir=workdir, app_labels=_table("two_stage", "labels", "key", "value", labels) or None)


def workloads_payload():
    """The project's `workloads` package (python -m workloads), for the runtime stage of an image the suite
    measures with the built-in workloads (the build context carries it)."""
    return _payload()


def osu_benchmarks(site: Site, p: Plan):
    """The OSU micro-benchmarks at software.osu, built with the container MPI's compiler wrappers and the
    site's GPU stack."""
    return osu(version=str(site.software.osu), mpicc=mpicc(p), gpu=site.gpu.stack, gpu_home=p.gpu_home)


def llm_requirements(site: Site) -> list[str]:
    """The LLM stack's Python pins beyond torch (transformers at the site's version)."""
    if not site.software.transformers:
        raise RecipeError(f"{site.path}: software.transformers is not set (the llm stack needs it)")
    return [f"transformers=={site.software.transformers}"]


def llm_engine(site: Site) -> list:
    """The site's LLM serving engine (Ollama at software.ollama), or nothing when the site has none."""
    sw = site.software
    return [ollama(version=str(sw.ollama), gpu=site.gpu.stack)] if sw.ollama else []


def requirements_file(path) -> list[str]:
    """The pins of a pip requirements file (name==version lines; comments allowed), as app files read them."""
    def fail(key: str, problem: str, hint: str = ""):
        raise RecipeError(f"{path}: {problem}" + (f" ({hint})" if hint else ""))
    return _read_requirements(Path(path), fail)


def workload(**keys) -> Workload:
    """A `Workload` (what the suite measures), validated like an app file's [workload] table."""
    return checked_workload(keys, "recipe WORKLOAD")
