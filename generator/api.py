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

from generator.errors import RecipeError
from generator.model.app import AppWorkload as Workload, check_workload, requirements_file as _read_requirements
from generator.model.schema import Loader
from generator.model.site import Site
from generator.recipe.blocks.common import app_files as _app_files, ospackages, payload as _payload
from generator.recipe.blocks.ollama import ollama
from generator.recipe.blocks.osu import osu
from generator.recipe.blocks.stack import PythonSpec, comm_stack, mpicc, python_blocks, python_spec, two_stage as _two_stage
from generator.recipe.plan import Plan, plan

__all__ = ["Site", "Plan", "PythonSpec", "Workload", "RecipeError", "plan", "comm_stack", "python_spec", "python_env",
           "app_files", "two_stage", "ospackages", "llm_requirements", "llm_engine", "requirements_file", "workload",
           "workloads_payload", "osu_benchmarks"]


def python_env(site: Site, spec: PythonSpec):
    """The image's virtual environment /opt/venv holding `spec` (see `python_spec`), copied whole to the
    runtime stage; `python3` there is the venv's."""
    return python_blocks(site, spec)


def app_files(files: Mapping[str, str], *, commands: Sequence[str] = (), keep: Sequence[str] = ()):
    """Your files (paths relative to the recipe file, listed in CONTEXT) copied to absolute destinations
    whose parent is /, /opt or /srv; `commands`: shell lines run in the build stage after the copy;
    `keep`: more paths those commands create that the runtime stage keeps."""
    return _app_files(files=dict(files), commands=tuple(commands), keep=tuple(keep))


def two_stage(site: Site, name: str, p: Plan, *, keep: Sequence = (), build: Sequence = (),
              runtime_extra: Sequence = (), build_packages: Sequence[str] = (), runtime_packages: Sequence[str] = (),
              command: Sequence[str] = ("/bin/bash",), env: Mapping[str, str] | None = None, workdir: str = "",
              labels: Mapping[str, str] | None = None, distro_mpi4py: bool | None = None) -> list[hpccm.Stage]:
    """A build stage (the site's devel base, `build` and `keep` blocks, `build_packages`) and a runtime
    stage (the site's runtime base, `runtime_packages`, what the `keep` blocks leave behind, `runtime_extra`,
    `env`, `workdir`, `labels`, a non-root user and `command`)."""
    return _two_stage(site, name, p, build=build, keep=keep, runtime_extra=runtime_extra,
                      runtime_packages=runtime_packages, command=tuple(command), build_packages=build_packages,
                      distro_mpi4py=distro_mpi4py, env=env, workdir=workdir, app_labels=labels)


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
    loader = Loader("recipe WORKLOAD")
    w = loader.table(Workload, {k: list(v) if isinstance(v, tuple) else v for k, v in keys.items()}, "workload")
    check_workload(w, loader.fail)
    return w
