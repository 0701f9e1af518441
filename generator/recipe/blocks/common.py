"""Blocks every recipe uses: distro packages with pins, the Python environment, the workloads
payload, the non-root user and the default command. hpccm style: each is a building block
(`Stage += block`) rendering to Docker and Apptainer through hpccm primitives; blocks that
have something for the runtime stage give it from `runtime()`.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Mapping, Sequence

import hpccm.templates.rm
from hpccm.building_blocks.base import bb_base
from hpccm.building_blocks.generic_autotools import generic_autotools
from hpccm.building_blocks.packages import packages as hpccm_packages
from hpccm.primitives.comment import comment
from hpccm.primitives.copy import copy
from hpccm.primitives.environment import environment
from hpccm.primitives.label import label
from hpccm.primitives.raw import raw
from hpccm.primitives.shell import shell

from generator.recipe.blocks.clean import PARALLEL, docker, lint_clean, noted_shell
from generator.recipe.blocks.verify import checked_block, checked_commands

VENV = "/opt/venv"
WORKLOADS_DIR = "/opt/workloads"
WHEELS_STAGING = "/opt/wheels"       # Apptainer refuses %files into /tmp and /var/tmp
CA_SECRET = "/run/secrets/ca"


class ospackages(hpccm_packages):  # noqa: N801 - hpccm naming
    """hpccm's `packages` with exact versions for the packages the site pins."""

    def __init__(self, *, packages: Sequence[str], pins: Mapping[str, str] | None = None, **kwargs) -> None:
        pins = pins or {}
        self.pinned = all(p in pins for p in packages)
        super().__init__(ospackages=[shlex.quote(f"{p}={pins[p]}" if p in pins else p) for p in packages], **kwargs)


ospackages = lint_clean(ospackages)

BUILD_TOOLS = ("bzip2", "ca-certificates", "file", "g++", "gcc", "make", "tar", "wget")


class autotools_block(bb_base):  # noqa: N801
    """Base of our source-built blocks: a comment, build packages, one hpccm generic_autotools build
    (download and its check, build, install and cleanup in one layer, installed into the linker cache;
    every download of it checked, those of `preconfigure` too) and the block's environment; runtime():
    runtime packages, the installed files and the environment."""

    def _setup(self, title: str, build_packages: Sequence[str], run_packages: Sequence[str], /, *,
               env: Mapping[str, str] | None = None, pins: Mapping[str, str] | None = None, **autotools) -> None:
        self._title, self._pins, self._env = title, pins, dict(env or {})
        self._runtime_packages = tuple(sorted(set(run_packages)))
        self._bb = checked_block(generic_autotools(parallel=PARALLEL, ldconfig=True, **autotools))
        self += comment(title)
        self += ospackages(packages=sorted({*BUILD_TOOLS, *build_packages}), pins=pins)
        self += self._bb
        if self._env:
            self += environment(variables=self._env)

    def runtime(self, _from: str = "0") -> str:
        self.rt += comment(self._title)
        if self._runtime_packages:
            self.rt += ospackages(packages=self._runtime_packages, pins=self._pins)
        self._bb.runtime(_from=_from)
        self.rt += self._bb.rt
        if self._env:
            self.rt += environment(variables=self._env)
        return str(self.rt)


class python_env(bb_base, hpccm.templates.rm):  # noqa: N801
    """A virtual environment at /opt/venv with pinned packages, copied whole to the runtime stage.

    requirements: pip requirement strings (`name==version`), installed from the default index.
    index_packages: (index URL, requirements) installed from that index (torch for a GPU stack).
    wheels: wheel files in the build context, bind-mounted (Docker) or staged with %files
        (Apptainer) — nothing of them stays in a layer.
    mpi4py: (version, mpicc) builds mpi4py from source against the container's MPI.
    app, app_wheels: an application's pins and wheel files (paths app/... in the build context), installed
        in a layer of their own after the rest.
    system_site_packages: see the distro's Python packages (distro mpi4py).
    torch_compile: torch is among them (two_stage then gives the runtime stage a compiler, Python's headers
        and the compile check).
    ca_secret: give pip the build host's CA bundle as a BuildKit secret `ca`.
    """

    def __init__(self, *, requirements: Sequence[str] = (), index_packages: Sequence[tuple[str, Sequence[str]]] = (),
                 wheels: Sequence[str] = (), mpi4py: tuple[str, str] | None = None,
                 system_site_packages: bool = False, ca_secret: bool = False, python: str = "python3",
                 app: Sequence[str] = (), app_wheels: Sequence[str] = (), torch_compile: bool = False) -> None:
        super().__init__()
        self.__python = python
        self.torch_compile = torch_compile       # torch is in it: two_stage adds what compiling needs at run time
        pip = f"{VENV}/bin/pip --no-cache-dir install"
        mounts, env = [], ""
        if ca_secret and docker():
            mounts.append("--mount=type=secret,id=ca")
            env = f"PIP_CERT={CA_SECRET} "
        wheel_dir = "/wheels" if docker() else WHEELS_STAGING
        wheel_paths = [posixpath.join(wheel_dir, posixpath.basename(w)) for w in wheels]
        q = shlex.quote     # site values: validated at load, quoted here all the same
        base_mounts = [*mounts, "--mount=type=bind,source=wheels,target=/wheels"] if wheels and docker() else mounts

        self += comment("Python environment (" + VENV + ")")
        if wheels and not docker():
            self += context_note()
            self += copy(files={w: p for w, p in zip(wheels, wheel_paths)})
        venv_flags = " --system-site-packages" if system_site_packages else ""
        commands = [f"{q(python)} -m venv{venv_flags} {VENV}"]
        for index, reqs in index_packages:
            commands.append(f"{env}{pip} --index-url {q(index)} {' '.join(map(q, reqs))}")
        if wheel_paths or requirements:
            commands.append(f"{env}{pip} {' '.join(map(q, wheel_paths + list(requirements)))}")
        if mpi4py:
            version, mpicc = mpi4py
            commands.append(f"{env}MPICC={q(mpicc)} {pip} --no-binary=mpi4py {q(f'mpi4py=={version}')}")
        if wheels and not docker():
            commands.append(self.cleanup_step(items=[WHEELS_STAGING]))
        self += shell(commands=commands, _arguments=" ".join(base_mounts)) if base_mounts else shell(commands=commands)
        if app or app_wheels:   # a layer of their own: changing them keeps the one above, which other images share
            self += comment("Python packages beyond the shared stack (their own layer: images of the same stack share the "
                            "one above)")
            app_mounts = [*mounts, "--mount=type=bind,source=app,target=/app-wheels"] if app_wheels and docker() else mounts
            staged = [posixpath.join("/app-wheels", w.removeprefix("app/")) if docker() else
                      posixpath.join(WHEELS_STAGING, posixpath.basename(w)) for w in app_wheels]
            if app_wheels and not docker():       # staged like the site's wheel (python_env above), then removed
                self += context_note()
                self += copy(files=dict(zip(app_wheels, staged)))
            app_cmd = [f"{env}{pip} {' '.join(map(q, [*staged, *app]))}"]
            if app_wheels and not docker():
                app_cmd.append(self.cleanup_step(items=[WHEELS_STAGING]))
            self += shell(commands=app_cmd, _arguments=" ".join(app_mounts)) if app_mounts else shell(commands=app_cmd)
        self += environment(variables={"PATH": f"{VENV}/bin:$PATH", "VIRTUAL_ENV": VENV})

    def runtime(self, _from: str = "0") -> str:
        self.rt += comment("Python environment")
        self.rt += copy(_from=_from, src=VENV, dest=VENV)
        self.rt += environment(variables={"PATH": f"{VENV}/bin:$PATH", "VIRTUAL_ENV": VENV})
        return str(self.rt)


python_env = lint_clean(python_env)


class payload(bb_base):  # noqa: N801
    """The workloads package (workloads/ in the build context), importable as `workloads`."""

    def __init__(self, *, src: str = "workloads") -> None:
        super().__init__()
        self += comment("Workloads (python -m workloads.<name>)")
        self += context_note()
        self += copy(src=src, dest=posixpath.join(WORKLOADS_DIR, "workloads"))
        self += environment(variables={"PYTHONPATH": WORKLOADS_DIR})


def context_note() -> list:
    """Before a copy from the build context in a definition: its relative sources are read from the folder
    `apptainer build` runs in (lint AP020), which the file's header names."""
    return [] if docker() else [comment("Relative sources: the build context the header names", reformat=False),
                                comment("gen-recipe: ignore=AP020", reformat=False)]


class app_files(bb_base):  # noqa: N801
    """An application's own files and build steps (generator.model.app, and Python recipes through generator.api).

    files: {path in the build context's app/ folder: absolute destination in the image}; each destination is
        a new file or folder whose parent exists in every base image, so Docker's COPY and Apptainer's
        %files (cp -r) put the same tree there.
    commands: shell lines run in the build stage after the copy (the recipe author's own code; a wget in them is
        checked like the blocks' own downloads).
    keep: further paths those commands create that the runtime stage keeps (with every destination).
    """

    def __init__(self, *, files: Mapping[str, str], commands: Sequence[str] = (), keep: Sequence[str] = ()) -> None:
        super().__init__()
        self.__kept = tuple(dict.fromkeys([*files.values(), *keep]))
        self += comment("Application files")
        if files:
            self += context_note()
        for src, dest in files.items():
            self += copy(src=posixpath.join("app", src), dest=dest)
        if commands:
            self += comment("Application build steps")
            self += noted_shell(commands=checked_commands(commands))

    def runtime(self, _from: str = "0") -> str:
        self.rt += comment("Application files")
        for path in self.__kept:
            self.rt += copy(_from=_from, src=path, dest=path)
        return str(self.rt)


def _quoted(value: str) -> str:
    """A value of the `value` kind (no quotes, backslashes or $) in double quotes: the same text in a
    Dockerfile ENV/LABEL and in a shell export."""
    return '"' + value + '"'


class finish(bb_base):  # noqa: N801
    """End of the runtime stage: labels, environment, working directory, a non-root user (Docker) and
    the default command. `env`, `workdir`, `app_labels` are an application's (values of the `value` kind)."""

    def __init__(self, *, labels: Mapping[str, str], user: str, command: Sequence[str],
                 env: Mapping[str, str] | None = None, workdir: str = "",
                 app_labels: Mapping[str, str] | None = None) -> None:
        super().__init__()
        if docker():
            # Apptainer runs as the calling user; Docker-style runtimes get an unprivileged one. Made before the
            # labels: one site's image and another's that differ only in labels then share every layer.
            self += shell(commands=[f"useradd --create-home --uid 10001 --user-group {shlex.quote(user)}"])
        self += label(metadata=dict(sorted(labels.items())))
        if app_labels:
            self += raw(docker="LABEL " + " \\\n    ".join(f"{k}={_quoted(v)}" for k, v in app_labels.items()),
                        singularity="%labels\n" + "\n".join(f"    {k} {v}" for k, v in app_labels.items()))
        if env:
            self += raw(docker="ENV " + " \\\n    ".join(f"{k}={_quoted(v)}" for k, v in env.items()),
                        singularity="%environment\n" + "\n".join(f"    export {k}={_quoted(v)}" for k, v in env.items()))
        if workdir and docker():
            self += raw(docker=f"WORKDIR {workdir}")
        if docker():
            self += raw(docker="USER 10001:10001")
        cd = f"cd {shlex.quote(workdir)} || exit 1\n    " if workdir else ""
        self += raw(docker="CMD " + json.dumps(list(command)),
                    singularity="%runscript\n    " + cd + "exec " + shlex.join(command) + ' "$@"')
