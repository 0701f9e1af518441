"""Fixtures of the portability suite: the site, the runtimes to test, the images, the fork servers.

Anything missing here (a runtime binary, a builder, a GPU, an MPI launcher) turns the tests that need
it into skips whose reason names what is missing and the flag that would change it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from suites.options import SUITE, SuiteOptions
from generator import build, runtimes
from suites import harness
from generator.site import Site, Tolerance

# The binary each runtime needs on this machine; the suite drives the runtimes it has builders for.
BINARY = {"apptainer": "apptainer", "singularity": "singularity", "charliecloud": "ch-run", "udocker": "udocker",
          "podman": "podman", "podman-hpc": "podman-hpc", "sarus": "sarus", "ce": "srun", "docker": "docker"}
# Runtimes whose images the suite can make from a podman build on this machine (build.runtime_image).
LOCAL_IMAGES = ("podman", "charliecloud", "udocker")
RECIPE_OF = {"cnn": "pytorch", "gan3d": "pytorch", "mnist": "pytorch", "resnet": "pytorch", "mpi": "pytorch",
             "llm": "llm"}


@pytest.fixture(scope="session")
def suite(pytestconfig) -> SuiteOptions:
    return pytestconfig.stash[SUITE]


@pytest.fixture(scope="session")
def site(suite) -> Site:
    return suite.site


def runtimes_under_test(options: SuiteOptions) -> tuple[str, ...]:
    return options.runtimes or tuple(r.name for r in options.site.runtimes)


def tolerance(options: SuiteOptions, key: str) -> Tolerance:
    """The site's tolerance for `key`, or --tolerance, or none (skip: nothing to decide against)."""
    if options.tolerance is not None:
        return Tolerance(reference=1.0, lower=-options.tolerance, upper=options.tolerance, unit="ratio")
    tol = options.site.tolerances.get(key)
    if tol is None:
        pytest.skip(f"site {options.site.name} has no tolerance for {key} (add [tolerances] {key} to "
                    f"{options.site.path}, or pass --tolerance)")
    return tol


def need_runtime(options: SuiteOptions, runtime: str) -> None:
    exe = BINARY[runtime]
    if not shutil.which(exe):
        pytest.skip(f"{exe} not found on PATH (needed by --site={options.site.name} --runtime {runtime}; "
                    f"choose another with --runtime)")
    if runtime not in LOCAL_IMAGES and not options.image:
        pytest.skip(f"no image for {runtime}: pass a prebuilt one with --image (e.g. a SIF for apptainer)")


class Images:
    """Images built once per session (deterministic tags: a rebuild is a no-op) and converted per runtime."""

    def __init__(self, options: SuiteOptions) -> None:
        self.options = options
        self.built: dict[str, str] = {}

    def ref(self, recipe: str) -> str:
        if self.options.image:
            return self.options.image
        if recipe not in self.built:
            if not shutil.which("podman"):
                pytest.skip(f"podman not found on PATH: cannot build the {recipe} image for "
                            f"--site={self.options.site.name} (or pass --image)")
            site = self.options.site
            if site.base.devel.startswith("localhost/"):
                build.ensure_base_image(site)
            self.built[recipe] = build.build_image(site, recipe).ref
        return self.built[recipe]

    def for_runtime(self, recipe: str, runtime: str) -> str:
        ref = self.ref(recipe)
        if self.options.image and runtime not in LOCAL_IMAGES:
            return ref
        return build.runtime_image(self.options.site, ref, runtime)


@pytest.fixture(scope="session")
def images(suite) -> Images:
    return Images(suite)


class BarePythons:
    """The bare twins of the images' Python environments, made once per session (see harness.bare_python)."""

    def __init__(self, site: Site) -> None:
        self.site, self.made = site, {}

    def __call__(self, recipe: str) -> str:
        if recipe not in self.made:
            self.made[recipe] = harness.bare_python(self.site, recipe)
        return self.made[recipe]


@pytest.fixture(scope="session")
def bare_python(site) -> BarePythons:
    return BarePythons(site)


def run_options(options: SuiteOptions, runtime: str, *, mpi: bool = False, env=None) -> runtimes.Options:
    site = options.site
    mode = options.mode or site.container.mpi_mode
    if mode not in site.runtime(runtime).mpi_modes:
        pytest.skip(f"{runtime} at site {site.name} does not support {mode} mode (--mode "
                    f"{'/'.join(site.runtime(runtime).mpi_modes)})")
    return runtimes.Options(mode=mode, gpus=0, mpi=mpi, env=dict(env or {}), allow_root=os.geteuid() == 0,
                            interactive=True)


@pytest.fixture(scope="session")
def cpu_pin() -> dict[str, str]:
    """Pin both sides' fork servers to the same CPU (the last one); the other takes the machine's noise."""
    cpus = sorted(os.sched_getaffinity(0))
    return {"WORKLOADS_CPUS": str(cpus[-1])} if len(cpus) > 1 else {}


VERDICTS = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def verdicts(pytestconfig) -> list:
    return pytestconfig.stash.setdefault(VERDICTS, [])


def pytest_terminal_summary(terminalreporter, config) -> None:
    found = config.stash.get(VERDICTS, [])
    if found:
        terminalreporter.section("container overhead")
        for v in found:
            terminalreporter.write_line(f"{v.outcome.upper():<13} {v.message}")
