"""The lint tests keep their findings cache out of the user's ~/.cache."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _lint_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("GEN_RECIPE_LINT_CACHE", str(tmp_path_factory.mktemp("lint-cache")))
    yield
    mp.undo()
