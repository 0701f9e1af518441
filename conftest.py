"""Registers the portability suite's pytest plugin (generator/suite/plugin.py) in a checkout that is not
installed: `pytest suites/ --site=frontier`. An installed gen-recipe registers it by its `pytest11` entry
point under the same name, so it is registered once either way.

Its options and fixtures take effect for the tests under suites/ (or any session given --site).
"""

pytest_plugins = ["generator.suite.plugin"]
