"""The portability suite's options (`pytest suites/ --site=frontier`), parsed and validated once.

Options live in one group; their values are checked at configure time and kept, frozen, in
`config.stash[SUITE]` for the suite's fixtures. Bad values stop pytest with a usage error.
"""

from __future__ import annotations

import pytest

from suites.options import MODES, SUITE, WORKLOADS, SuiteOptions


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gen-recipe", "gen-recipe portability suite")
    g.addoption("--site", default="local", help="site name or path to a site TOML (default: local)")
    g.addoption("--runtime", action="append", default=[], metavar="NAME",
                help="container runtime to test (repeatable; default: the site's runtimes)")
    g.addoption("--rounds", type=int, default=None, metavar="N",
                help="bare+container process pairs per comparison (default: per workload)")
    g.addoption("--workloads", default=",".join(WORKLOADS), metavar="LIST",
                help=f"comma-separated workloads (default: {','.join(WORKLOADS)})")
    g.addoption("--tolerance", type=float, default=None, metavar="FRACTION",
                help="allowed container slowdown, e.g. 0.05, instead of the site's [tolerances]")
    g.addoption("--image", default=None, metavar="REF", help="use this prebuilt image instead of building")
    g.addoption("--mode", default=None, choices=MODES, help="MPI mode (default: the site's)")
    g.addoption("--aa-repeats", type=int, default=0, metavar="N",
                help="also repeat the A/A control N times and report its coverage (slow; e.g. 20)")


def pytest_configure(config: pytest.Config) -> None:
    from generator import site as site_mod
    from generator.errors import GenRecipeError

    def usage(message: str) -> None:
        raise pytest.UsageError(message)

    try:
        site = site_mod.load(config.getoption("site"))
    except GenRecipeError as exc:
        usage(f"--site: {exc}")
    known = {r.name for r in site.runtimes}
    for name in config.getoption("runtime"):
        if name not in known:
            usage(f"--runtime {name}: site {site.name} has {', '.join(sorted(known))}")
    workloads = tuple(w.strip() for w in config.getoption("workloads").split(",") if w.strip())
    for w in workloads:
        if w not in WORKLOADS:
            usage(f"--workloads: unknown workload '{w}' (known: {', '.join(WORKLOADS)})")
    rounds = config.getoption("rounds")
    if rounds is not None and rounds < 2:
        usage("--rounds: need at least 2 process pairs for an interval")
    tolerance = config.getoption("tolerance")
    if tolerance is not None and not 0 < tolerance < 1:
        usage("--tolerance: give a fraction between 0 and 1, e.g. 0.05 for 5%")
    if config.getoption("aa_repeats") < 0:
        usage("--aa-repeats: must be >= 0")
    config.stash[SUITE] = SuiteOptions(
        site=site, runtimes=tuple(config.getoption("runtime")), rounds=rounds, workloads=workloads,
        tolerance=tolerance, image=config.getoption("image"), mode=config.getoption("mode"),
        aa_repeats=config.getoption("aa_repeats"))
