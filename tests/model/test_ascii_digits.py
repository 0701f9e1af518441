"""Digits are ASCII digits: `\\d` matches every Unicode digit (software.ucx = "١.١٥.٠" loaded as a version), so no
pattern under generator/ uses it; every version key of a site file refuses Unicode digits."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

from generator.errors import SiteError
from generator.model import schema
from generator.model import site as site_mod
from tests.model.test_fuzz import REPO
from tests.model.test_option_lists import frontier_with


def test_no_pattern_in_generator_matches_unicode_digits():
    found = [f"{p.relative_to(REPO)}:{n}" for p in sorted((REPO / "generator").rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"(?<!\\)\\[dD]", line)]
    assert not found, f"\\d or \\D (any Unicode digit) in: {', '.join(found)}; write [0-9]"


def version_keys(cls=site_mod.Site, prefix=""):
    """Every dotted key of the site schema whose value is a Version (tables only, not arrays of tables)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = schema.is_optional(hints[f.name])[1]
        if tp is schema.Version:
            yield prefix + f.name
        elif dataclasses.is_dataclass(tp):
            yield from version_keys(tp, f"{prefix}{f.name}.")


KEYS = sorted(version_keys()) + ["images.rocm.version", "images.rocm.distro_version"]


def test_the_version_keys_are_many():
    assert {"software.ucx", "mpi.version", "gpu.version", "software.torch"} <= set(KEYS) and len(KEYS) >= 15


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", ["١.١٥.٠", "２.5.1"])
def test_a_version_in_other_digits_is_refused(key, value):
    with pytest.raises(SiteError) as err:
        site_mod.parse(frontier_with(key, value), "mine.toml")
    assert str(err.value).startswith(f"mine.toml: {key}: ") and "is not a version" in str(err.value), str(err.value)
