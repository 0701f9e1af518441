"""Images with torch run compiled PyTorch: their runtime stage carries NumPy, a C++ compiler and Python's
headers, and ends with a real torch.compile (blocks.libcheck.compile_check); images without torch do not."""

from __future__ import annotations

import pytest

from generator.model import site as site_mod
from generator.recipe import render
from generator.recipe.blocks.libcheck import COMPILE_PROBE

SITES = sorted(set(site_mod.builtin_names().values()))


def _runtime_stage(text: str, fmt: str) -> str:
    marker = "AS runtime" if fmt == "docker" else "Stage: runtime"
    assert marker in text
    return text[text.index(marker):]


@pytest.mark.parametrize("name", SITES)
@pytest.mark.parametrize("fmt", ["docker", "apptainer"])
def test_torch_images_carry_compile_support_and_check_it(name, fmt):
    site = site_mod.load(name)
    for recipe in ("pytorch", "llm"):
        if recipe == "llm" and not site.software.transformers:
            continue
        text = render.recipe_text(site, recipe, fmt)
        runtime = _runtime_stage(text, fmt)
        for package in ("g++", "python3-dev"):
            assert f"        {package}" in runtime, (name, recipe, fmt, package)
        assert f"numpy=={site.software.numpy}" in text
        assert COMPILE_PROBE in runtime
        assert runtime.index("gen-recipe-ldd") < runtime.index("torch.compile and NumPy work")   # after the ldd check


def test_an_image_without_torch_has_no_compiler_in_its_runtime_stage():
    text = render.recipe_text(site_mod.load("frontier"), "osu", "docker")
    runtime = _runtime_stage(text, "docker")
    assert "g++" not in runtime and "python3-dev" not in runtime and "torch.compile" not in runtime
