"""First of all: on the site's own machine, do the site file's facts still hold? A container built
for Open MPI 4.1.0 on a host that now runs 4.1.5 fails in ways the overhead numbers cannot explain,
so a mismatch that breaks the container is reported here first, with the fix."""

from __future__ import annotations

from generator.detect import machine as detect


def test_site_facts_match_this_machine(site, on_site):
    differences = detect.compare(site, detect.detect())
    breaking = [d.message for d in differences if d.severity == "breaks"]
    assert not breaking, "the site file is stale for this machine:\n" + "\n".join(breaking)
