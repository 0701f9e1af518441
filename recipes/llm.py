"""LLM serving image: Ollama (the CUG 2025 engine) and transformers on torch for the site's GPU stack."""

from __future__ import annotations

import hpccm

from generator.blocks.ollama import ollama
from generator.blocks.stack import comm_stack, payload, python_blocks, two_stage
from generator.errors import RecipeError
from generator.plan import plan
from generator.site import Site


def requirements(site: Site) -> list[str]:
    """Python packages beyond torch and mpi4py (the suite's bare twin installs the same)."""
    if not site.software.transformers:
        raise RecipeError(f"{site.path}: software.transformers is not set (the llm image needs it)")
    return [f"transformers=={site.software.transformers}"]


def build(site: Site) -> list[hpccm.Stage]:
    p = plan(site)
    sw = site.software
    keep = [*comm_stack(site, p), python_blocks(site, p, extra=requirements(site))]
    if sw.ollama:
        keep.append(ollama(version=str(sw.ollama), gpu=site.gpu.stack))
    return two_stage(site, "llm", p, build=[], keep=keep, runtime_extra=[payload()])
