"""Kernel caches in launch scripts: a node-local folder per job for what torch.compile (Inductor, Triton) and
the GPU stack's JIT compilers (MIOpen, CUDA) write, bare and container alike, seen inside the container."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from generator.model import runtimes as model_runtimes
from generator.model import site as site_mod
from generator.run import launch, runtimes
from tests.helpers import account

SITES = sorted(set(site_mod.builtin_names().values()))


def _script(site, recipe="pytorch", **kw):
    return launch.script(site, launch.Job(recipe=recipe, account=account(site), image="img", workloads_dir="/w", **kw))


@pytest.mark.parametrize("name", SITES)
def test_every_torch_script_puts_its_kernel_caches_in_a_node_local_folder(name):
    site = site_mod.load(name)
    stack = {"rocm": "MIOPEN_USER_DB_PATH", "cuda": "CUDA_CACHE_PATH"}.get(site.gpu.stack)
    for bare in (False, True):
        text = _script(site, bare=bare)
        assert 'if [ -z "${GEN_RECIPE_KERNEL_CACHE:-}" ]; then' in text
        assert f'    GEN_RECIPE_KERNEL_CACHE="{site.host.local_tmp}/gen-recipe-cache-${{USER:-}}' in text
        for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", *([stack] if stack else [])):
            # an export, a runtime option, or the container engine's EDF (which expands ${VAR} itself)
            assert re.search(var + r'"? ?= ?"?\$\{GEN_RECIPE_KERNEL_CACHE(:-)?\}/', text), (name, bare, var)
        assert text.index("export GEN_RECIPE_KERNEL_CACHE") < text.index("TORCHINDUCTOR_CACHE_DIR")


def test_a_script_without_torch_sets_no_kernel_cache():
    assert "GEN_RECIPE_KERNEL_CACHE" not in _script(site_mod.load("frontier"), recipe="osu", workload="mpi")


def test_the_cache_folder_is_the_users_when_set_and_per_job_otherwise(tmp_path):
    text = _script(site_mod.load("local"), bare=True)
    block = text[text.index("if [ -z"):text.index("export GEN_RECIPE_KERNEL_CACHE")] + \
        "export GEN_RECIPE_KERNEL_CACHE\necho \"$GEN_RECIPE_KERNEL_CACHE\"\n"
    run = lambda env: subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True,  # noqa: E731
                                     text=True).stdout.strip()
    assert run({"USER": "ada"}) == "/tmp/gen-recipe-cache-ada"
    assert run({"USER": "ada", "GEN_RECIPE_KERNEL_CACHE": str(tmp_path)}) == str(tmp_path)
    slurm = _script(site_mod.load("local-slurm"), bare=True)
    assert '"/tmp/gen-recipe-cache-${USER:-}-${SLURM_JOB_ID:-}"' in slurm


def test_a_runtime_that_does_not_share_tmp_gets_the_folder_bound():
    local = site_mod.load("local")
    assert runtimes.cache_binds(local, "charliecloud") == ()           # ch-run shares the host's /tmp
    assert runtimes.cache_binds(local, "podman") == ("${GEN_RECIPE_KERNEL_BIND}",)   # the script's choice
    # udocker: whatever the site binds in every run (forhlr2's /tmp), a folder the user named is not among them
    assert runtimes.cache_binds(site_mod.load("forhlr2"), "udocker") == ("${GEN_RECIPE_KERNEL_BIND}",)
    assert runtimes.cache_binds(site_mod.load("perlmutter"), "podman-hpc") == ("${GEN_RECIPE_KERNEL_BIND}",)
    podman = _script(local, runtime="podman")
    assert ' -v "${GEN_RECIPE_KERNEL_BIND:-}:${GEN_RECIPE_KERNEL_BIND:-}" ' in podman
    assert "--env=TORCHINDUCTOR_CACHE_DIR=" in podman and " --userns=keep-id " in podman     # as the caller: writes there
    block = podman[podman.index("if [ -z"):podman.index("export GEN_RECIPE_KERNEL_CACHE")]
    assert "GEN_RECIPE_KERNEL_BIND=/tmp\n" in block and 'GEN_RECIPE_KERNEL_BIND="$GEN_RECIPE_KERNEL_CACHE"' in block


def test_a_cache_folder_made_by_another_user_is_refused(tmp_path):
    """The node-local folder's name is predictable: one that exists and is not the user's stops the job."""
    text = _script(site_mod.load("local"), bare=True)
    block = text[text.index("if [ -z"):text.index("export GEN_RECIPE_KERNEL_CACHE")]
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 12345, 12345) if os.geteuid() == 0 else pytest.skip("needs root to make another user's folder")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env={"GEN_RECIPE_KERNEL_CACHE": str(theirs)},
                       capture_output=True, text=True)
    assert r.returncode == 1 and "is not yours" in r.stderr
    mine = tmp_path / "mine" / "cache"
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env={"GEN_RECIPE_KERNEL_CACHE": str(mine)},
                       capture_output=True, text=True)
    assert r.returncode == 0 and oct(mine.stat().st_mode & 0o777) == "0o700"


def test_podman_binds_are_host_folders_not_anonymous_volumes():
    assert model_runtimes.oci_volume("/lustre/orion") == "/lustre/orion:/lustre/orion"
    assert model_runtimes.oci_volume("/a:/b:ro") == "/a:/b:ro"


@pytest.mark.parametrize("name", ["forhlr2", "ifca"])
def test_a_cache_folder_the_user_names_is_mounted_by_udocker_sites_that_bind_tmp(name, tmp_path):
    """forhlr2 and ifca bind /tmp in every run (host.local_tmp): a folder named in GEN_RECIPE_KERNEL_CACHE is
    mounted too (the script computed its bind and udocker never got it); the default folder needs /tmp, mounted."""
    text = _script(site_mod.load(name))
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for stub in ("mpirun", "udocker", "module"):          # each records its argv, one word a line
        (stubs / stub).write_text(f'#!/bin/sh\nprintf "%s\\n" {stub} "$@" >> "{tmp_path}/argv"\n')
        (stubs / stub).chmod(0o755)
    (tmp_path / "job.sh").write_text(text)
    for cache, mounted in ((tmp_path / "kernels", str(tmp_path / "kernels")), (None, "/tmp")):
        (tmp_path / "argv").write_text("")
        env = {"PATH": f"{stubs}:/usr/bin:/bin", "USER": "ada", "SLURM_JOB_ID": "7", "HOME": str(tmp_path)}
        env |= {"GEN_RECIPE_KERNEL_CACHE": str(cache)} if cache else {}
        r = subprocess.run(["bash", str(tmp_path / "job.sh")], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        words = (tmp_path / "argv").read_text().split("\n")
        run = words[words.index("run"):]
        assert [run[i + 1] for i, w in enumerate(run) if w == "-v"][-1] == mounted, run
        assert f"--env=TORCHINDUCTOR_CACHE_DIR={cache or '/tmp/gen-recipe-cache-ada-7'}/inductor" in run
