"""Every generated file is clean: hadolint at its default settings, ShellCheck, and our own rules,
for every shipped site × recipe × format (definitions against the site's Apptainer/Singularity)."""

from __future__ import annotations

import pytest

from generator.recipe import catalog
from generator.recipe.context import FORMATS
from generator.lint.fix import fix_text

from .helpers import all_sites, lint_pairs, site_sources

@pytest.mark.parametrize("site_name", all_sites())
def test_generated_files_have_no_findings(site_name):
    pairs = site_sources(site_name)
    assert len(pairs) == len(catalog.names()) * len(FORMATS)
    findings = lint_pairs(pairs)
    assert not findings, f"{len(findings)} findings in the generated files of site '{site_name}':\n" + \
        "\n".join(map(str, findings))


@pytest.mark.parametrize("site_name", all_sites())
def test_fix_leaves_generated_files_alone(site_name):
    for source, _ in site_sources(site_name):
        assert fix_text(source.text, source.kind) == (source.text, []), source.path
        assert fix_text(source.text, source.kind, unsafe=True) == (source.text, []), source.path
