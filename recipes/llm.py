"""LLM serving image: Ollama (the CUG 2025 engine) and transformers on torch for the site's GPU stack."""

from __future__ import annotations

import hpccm

from generator import api


def python(site: api.Site) -> api.PythonSpec:
    """torch and mpi4py as the pytorch image has them (the same layer), then transformers in a layer of its own (the
    suite's bare twin installs the same)."""
    return api.python_spec(site, api.plan(site), app=api.llm_requirements(site))


def build(site: api.Site) -> list[hpccm.Stage]:
    p = api.plan(site)
    keep = [*api.comm_stack(site, p), api.python_env(site, python(site)), *api.llm_engine(site)]
    return api.two_stage(site, "llm", p, keep=keep, runtime_extra=[api.workloads_payload()], command=("python3", "-m", "workloads"))
