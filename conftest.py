"""Registers the portability suite's pytest plugin (generator/suite/plugin.py): `pytest suites/ --site=frontier`.

Its options and fixtures take effect for the tests under suites/ only.
"""

pytest_plugins = ["generator.suite.plugin"]
