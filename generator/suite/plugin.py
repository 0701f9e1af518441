"""The portability suite as a pytest plugin: the `pytest11` entry point of an installed gen-recipe (so
`pytest mytests/ --site=frontier` works in any test directory), and the repository's conftest.py for a
checkout that is not installed.

It owns the suite's options (`pytest suites/ --site=frontier`, validated once and kept frozen in
`config.stash`), its fixtures (the site, the images, the bare twins, the CPU pin, the verdicts), the
order of its tests (the machine check, then the static checks, then the measurements), and the one
decision every measurement depends on: **is this machine the site?** Where it is not, every test that
would build, pull or run the site's image or bare twin skips with one reason, and the static checks
run in full. The options take effect for a session that collects the repository's `suites/`, or any
session given `--site` (a user's own suite).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest


MODES = ("bind", "hybrid")
LAUNCHES = ("scheduler", "direct")
DEFAULT_PAIRS = 12
# The session's exit code when nothing failed but some comparison was `unfit` (generator.suite.fitness): the
# machine was too busy to decide it, which is neither a pass nor a fail (pytest's own codes are 0-5).
UNFIT_EXIT = 6
# Test modules in the order they run; modules not listed run after them, in pytest's order.
ORDER = ("test_machine.py", "test_static.py")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Whether this machine is the site, and why: decided once per session."""

    on_site: bool
    reason: str           # for the header; when off site, the skip reason of every runtime test


@dataclass(frozen=True, kw_only=True)
class SuiteOptions:
    site: Site                       # noqa: F821 - generator.model.site.Site, imported lazily
    runtimes: tuple[str, ...]          # empty: every runtime of the site
    rounds: int | None                 # process pairs per comparison (None: the suite's default)
    workloads: tuple[str, ...]
    recipe: object                     # generator.recipe.catalog.Recipe of --recipe, or None
    tolerance: float | None            # allowed slowdown as a fraction, overriding the site's
    image: str | None
    mode: str | None
    aa_repeats: int
    on_site: bool                      # --on-site: the user says this machine is the site
    launch: str = "direct"             # scheduler: jobs and job steps (test_scheduler.py); direct: on this node
    sbatch_args: tuple[str, ...] = ()  # --sbatch-arg: for the suite's sbatch/salloc (account, partition, time)
    rehearse: bool = False             # --rehearse: the site's scheduler rehearsed on this machine (test_rehearsal.py)
    certify: str | None = None         # --certify KEY: sign the run's verdicts about --image at the end
    neighbours: bool = False           # --neighbours: every runtime beside busy neighbours (test_busy.py), not one case


@dataclass(frozen=True)
class Note:
    """A line for the summary beside the verdicts (e.g. a scaling efficiency): no verdict of its own."""

    message: str
    outcome: str = "info"


SUITE = pytest.StashKey[SuiteOptions]()
PLACEMENT = pytest.StashKey[Placement]()
VERDICTS = pytest.StashKey[list]()
CERTIFIED = pytest.StashKey[list]()     # what --certify did, for the summary
STARTED = pytest.StashKey[float]()      # when the session began: --certify signs only results written since
SENT = pytest.StashKey[int]()      # how many of a worker's VERDICTS went out with reports


# -- options -----------------------------------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gen-recipe", "gen-recipe portability suite (pytest suites/ ...)")
    g.addoption("--site", default=None, help="site name or path to a site TOML (default: local)")
    g.addoption("--runtime", action="append", default=[], metavar="NAME",
                help="container runtime to test (repeatable; default: the site's runtimes)")
    g.addoption("--rounds", type=int, default=None, metavar="N",
                help="a fixed number of bare+container process pairs per comparison (default: adaptive, "
                     "pairs until the verdict decides)")
    g.addoption("--workloads", default=None, metavar="LIST",
                help="comma-separated built-in workloads (default: all of them; none with --recipe)")
    g.addoption("--recipe", default=None, metavar="APP",
                help="your application: an app file (app.toml) or Python recipe whose workload is measured "
                     "bare vs container (docs/apps.md)")
    g.addoption("--tolerance", type=float, default=None, metavar="FRACTION",
                help="allowed container slowdown, e.g. 0.05, instead of the site's [tolerances]")
    g.addoption("--image", default=None, metavar="REF",
                help="use this prebuilt image instead of building (implies --on-site)")
    g.addoption("--on-site", action="store_true",
                help="this machine is the site: build and run even where detection says otherwise")
    g.addoption("--mode", default=None, choices=MODES, help="MPI mode (default: the site's)")
    g.addoption("--launch", default=None, choices=LAUNCHES,
                help="scheduler: run the comparisons as jobs and job steps through the site's scheduler (default "
                     "for a site with a scheduler, outside an allocation); direct: on this node (default elsewhere)")
    g.addoption("--sbatch-arg", action="append", default=[], metavar="--NAME=VALUE",
                help="an option for the suite's sbatch/salloc, e.g. --sbatch-arg=--account=abc123 (repeatable)")
    g.addoption("--rehearse", action="store_true",
                help="before you queue: rehearse the site's scheduler here (as root: gen-recipe minicluster up "
                     "--shape SITE) and submit every launch script as the site would get it; measures nothing")
    g.addoption("--certify", default=None, metavar="KEY",
                help="at the end, sign the verdicts about --image with KEY (gen-recipe keygen) and attach them to it in "
                     "its registry, or write them beside the image file (needs --image and --benchmark-json)")
    g.addoption("--aa-repeats", type=int, default=0, metavar="N",
                help="also repeat the A/A control N times and report its coverage (slow; e.g. 20)")
    g.addoption("--neighbours", action="store_true",
                help="compare every runtime beside busy neighbours on every CPU, as bare processes and as containers "
                     "(slow: 2 comparisons per runtime; by default only podman beside podman containers)")


def _in_suite(config: pytest.Config) -> bool:
    """Is this session a suite? It is given --site, or collects the repository's suites/ (the options are
    the suite's; `pytest tests` ignores them)."""
    if config.getoption("site") is not None:
        return True
    suites = config.rootpath / "suites"
    paths = [Path(a.split("::")[0]).resolve() for a in config.args] or [Path.cwd()]
    return any(p == suites or suites in p.parents for p in paths)


def options_from(config: pytest.Config) -> SuiteOptions:
    """The validated options; bad values stop pytest with a one-line usage error."""
    from generator.model import site as site_mod
    from generator.errors import GenRecipeError

    def usage(message: str):
        raise pytest.UsageError(message)

    try:
        site = site_mod.load(config.getoption("site") or "local")
    except GenRecipeError as exc:
        usage(f"--site: {exc}")
    known = {r.name for r in site.runtimes}
    for name in config.getoption("runtime"):
        if name not in known:
            usage(f"--runtime {name}: site {site.name} has {', '.join(sorted(known))}")
    recipe = None
    if config.getoption("recipe"):
        from generator.recipe import catalog
        try:
            recipe = catalog.load(config.getoption("recipe"))
        except GenRecipeError as exc:
            usage(f"--recipe: {exc}")
    given = config.getoption("workloads")
    from workloads.registry import NAMES as WORKLOADS

    given = ("" if recipe else ",".join(WORKLOADS)) if given is None else given
    workloads = tuple(w.strip() for w in given.split(",") if w.strip())
    for w in workloads:
        if w not in WORKLOADS:
            usage(f"--workloads: unknown workload '{w}' (known: {', '.join(WORKLOADS)})")
    rounds = config.getoption("rounds")
    if rounds is not None and not 3 <= rounds <= 1000:
        usage("--rounds: give 3 to 1000 process pairs (default: adaptive, until the verdict decides)")
    tolerance = config.getoption("tolerance")
    if tolerance is not None and not 0 < tolerance < 1:
        usage("--tolerance: give a fraction between 0 and 1, e.g. 0.05 for 5%")
    if config.getoption("aa_repeats") < 0:
        usage("--aa-repeats: must be >= 0")
    rehearse = config.getoption("rehearse")
    if rehearse and site.host.scheduler == "none":
        usage(f"--rehearse: site {site.name} has no batch system (host.scheduler = \"none\"): nothing to rehearse")
    certify = config.getoption("certify")
    if certify:
        from generator.certify.sign import load_signer
        if not config.getoption("image") or not config.getoption("benchmark_json", None):
            usage("--certify KEY: also give --image REF (the image the verdicts are about) and --benchmark-json=FILE "
                  "(the results it signs)")
        try:
            load_signer(Path(certify), flag=None)
            image = config.getoption("image")
            if not Path(image).is_file():
                from generator.certify.referrers import parse
                if parse(image).host == "localhost":
                    raise GenRecipeError(f"--image {image} names podman's own storage, not a registry: push it "
                                         "(gen-recipe build --push --registry HOST/PATH) and measure the pushed reference")
        except GenRecipeError as exc:
            usage(f"--certify: {exc}")
    launch, sbatch_args = launch_mode(site, config.getoption("launch") or ("direct" if rehearse else None),
                                      config.getoption("sbatch_arg"), usage)
    return SuiteOptions(
        site=site, runtimes=tuple(config.getoption("runtime")), rounds=rounds, workloads=workloads, recipe=recipe,
        tolerance=tolerance, image=config.getoption("image"), mode=config.getoption("mode"),
        aa_repeats=config.getoption("aa_repeats"), on_site=config.getoption("on_site"), launch=launch,
        sbatch_args=sbatch_args, rehearse=rehearse, certify=certify, neighbours=config.getoption("neighbours"))


def launch_mode(site, given: str | None, sbatch_args: list[str], usage, environ=os.environ) -> tuple[str, tuple[str, ...]]:
    """--launch and --sbatch-arg, checked: the mode (scheduler for a site with a scheduler when pytest runs
    outside an allocation, else direct) and the options given for the suite's jobs (the site's [scheduler]
    policy adds the rest: `generator.run.launch.policy`; `account_problem` checks the account)."""
    from generator.run import slurmjob

    scheduler = site.host.scheduler
    launch = given or ("scheduler" if scheduler != "none" and "SLURM_JOB_ID" not in environ else "direct")
    if launch == "scheduler" and scheduler == "none":
        usage(f"--launch=scheduler: site {site.name} has no scheduler (host.scheduler = \"none\"); use --launch=direct")
    problem = slurmjob.check_options(sbatch_args)
    if problem:
        usage(f"--sbatch-arg: {problem}")
    return launch, tuple(sbatch_args)


def account_problem(site, launch: str, sbatch_args: tuple[str, ...]) -> str | None:
    """Why the suite's jobs at `site` would be refused for want of an account (checked once the session knows
    it is on the site, before anything runs), or None."""
    from generator.run import slurmjob

    sched = site.scheduler
    if launch != "scheduler" or site.host.scheduler != "slurm" or sched.account != "required" \
            or slurmjob.given(sbatch_args, "account") is not None:
        return None
    what = f" ({sched.account_name})" if sched.account_name else ""
    return (f"--launch=scheduler: site {site.name} runs no job without an account{what} (scheduler.account = "
            f"\"required\" in {site.path}); pass --sbatch-arg=--account={sched.account_example or 'PROJECT'}")


def placement(options: SuiteOptions, facts=None) -> Placement:
    """Is this machine the site? The user's word (--on-site, --image) or the detect comparison."""
    from generator.detect import machine as detect

    site = options.site
    if options.on_site or options.image:
        flag = "--on-site" if options.on_site else "--image"
        return Placement(on_site=True, reason=f"{flag} given: measuring on this machine as site {site.name}")
    if facts is None:       # with what the site's module would set where it has none (mpi.setup = "prefix": local-bind)
        from generator.run.runtimes import with_host_mpi
        facts = detect.detect(env=with_host_mpi(site, os.environ))
    if detect.looks_like(site, facts):
        return Placement(on_site=True, reason=f"this machine looks like site {site.name}")
    mpi = f"{facts.value('mpi.flavour') or 'no MPI'} {facts.value('mpi.version') or ''}".strip()
    site_mpi = f"{site.mpi.flavour} {site.mpi.version or ''}".strip()
    seen = f"host MPI {mpi}, {facts.value('host.arch') or '?'}, {facts.value('host.os') or '?'}"
    says = f"site says {site_mpi}, {site.host.arch}, {site.host.os}"
    return Placement(on_site=False, reason=f"this machine is not {site.name} ({seen}; {says}); static checks "
                     f"only — run on {site.name}, or pass --image/--on-site")


WHOLE_MACHINE = ("whole_machine: a measurement that needs every CPU of the machine (MPI ranks, job steps); "
                 "./scripts/test runs these alone, the other measurements on two workers, one CPU each")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", WHOLE_MACHINE)
    if not _in_suite(config):
        return
    config.stash[SUITE] = options_from(config)
    config.stash[STARTED] = time.time() - 1     # file systems keep mtimes to the second or coarser
    # A test that skips before it measures leaves its benchmark fixture unused: not worth a warning.
    config.addinivalue_line("filterwarnings", "ignore:Benchmark fixture was not used")


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if SUITE not in config.stash:
        return None
    options = config.stash[SUITE]
    place = session_placement(config)
    return [f"gen-recipe suite: site {options.site.name} ({options.site.path}); {place.reason}; --launch={options.launch}"]


def session_placement(config: pytest.Config) -> Placement:
    if PLACEMENT not in config.stash:
        config.stash[PLACEMENT] = placement(config.stash[SUITE])
    return config.stash[PLACEMENT]


# Modules that measure the built-in workloads: not run when --recipe asks for the user's application only.
BUILTIN_MEASUREMENTS = ("test_overhead.py", "test_compiled.py", "test_mpi.py", "test_startup.py", "test_controls.py",
                        "test_busy.py")


# Modules that measure on this node (--launch=direct) and through the scheduler (--launch=scheduler).
DIRECT = (*BUILTIN_MEASUREMENTS, "test_app.py")
SCHEDULED = ("test_scheduler.py",)
REHEARSAL = ("test_rehearsal.py",)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """The machine check first, then the static checks, then the measurements (stable within each).
    With --recipe and no --workloads, the built-in workloads' measurements are deselected; without --recipe,
    the application test (test_app.py) is. The measurements of the other --launch mode skip, saying why."""
    options = config.stash.get(SUITE, None)
    if options is not None and options.rehearse:
        why = "--rehearse: the scheduler rehearsal only (test_rehearsal.py); it measures nothing"
        for item in items:
            if Path(str(item.fspath)).name not in (*ORDER, *REHEARSAL):
                item.add_marker(pytest.mark.skip(reason=why))
    elif options is not None:
        for item in items:
            if Path(str(item.fspath)).name in REHEARSAL:
                item.add_marker(pytest.mark.skip(reason="before you queue: pytest suites/ --site=SITE --rehearse "
                                                        "rehearses the site's scheduler here"))
    if options is not None and not options.rehearse and session_placement(config).on_site:
        problem = account_problem(options.site, options.launch, options.sbatch_args)
        if problem:
            raise pytest.UsageError(problem)
    if options is not None and not options.rehearse and session_placement(config).on_site:  # off site: "not the site"
        if options.launch == "scheduler":
            other, why = DIRECT, ("--launch=scheduler: measured as jobs through the scheduler (test_scheduler.py); "
                                  "--launch=direct measures on this node")
        else:
            other, why = SCHEDULED, ("--launch=direct: measured on this node; --launch=scheduler runs jobs and job "
                                     "steps through the site's scheduler")
        for item in items:
            if Path(str(item.fspath)).name in other:
                item.add_marker(pytest.mark.skip(reason=why))
    if options is not None:
        skip = (*(BUILTIN_MEASUREMENTS if options.recipe is not None and not options.workloads else ()),
                *(() if options.recipe is not None else ("test_app.py",)))
        dropped = [i for i in items if Path(str(i.fspath)).name in skip]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i not in dropped]

    if options is None:             # not a suite session: its tests keep their order
        return

    def rank(item) -> int:
        name = Path(str(item.fspath)).name
        return ORDER.index(name) if name in ORDER else len(ORDER)
    items.sort(key=rank)


VERDICT = "gen-recipe verdict"      # a report's user property: (outcome, message) of a verdict its test gave


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Under pytest-xdist the verdicts live in the workers: each test's travel to the controller's summary
    with its report."""
    report = yield
    if call.when == "call" and hasattr(item.config, "workerinput"):
        found = item.config.stash.get(VERDICTS, [])
        report.user_properties.extend((VERDICT, (v.outcome, v.message)) for v in found[item.config.stash.get(SENT, 0):])
        item.config.stash[SENT] = len(found)
    return report


def settle(*found) -> None:
    """After a comparison's results are recorded: a test whose verdicts include an `unfit` one is skipped with its
    figures (the session then exits with UNFIT_EXIT unless something failed); fail and pass stay the test's."""
    unfit = [v.message for v in found if v.outcome == "unfit"]
    if unfit:
        pytest.skip("; ".join(unfit))


def _outcomes(session) -> list[tuple[str, str]]:
    """(outcome, message) of every verdict of the session: this process's, and the ones xdist's workers sent."""
    found = [(v.outcome, v.message) for v in session.config.stash.get(VERDICTS, [])]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(reporter, "stats", {}) if reporter is not None else {}
    return found + [tuple(value) for reports in stats.values() for r in reports
                    for key, value in getattr(r, "user_properties", ()) if key == VERDICT]


@pytest.hookimpl(trylast=True)          # after pytest-benchmark has written --benchmark-json
def pytest_sessionfinish(session, exitstatus) -> None:
    """An unfit comparison and nothing failed: exit UNFIT_EXIT. --certify: the verdicts of the run, signed,
    about --image (`gen-recipe certify`)."""
    if not hasattr(session.config, "workerinput") and session.exitstatus == 0 and \
            any(outcome == "unfit" for outcome, _ in _outcomes(session)):
        session.exitstatus = UNFIT_EXIT
    options = session.config.stash.get(SUITE, None)
    if options is None or not options.certify or hasattr(session.config, "workerinput"):
        return
    from generator.cli.certify import certify
    from generator.errors import GenRecipeError, shown

    given = session.config.getoption("benchmark_json")     # a Path (pytest-benchmark's type for it)
    results = Path(getattr(given, "name", given) if not isinstance(given, (str, Path)) else given)
    lines = []
    try:
        if not results.is_file() or results.stat().st_mtime < session.config.stash.get(STARTED, 0):
            raise GenRecipeError(f"the run wrote no {shown(results)} (it measured nothing; a file there is from an "
                                 "earlier run): nothing to certify")
        done = certify(results, options.image, Path(options.certify), lines.append)
        lines.append(f"certified {options.image}: " + "; ".join(done))
    except GenRecipeError as exc:
        lines.append(f"--certify: {exc}")
        session.exitstatus = exc.exit_code
    session.config.stash[CERTIFIED] = lines


def pytest_terminal_summary(terminalreporter, config) -> None:
    for line in config.stash.get(CERTIFIED, []):
        terminalreporter.write_line(line)
    found = _outcomes(terminalreporter)
    if found:
        terminalreporter.section("container overhead")
        for outcome, message in found:
            terminalreporter.write_line(f"{outcome.upper():<13} {message}")
        unfit = sum(outcome == "unfit" for outcome, _ in found)
        if unfit:
            terminalreporter.write_line(f"{unfit} comparison(s) UNFIT: the machine was too busy to decide them (skipped; "
                                        f"exit code {UNFIT_EXIT} when nothing failed; docs/measuring.md)")


# -- fixtures and helpers ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def suite(pytestconfig) -> SuiteOptions:
    if SUITE not in pytestconfig.stash:
        pytest.skip("the portability suite runs as pytest suites/ ...")
    return pytestconfig.stash[SUITE]


@pytest.fixture(scope="session")
def site(suite):
    return suite.site


@pytest.fixture(scope="session")
def on_site(pytestconfig, suite) -> Placement:
    """Requested by every test that builds, pulls or runs the site's image or bare twin: skips off site."""
    place = session_placement(pytestconfig)
    if not place.on_site:
        pytest.skip(place.reason)
    return place


def runtimes_under_test(options: SuiteOptions) -> tuple[str, ...]:
    return options.runtimes or tuple(r.name for r in options.site.runtimes)


def tolerance(options: SuiteOptions, key: str):
    """The site's tolerance for `key`, or --tolerance, or none (skip: nothing to decide against)."""
    from generator.model.site import Tolerance

    if options.tolerance is not None:
        return Tolerance(reference=1.0, lower=-options.tolerance, upper=options.tolerance, unit="ratio")
    tol = options.site.tolerances.get(key)
    if tol is None:
        pytest.skip(f"site {options.site.name} has no tolerance for {key} (add [tolerances] {key} to "
                    f"{options.site.path}, or pass --tolerance)")
    return tol


def need_runtime(options: SuiteOptions, runtime: str) -> None:
    from generator.run.runtimes import PLATFORMS

    platform = PLATFORMS[runtime]
    if not shutil.which(platform.binary):
        pytest.skip(f"{platform.binary} not found on PATH (needed by --site={options.site.name} --runtime {runtime}; "
                    f"choose another with --runtime)")
    if not platform.local_image and not options.image:
        pytest.skip(f"no image for {runtime}: pass a prebuilt one with --image (e.g. a SIF for apptainer)")


def size(site, workload: str):
    """The suite's size of `workload` for the site's GPUs (one GPU) or a CPU."""
    from workloads.registry import WORKLOADS as REGISTRY

    w = REGISTRY[workload]
    chosen = w.gpu if site.gpu.stack != "none" else w.cpu
    if chosen is None:
        pytest.skip(f"{workload} has no {'GPU' if site.gpu.stack != 'none' else 'CPU'} size in workloads/registry.py")
    return chosen


def mode_of(options: SuiteOptions, runtime: str) -> str:
    site = options.site
    mode = options.mode or site.container.mpi_mode
    if mode not in site.runtime(runtime).mpi_modes:
        pytest.skip(f"{runtime} at site {site.name} does not support {mode} mode (--mode "
                    f"{'/'.join(site.runtime(runtime).mpi_modes)})")
    return mode


def run_options(options: SuiteOptions, runtime: str, *, mpi: bool = False, env=None):
    from generator.run import runtimes

    return runtimes.Options(mode=mode_of(options, runtime), gpus=0, mpi=mpi, env=dict(env or {}),
                            allow_root=os.geteuid() == 0, interactive=True, cgroup_parent=scheduling_parent(runtime),
                            host_cgroupns=runtime in ("podman", "docker"))     # its record then says where it runs


def scheduling_parent(runtime: str) -> str:
    """Where a measured container's cgroup goes so that it competes for the CPU as the bare side does
    (docs/measuring.md, "Both sides in one scheduling context"). The bare side's fork server starts a session of
    its own, so the kernel schedules it as an autogroup of its own at the top level (weight 1024); podman
    (cgroupfs) puts every container's group under one `libpod_parent`, which shares one weight among all
    running containers: beside other containers (a neighbour's, or the other worker's measured one) the
    measured container got half a CPU's share or less, and podman's comparisons failed on a busy machine.
    As root with podman's cgroupfs manager: this process's cgroup (the bare side's), so that each container is
    a group of its own inside it, one entity beside the bare side ("/" where the suite runs in the root cgroup,
    as in CI); elsewhere "" (the runtime's own: rootless podman and systemd's slices are not changed, and there
    the sides' records, `scheduling`, decide whether a verdict is given). Measured containers also run in the
    host's cgroup namespace (run_options), so that their record says where they are."""
    from workloads.common import cpu_cgroup

    here = cpu_cgroup()
    if runtime != "podman" or os.geteuid() != 0 or here is None:
        return ""
    try:
        proc = subprocess.run(["podman", "info", "--format", "{{.Host.CgroupManager}}"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return here if proc.returncode == 0 and proc.stdout.strip() == "cgroupfs" else ""


class Images:
    """Images built once per session (deterministic tags: a rebuild is a no-op) and converted per runtime.
    A failed build fails every test that needs it with the same line: the step, the fix and the log."""

    def __init__(self, options: SuiteOptions) -> None:
        self.options = options
        self.built: dict[str, str] = {}
        self.failed: dict[str, str] = {}

    def _build(self, recipe) -> str:
        from generator.errors import GenRecipeError
        from generator.images import base, oci
        from generator.suite.harness import LOGS

        from generator.recipe import catalog

        site, recipe = self.options.site, catalog.load(recipe)
        name = recipe.name
        if not shutil.which("podman"):
            pytest.skip(f"podman not found on PATH: cannot build the {name} image for --site={site.name} "
                        "(or pass --image)")
        LOGS.mkdir(parents=True, exist_ok=True)
        log = (LOGS / f"build-{name}-{site.name}.log").absolute()
        with log.open("w") as out:
            def progress(line: str) -> None:
                out.write(line + "\n")
                out.flush()
            try:
                if site.base.devel.startswith("localhost/"):
                    base.ensure_base_image(site, progress=progress)
                return oci.build_image(site, recipe, progress=progress).ref
            except GenRecipeError as exc:
                raise GenRecipeError(f"building the {name} image for site {site.name} failed: {exc} "
                                     f"(log: {log}; fix the build, or pass a prebuilt --image)") from None

    def ref(self, recipe) -> str:
        from generator.errors import GenRecipeError

        if self.options.image:
            return self.options.image
        key = _name(recipe)
        if key not in self.built and key not in self.failed:
            try:
                self.built[key] = self._build(recipe)
            except GenRecipeError as exc:
                self.failed[key] = str(exc)
        if key in self.failed:
            pytest.fail(self.failed[key], pytrace=False)
        return self.built[key]

    def digests(self, recipe) -> list[str]:
        """The manifest digests podman knows for the image of `recipe` (its own, and each registry's it was pushed
        to or pulled from): what a certificate's verdicts name as measured. Empty where podman has none."""
        ref = self.ref(recipe)
        if not shutil.which("podman"):
            return []
        import subprocess
        done = subprocess.run(("podman", "image", "inspect", "--format", "{{.Digest}}{{range .RepoDigests}} {{.}}{{end}}",
                               ref), capture_output=True, text=True)
        words = done.stdout.split() if done.returncode == 0 else []
        return sorted({w.rsplit("@", 1)[-1] for w in words if w.rsplit("@", 1)[-1].startswith("sha256:")})

    def for_runtime(self, recipe, runtime: str) -> str:
        from generator.errors import GenRecipeError
        from generator.images import convert
        from generator.run.runtimes import PLATFORMS

        ref = self.ref(recipe)
        if self.options.image and not PLATFORMS[runtime].local_image:
            return ref
        try:
            return convert.runtime_image(self.options.site, ref, runtime)
        except GenRecipeError as exc:
            problem = f"making the {runtime} image of {ref} failed: {exc}"
        pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="session")
def images(suite, on_site) -> Images:
    return Images(suite)


class BarePythons:
    """The bare twins of the images' Python environments, made once per session (see harness.bare_python)."""

    def __init__(self, site) -> None:
        self.site, self.made, self.failed = site, {}, {}

    def __call__(self, recipe) -> str:
        from generator.suite import harness

        key = _name(recipe)
        if key not in self.made and key not in self.failed:
            try:
                self.made[key] = harness.bare_python(self.site, recipe)
            except harness.StepFailed as exc:
                self.failed[key] = str(exc)
        if key in self.failed:
            pytest.fail(self.failed[key], pytrace=False)
        return self.made[key]


def _name(recipe) -> str:
    return recipe if isinstance(recipe, str) else recipe.name


@pytest.fixture(scope="session")
def bare_python(site, on_site) -> BarePythons:
    return BarePythons(site)


@pytest.fixture(scope="session")
def cpu_pin() -> dict[str, str]:
    """Both sides' fork servers on the same CPU (WORKLOADS_CPUS for `workloads.forkserver`); see `pinned_cpu`."""
    return pinned_cpu(sorted(os.sched_getaffinity(0)), os.environ.get("PYTEST_XDIST_WORKER", ""))


def pinned_cpu(cpus: list[int], worker: str) -> dict[str, str]:
    """The CPU a session's comparisons run on: the last one (the others take the machine's noise); under
    pytest-xdist, worker gwN takes the N-th from the end, so two workers measure side by side, each on a CPU
    of its own (the measurements marked `whole_machine` do not run beside them: ./scripts/test). On a
    single CPU, or confined to one (a nested session): {} — anywhere it may run."""
    if len(cpus) < 2:
        return {}
    n = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return {"WORKLOADS_CPUS": str(cpus[-1 - n % len(cpus)])}


def confined(pin: Mapping[str, str]):
    """A `preexec_fn` that keeps a child (and what it starts) on the CPU of `pin` (`cpu_pin`), or None."""
    cpu = pin.get("WORKLOADS_CPUS")
    return (lambda: os.sched_setaffinity(0, {int(cpu)})) if cpu else None


@pytest.fixture(scope="session")
def verdicts(pytestconfig) -> list:
    return pytestconfig.stash.setdefault(VERDICTS, [])
