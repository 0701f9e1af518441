"""The example application (examples/trainer): golden files for two sites, lint-clean for every site,
the app file and the Python variant alike, byte-identical across runs.

Regenerate after an intended change with:  UPDATE_GOLDEN=1 ./scripts/test tests/recipe/test_app_golden.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.recipe import catalog, render
from generator.model import site
from generator.lint.engine import lint_text
from generator.lint.model import target_of



REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden_apps"
SPECS = ("examples/trainer/app.toml", "examples/trainer/recipe.py")
GOLDEN_SITES = ("frontier", "local")
ALL_SITES = sorted(set(site.builtin_names().values()))


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)        # the header names the recipe as given: a path relative to the repository


@pytest.mark.parametrize("site_name", GOLDEN_SITES)
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("fmt", ("docker", "apptainer"))
def test_golden(site_name, spec, fmt, golden):
    s = site.load(site_name)
    golden(GOLDEN / render.relpath(s, spec, fmt), render.recipe_text(s, spec, fmt))


@pytest.mark.parametrize("site_name", ALL_SITES)
def test_every_site_lints_clean(site_name):
    s = site.load(site_name)
    for spec in SPECS:
        for fmt in ("docker", "apptainer"):
            text = render.recipe_text(s, spec, fmt)
            assert text == render.recipe_text(s, spec, fmt)          # deterministic
            findings = lint_text(text, f"{site_name}/{catalog.load(spec).name}.{fmt}", target=target_of(s))
            assert not findings, "\n".join(str(f) for f in findings)


def test_both_variants_build_the_same_stack():
    """The Python variant differs from the app file only where it says so: name, thread count, header."""
    s = site.load("frontier")
    toml = render.recipe_text(s, SPECS[0], "docker").splitlines()
    py = render.recipe_text(s, SPECS[1], "docker").splitlines()
    differing = [(a, b) for a, b in zip(toml, py) if a != b]
    assert len(toml) == len(py)
    assert all("trainer" in a or "--threads" in b for a, b in differing), differing
    assert 'CMD ["python3", "/opt/trainer/train.py", "--threads", "1"]' in py


def test_app_image_layers_reuse_the_stack():
    """The app's pins (and the llm recipe's transformers) are a layer after the site's Python stack, which is the
    pytorch recipe's own: the builder reuses its layers."""
    s = site.load("local")
    builtin = render.recipe_text(s, "pytorch", "docker")
    for other in (SPECS[0], "llm"):
        text = render.recipe_text(s, other, "docker")
        stack = text.split("# Python packages beyond the shared stack")[0].split("FROM ", 1)[1]
        assert stack in builtin, other
    app = render.recipe_text(s, SPECS[0], "docker")
    assert "PIP_CERT=/run/secrets/ca /opt/venv/bin/pip --no-cache-dir install tqdm==4.67.1\n" in app
    assert "COPY app/src /opt/trainer" in app and "COPY --from=devel /opt/trainer /opt/trainer" in app
    assert 'ENV OMP_NUM_THREADS="1"' in app and "WORKDIR /opt/trainer" in app


def test_generate_cli_writes_the_app(tmp_path):
    from generator.cli import main as cli

    assert cli.main(["--site", "lumi", "--recipe", SPECS[0], "--recipe", SPECS[1], "--out", str(tmp_path), "-q"]) == 0
    assert sorted(p.name for p in (tmp_path / "lumi").iterdir()) == ["trainer-py.Dockerfile", "trainer-py.def",
                                                                     "trainer.Dockerfile", "trainer.def"]
    assert cli.main(["--site", "lumi", "--recipe", SPECS[0], "--out", str(tmp_path), "--check", "-q"]) == 0
