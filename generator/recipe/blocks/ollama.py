"""Ollama, the LLM server of the CUG 2025 Frontier study, from its release tarball."""

from __future__ import annotations

import hpccm.config
import hpccm.templates.rm
import hpccm.templates.tar
from hpccm.building_blocks.base import bb_base
from hpccm.common import cpu_arch
from hpccm.primitives.comment import comment
from hpccm.primitives.copy import copy
from hpccm.primitives.environment import environment
from hpccm.primitives.shell import shell

from generator.recipe.blocks.clean import lint_clean
from generator.recipe.blocks.common import ospackages
from generator.recipe.blocks.verify import download

PREFIX = "/usr/local/ollama"
ENV = {"OLLAMA_SCHED_SPREAD": "1", "OLLAMA_HOST": "127.0.0.1:11434", "PATH": f"{PREFIX}/bin:$PATH"}


class ollama(bb_base, hpccm.templates.rm, hpccm.templates.tar):  # noqa: N801
    """Ollama `version` for the CPU, or its ROCm build on AMD GPUs (the CUDA runners are in the main tarball)."""

    def __init__(self, *, version: str, gpu: str = "none") -> None:
        super().__init__()
        arch = "arm64" if hpccm.config.g_cpu_arch == cpu_arch.AARCH64 else "amd64"
        base = f"https://github.com/ollama/ollama/releases/download/v{version}"
        tarballs = [f"ollama-linux-{arch}.tgz"] + ([f"ollama-linux-{arch}-rocm.tgz"] if gpu == "rocm" else [])
        commands = [f"mkdir -p {PREFIX}"]
        for t in tarballs:
            commands += download(f"{base}/{t}", directory="/var/tmp")
            commands.append(self.untar_step(tarball=f"/var/tmp/{t}", directory=PREFIX))
        commands.append(self.cleanup_step(items=[f"/var/tmp/{t}" for t in tarballs]))
        self += comment(f"Ollama {version}" + (" (with the ROCm runners)" if gpu == "rocm" else ""))
        self += ospackages(packages=["ca-certificates", "tar", "wget"])
        self += shell(commands=commands)
        self += environment(variables=ENV)

    def runtime(self, _from: str = "0") -> str:
        self.rt += comment("Ollama")
        self.rt += copy(_from=_from, src=PREFIX, dest=PREFIX)
        self.rt += environment(variables=ENV)
        return str(self.rt)


ollama = lint_clean(ollama)
