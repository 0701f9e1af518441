"""Numbers past float's range (10**400) and past Python's 4,300-digit limit for int() in site and app files: one
line naming the file and key, never an OverflowError or ValueError traceback (the size is checked before the float)."""

from __future__ import annotations

import pytest

from generator.errors import SiteError
from generator.model import app
from generator.model import site as site_mod
from tests.model.test_fuzz import REPO

LOCAL = (REPO / "sites" / "local.toml").read_text()
HUGE, ENORMOUS = "1" + "0" * 400, "1" + "0" * 5000


@pytest.mark.parametrize("old,new,words", [
    ('cnn = [1.0, -0.15, 0.50, "ratio"]', f'cnn = [1.0, -0.15, {HUGE}, "ratio"]', "tolerances.cnn: expected [reference"),
    ('cnn = [1.0, -0.15, 0.50, "ratio"]', f'cnn = {{ reference = 1.0, lower = -0.15, upper = {HUGE}, unit = "ratio" }}',
     "tolerances.cnn.upper: expected a finite number of at most"),
    ("cores_per_node = 2", f"cores_per_node = {HUGE}", "host.cores_per_node: expected an integer from 0 to"),
    ("cores_per_node = 2", f"cores_per_node = {ENORMOUS}", "invalid TOML: a number of thousands of digits"),
])
def test_huge_numbers_in_a_site_file_are_one_line(old, new, words):
    assert old in LOCAL
    with pytest.raises(SiteError) as exc:
        site_mod.parse(LOCAL.replace(old, new, 1), "mine.toml")
    text = str(exc.value)
    assert text.startswith("mine.toml") and words in text and "\n" not in text and len(text) < 400, text


def test_a_huge_app_tolerance_is_one_line(tmp_path):
    path = tmp_path / "app.toml"
    path.write_text(f'schema = 1\nname = "tiny"\nbase = "none"\n[run]\ncommand = ["true"]\n[workload]\n'
                    f'command = ["true"]\njson_key = "rate"\nunit = "u"\ntolerance = {HUGE}\n')
    with pytest.raises(SiteError) as exc:
        app.load(path)
    assert "workload.tolerance: expected a finite number of at most" in str(exc.value)
