"""`gen-recipe --explain`: which site fact decided which part of the recipes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from generator.errors import shown
from generator.recipe import catalog
from generator.recipe.plan import plan
from generator.model.site import Facts, Site


def fact(site: Site, key: str) -> tuple[object, Facts | None]:
    """The value at dotted `key` and the fact table holding it (for its sources)."""
    obj: object = site
    table = None
    for part in key.split("."):
        if isinstance(obj, Facts):
            table = obj
        obj = obj.get(part) if hasattr(obj, "keys") else getattr(obj, part, None)
    return obj, table


def _show(value: object) -> str:
    if value is None or value == "" or value == ():
        return "(not set)"
    if dataclasses.is_dataclass(value):
        return "{ " + ", ".join(f"{f.name} = {_show(getattr(value, f.name))}" for f in dataclasses.fields(value)) + " }"
    if hasattr(value, "keys"):
        return "{ " + ", ".join(f"{k} = {_show(v)}" for k, v in value.items()) + " }"
    return json.dumps(value if not isinstance(value, tuple) else list(value))


def explain(site: Site, recipes: Sequence[str]) -> str:
    p = plan(site)
    lines = [f"site {site.name} ({site.path}): {site.description}",
             f"recipes: {', '.join(f'{r} ({catalog.describe(catalog.load(r))})' for r in recipes)}", ""]
    for d in p.decisions:
        lines.append(f"{d.what}: {d.value}")
        lines.append(f"    because {d.because}")
        for key in d.facts:
            value, table = fact(site, key)
            if value is None or value == "" or value == ():
                continue
            tags = list(table.sources) if table else []
            field = key.rsplit(".", 1)[-1]
            note = " (unverified)" if table and field in table.unverified else ""
            src = f"  [{', '.join(tags)}]" if tags else ""
            lines.append(f"    {key} = {_show(value)}{note}{src}")
    used = sorted({t for d in p.decisions for k in d.facts for t in ((fact(site, k)[1] or Facts()).sources)})
    if used:
        lines += ["", "sources:"] + [f"  [{t}] {site.sources[t]}" for t in used]
    return "\n".join(shown(line) for line in lines)     # a docstring's or a site file's text: escaped
