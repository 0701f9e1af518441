"""Before you queue: the site's scheduler rehearsed on this machine (`pytest suites/ --site=SITE --rehearse`).

The test cluster takes the site's shape (`gen-recipe minicluster up --shape SITE`: its partitions and
limits, GPUs, constraint, QOS and accounts under real accounting, its modules under Lmod), then every
script `gen-recipe launch` prints for the site (each runtime × MPI mode and the bare twin, 1 and 2 nodes,
the `mpi` workload) is submitted as printed: accepted, started and completed — for real where this
machine has the runtime and an MPI of the site's family (the `local` image standing in for the site's),
else with a stub standing in for what is missing, which checks its command line against the program's
documented options (the test's id and its report say which). Then the site's rules one at a time: the
same script without its account, its constraint or its partition must be refused by the scheduler.

The cluster lives in $GEN_RECIPE_MINICLUSTER, else build/minicluster-rehearse/; one this session started
goes down at its end. Root is needed (slurmd starts job steps as their users).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from generator.dev import minicluster, rehearsal
from generator.dev.shape import shape_of
from generator.errors import GenRecipeError
from generator.run import launch
from generator.suite.plugin import SUITE

pytestmark = pytest.mark.whole_machine       # jobs on every node of the cluster: not beside a measurement
FOLDER = Path("build") / "rehearsal"


def _site_cases(metafunc):
    options = metafunc.config.stash[SUITE]
    if not options.rehearse:             # one placeholder each: the plugin skips them, saying how to rehearse
        return ["without-rehearse"], ["without-rehearse"]
    site = options.site
    if site.host.scheduler != "slurm":   # no cluster to rehearse on: test_directives_follow_the_documentation
        return [], []
    todo = rehearsal.cases(site, lambda runtime: "IMAGE", account="x")
    script = launch.script(site, todo[-1].job)
    default = next((p.name for p in shape_of(site).partitions if p.default), None)
    return [c.name for c in todo], [n.name for n in rehearsal.negatives(site, script, default)]


def pytest_generate_tests(metafunc):
    site = metafunc.config.stash[SUITE].site
    none = [pytest.param("-", marks=pytest.mark.skip(reason=f"site {site.name} runs {site.host.scheduler}: no cluster of it "
                                                         "here; its directives are checked against its documentation"))]
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", _site_cases(metafunc)[0] or none)
    if "negative" in metafunc.fixturenames:
        metafunc.parametrize("negative", _site_cases(metafunc)[1] or (none if site.host.scheduler != "slurm" else
                             [pytest.param("-", marks=pytest.mark.skip(reason=f"site {site.name} states no rule a "
                                                                                "script could leave out"))]))
    if "directives_case" in metafunc.fixturenames:
        options = metafunc.config.stash[SUITE]
        site = options.site
        kinds = rehearsal.DOCUMENTED_DIRECTIVES
        names = [c.name for c in rehearsal.cases(site, lambda runtime: "IMAGE", account="x")] \
            if options.rehearse and site.host.scheduler in kinds else []
        metafunc.parametrize("directives_case", names or [pytest.param("-", marks=pytest.mark.skip(
            reason="a Slurm site's directives meet the real sbatch (test_script_is_accepted_started_and_completed)"
            if options.rehearse else "before you queue: pytest suites/ --site=SITE --rehearse"))])


@pytest.fixture(scope="module")
def report(suite):
    """The site's rehearsal, once: the cluster shaped, every script submitted and waited for, the negative cases."""
    missing = minicluster.missing_tools()
    if missing:
        pytest.skip(missing)
    cluster = minicluster.layout(os.environ.get(minicluster.ENV_VAR) or Path("build") / "minicluster-rehearse").root
    was_up = minicluster.status(cluster).up
    try:
        yield rehearsal.rehearse(suite.site, cluster, (FOLDER / suite.site.name).absolute(), rehearsal.local_image_for,
                                 account=_given(suite.sbatch_args, "account"), progress=print)
    except GenRecipeError as exc:
        pytest.fail(f"the rehearsal of {suite.site.name}: {exc}", pytrace=False)
    finally:
        if not was_up:
            minicluster.down(cluster)


def _given(args, name: str) -> str:
    found = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return found[-1] if found else ""


def test_script_is_accepted_started_and_completed(report, case):
    i = [c.name for c in report.cases].index(case)
    c, outcome = report.cases[i], report.outcomes[i]
    print(report.lines()[i])
    assert not outcome.problem, f"{case}: {outcome.problem}"
    if not c.real:
        pytest.skip(f"accepted and started; a stub stood in: {c.why}")


def test_the_sites_rule_refuses_a_script_without_it(report, negative):
    found = [(n, said) for n, said in report.refusals if n.name == negative]
    assert found, negative
    n, said = found[0]
    assert said, f"sbatch took the script without `{n.drop}`"
    assert n.expect in said, f"refused, but not with \"{n.expect}\": {said}"


def test_directives_follow_the_schedulers_documentation(suite, directives_case):
    """A batch system with no Debian package to rehearse on (Torque, PBS Professional): every directive of the
    script checked against the scheduler's documentation instead, and the test says so."""
    site = suite.site
    case = next(c for c in rehearsal.cases(site, lambda runtime: "IMAGE", account="x") if c.name == directives_case)
    problems = rehearsal.check_directives(site.host.scheduler, launch.script(site, case.job))
    assert not problems, "\n".join(problems)
    pytest.skip(f"directives match {rehearsal.DOCUMENTED_DIRECTIVES[site.host.scheduler][0]}; {site.host.scheduler} has "
                "no Debian package, so no job of it runs here")
