"""Registers the portability suite's pytest plugin (generator/suite/plugin.py) in a checkout that is not
installed: `pytest suites/ --site=frontier`. An installed gen-recipe registers it by its `pytest11` entry
point under the same name, so it is registered once either way.

Its options and fixtures take effect for the tests under suites/ (or any session given --site).
Every test under suites/ is marked `measures` (pyproject.toml): ./scripts/test runs what measures after the
rest ran on two workers, each comparison on a CPU of its own (those marked `whole_machine` alone).
"""

from pathlib import Path

import pytest

pytest_plugins = ["generator.suite.plugin"]

SUITES = Path(__file__).resolve().parent / "suites"


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if SUITES in Path(item.path).parents:
            item.add_marker(pytest.mark.measures)
