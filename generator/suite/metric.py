"""The metric one run of an application's workload reported (app files' and Python recipes' `[workload]`)."""

from __future__ import annotations

import json
import math
import re

from generator.model.app import AppWorkload


def metric(w: AppWorkload, output: str) -> float | None:
    """The value one run reported in its standard output, or None."""
    if w.json_key:
        for line in reversed(output.splitlines()):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                value = json.loads(line).get(w.json_key)
            except (ValueError, AttributeError):
                continue
            number = _finite(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            if number is not None:
                return number
        return None
    found = re.findall(w.regex, output)
    if not found:
        return None
    last = found[-1]
    try:
        return _finite(float(last[0] if isinstance(last, tuple) else last))
    except ValueError:
        return None


def _finite(value: int | float) -> float | None:
    """`value` as a finite float, or None (an integer past float's range, 10**400 in a JSON line, is None too)."""
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def expected(w: AppWorkload) -> str:
    """What a run must print, for messages."""
    return (f'a JSON line with key "{w.json_key}" on standard output, e.g. {{"{w.json_key}": 123.4}}' if w.json_key
            else f"a line matching {w.regex!r} on standard output")
