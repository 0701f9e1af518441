"""Every shipped Slurm site rehearsed on this machine (generator.dev.rehearsal): one cluster, reshaped per site
(`gen-recipe minicluster up --shape SITE`), every runtime × mode script and its bare twin on 1 and 2 nodes
accepted, started and completed (for real where this machine has what it needs, else with stubs that check
the command line), and each site rule refusing the script without its line. Plus the pure parts: the shape's
configuration text, the stubs' checks, and `pytest suites/ --site=X --rehearse` as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.dev import minicluster, rehearsal, shape, stub
from generator.model import site as site_mod

from .conftest import REPO

# local-bind-slurm's MPI (MPICH in a prefix of this machine's) and image are its own: the suite runs every script of it
# for real through the test cluster (./scripts/test part 3b), where a rehearsal here would stand the local image in
SLURM_SITES = [n for n in sorted(set(site_mod.builtin_names().values()))
               if site_mod.load(n).host.scheduler == "slurm" and n != "local-bind-slurm"]
STATE = REPO / "build" / "minicluster-rehearsal"
# rehearsed as a user runs it (`pytest suites/ --site=galileo --rehearse`, below): every case there, so not twice
THROUGH_PYTEST = "galileo"


@pytest.fixture(scope="module")
def cluster():
    why = minicluster.missing_tools(shape.shape_of(site_mod.load("leonardo")))   # accounting and Lmod too
    if why:
        pytest.skip(why)
    try:
        yield STATE
    finally:
        minicluster.down(STATE)


@pytest.mark.parametrize("name", [n for n in SLURM_SITES if n != THROUGH_PYTEST])
def test_the_sites_scripts_pass_their_rehearsal(cluster, name, tmp_path):
    report = rehearsal.rehearse(site_mod.load(name), cluster, tmp_path, rehearsal.local_image_for)
    print("\n".join(report.lines()))
    assert not report.problems(), "\n".join(report.problems())
    assert len(report.outcomes) == len(report.cases) >= 4
    assert any(c.real for c in report.cases) or all(c.why for c in report.cases)


# -- the shape, pure ----------------------------------------------------------------------------------------

def test_a_shape_says_the_sites_rules():
    lumi = shape.shape_of(site_mod.load("lumi"))
    assert [p.name for p in lumi.partitions] == ["standard-g", "small-g", "dev-g"]
    assert not any(p.default for p in lumi.partitions)                       # LUMI states no default partition
    assert lumi.account_required and lumi.account == "project_465000000" and lumi.accounting
    lines = shape.partition_lines(lumi)
    assert "PartitionName=standard-g Nodes=n1,n2 Default=NO MaxTime=2-00:00:00 MaxNodes=1024 OverSubscribe=EXCLUSIVE State=UP" in lines
    assert "PartitionName=dev-g Nodes=n1,n2 Default=NO MaxTime=03:00:00 MaxNodes=32 State=UP" in lines    # shared nodes
    leo = shape.shape_of(site_mod.load("leonardo"))
    assert [(n.name, n.gpus) for n in leo.nodes] == [("n1", 4), ("n2", 4), ("c1", 0), ("c2", 0)]
    assert shape.partition_lines(leo)[0].startswith("PartitionName=lrd_all_serial Nodes=c1,c2 Default=YES MaxTime=04:00:00")
    cmds = shape.accounting_commands(leo, "alice")
    assert ["add", "account", "noalloc", "cluster=leonardo", "MaxSubmitJobs=0"] in cmds
    assert ["modify", "qos", "where", "name=boost_qos_dbg", "set", "MaxWall=00:30:00", "MaxTRESPerJob=node=2",
            "MaxSubmitJobsPerUser=-1"] in cmds
    pm = shape.shape_of(site_mod.load("perlmutter"))
    assert pm.nodes[0].cpus == 128 and pm.nodes[0].features == ("gpu",)     # 64 cores x 2 threads
    assert pm.partitions[0].name == shape.FALLBACK_PARTITION and pm.partitions[0].default
    lua = shape.job_submit_lua(pm)
    assert "local wanted = [[gpu]]" in lua and "return slurm.ERROR" in lua
    assert lumi.binds[:2] == ("/opt/cray", "/var/spool") and "/etc/hosts" in lumi.binds
    assert shape.shape_of(site_mod.load("alps")).binds == ()                   # ${SCRATCH}: the user's, not made
    assert shape.bind_sources(("/a/../b:/x", "$HOME/y", "rel", "/a/../b")) == ("/b",)
    local = shape.shape_of(site_mod.load("local-slurm"))
    assert not local.accounting and not local.gres and local.partitions[0].name == "debug"


def test_a_lua_string_cannot_be_closed_by_its_text():
    for text in ("plain", "a]]b", "a]=]b]]", 'q"\\n', "ask for gpu]", "x]="):
        s = shape.lua_string(text)
        level = s.index("[", 1) - 1
        assert s.startswith("[" + "=" * level + "[") and s[level + 2:-(level + 2)] == text
        closing = f"]{'=' * level}]"
        assert s.index(closing, level + 2) == len(s) - len(closing)        # the first closing bracket is the last


def test_the_clusters_conf_for_a_shape():
    lay = minicluster.Layout(Path("/srv/mc"))
    conf = minicluster.slurm_conf(lay, "alice", shape.shape_of(site_mod.load("frontier")))
    assert "ClusterName=frontier" in conf and "GresTypes=gpu" in conf
    assert "AccountingStorageEnforce=associations,limits,qos" in conf and "SlurmdParameters=config_overrides" in conf
    assert " CPUs=64 Gres=gpu:8 State=UNKNOWN" in conf                       # 64 cores, 8 GCDs
    assert minicluster.conf_nodes(conf) == ("n1", "n2")
    dbd = minicluster.slurmdbd_conf(lay, "alice", shape.shape_of(site_mod.load("frontier")))
    assert "StorageHost=127.0.0.1" in dbd and "AuthInfo=socket=/srv/mc/munge/munge.socket.2" in dbd


# -- stubs, pure ----------------------------------------------------------------------------------------------

def test_a_stub_checks_the_command_line_against_the_documented_options(capsys):
    assert stub.main(["apptainer", "1.3.6", "exec", "--rocm", "--bind", "/tmp,/usr:/x", "img.sif", "python3", "-m",
                      "x"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["image"] == "img.sif" and record["command"] == ["python3", "-m", "x"]
    assert record["binds"] == 2
    assert stub.main(["apptainer", "1.3.6", "exec", "--no-such-flag", "img.sif", "true"]) == 2
    err = capsys.readouterr().err
    assert "unknown option --no-such-flag" in err and "apptainer" in err and "\n" == err[-1] and err.count("\n") == 1
    assert stub.main(["apptainer", "1.3.6", "run-help", "img.sif"]) == 2          # not the subcommand used
    assert stub.main(["mpiexec", "2019.12.320", "-n", "2", "-ppn", "1", "ch-run", "img", "--", "true"]) == 0
    assert stub.main(["mpiexec", "2019.12.320", "--map-by", "node", "true"]) == 2
    capsys.readouterr()


def test_a_stubbed_runtime_stops_on_a_bind_source_the_site_does_not_have(tmp_path, monkeypatch, capsys):
    """As the runtime does: a bind source (option or variable) that exists neither on the node nor among the
    site's bind sources (the cluster's site root) stops the run; one the shape made is found."""
    site = site_mod.load("frontier")
    lay = minicluster.Layout(tmp_path)
    minicluster._write_shape_files(lay, "alice", shape.shape_of(site))
    assert (lay.site_root / "opt" / "cray").is_dir() and (lay.site_root / "usr/share/libdrm").is_dir()
    monkeypatch.setenv("GEN_RECIPE_REHEARSAL_ROOT", str(lay.site_root))
    monkeypatch.setenv("APPTAINER_BINDPATH", "/usr/share/libdrm,/var/spool/slurmd,/opt/cray")
    assert stub.main(["apptainer", "1.3.6", "exec", "img.sif", "true"]) == 0
    assert json.loads(capsys.readouterr().out)["binds"] == 3
    monkeypatch.setenv("APPTAINER_BINDPATH", "/opt/cray,/lustre/orion/nowhere")
    assert stub.main(["apptainer", "1.3.6", "exec", "img.sif", "true"]) == 2
    assert "bind source /lustre/orion/nowhere does not exist" in capsys.readouterr().err
    monkeypatch.delenv("APPTAINER_BINDPATH")
    for argv in (["podman-hpc", "1.1.4", "run", "-v", "/nowhere/x:/x", "img", "true"],
                 ["sarus", "1.7.0", "run", "--mount=type=bind,source=/nowhere/x,destination=/x", "img", "true"],
                 ["singularity", "4.1.3", "exec", "-B", "relative:/x", "img", "true"]):
        assert stub.main(argv) == 2, argv
        assert "bind source" in capsys.readouterr().err
    assert stub.main(["sarus", "1.7.0", "run", "--mount=type=bind,source=/opt/cray,destination=/x", "img", "true"]) == 0
    capsys.readouterr()


def test_every_stubbed_runtime_of_a_site_has_its_documented_options():
    for name in SLURM_SITES:
        for _program, (tool, version) in rehearsal.stubs(site_mod.load(name)).items():
            if tool in ("mpiexec", "ce"):
                continue
            from generator.model import runtimes
            assert runtimes.documented_cli(tool, version) is not None, f"{name}: {tool} {version}"


def test_cases_say_what_runs_for_real_and_why_the_rest_does_not():
    todo = rehearsal.cases(site_mod.load("ifca"), lambda runtime: "IMG")
    assert [c.name for c in todo] == ["udocker-hybrid-1node", "udocker-hybrid-2node", "bare-1node", "bare-2node"]
    assert all(c.real for c in todo) and [c.records for c in todo] == [1, 2, 4, 8]      # a container per node
    frontier = rehearsal.cases(site_mod.load("frontier"), lambda runtime: "IMG")
    assert not any(c.real for c in frontier)
    assert all("apptainer 1.3.6 is not here" in c.why for c in frontier if not c.job.bare)
    assert all("cray-mpich" in c.why and "python3" in c.why for c in frontier if c.job.bare)
    leo = rehearsal.cases(site_mod.load("leonardo"), lambda runtime: "IMG")
    assert [c.real for c in leo if c.job.bare] == [True, True]              # Open MPI over PMIx: the host's stands in
    supermuc = rehearsal.cases(site_mod.load("supermuc"), lambda runtime: "IMG")
    assert all(not c.real and "mpiexec" in c.stubbed for c in supermuc) and {c.records for c in supermuc} == {1}


# -- as a user runs it ------------------------------------------------------------------------------------------

def test_pytest_suites_rehearse_runs_the_rehearsal_of_one_site(cluster):
    env = {**os.environ, minicluster.ENV_VAR: str(cluster)}
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/", f"--site={THROUGH_PYTEST}", "--rehearse", "-q", "-rs",
                        "-p", "no:cacheprovider"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "passed" in r.stdout and "a stub stood in: singularity 3.8.7 is not here" in r.stdout
    assert "--rehearse: the scheduler rehearsal only" in r.stdout


def test_a_torque_site_has_its_directives_checked_against_its_documentation():
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/", "--site=hlrs", "--rehearse", "-q", "-rs",
                        "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]
    assert r.stdout.count("directives match TORQUE Resource Manager Administrator Guide") == 1    # one line, 4 scripts
    assert "SKIPPED [4] suites/test_rehearsal.py" in r.stdout
    assert rehearsal.check_directives("torque", "#PBS -l nodes=2:ppn=4:gpus=1\n#PBS -l walltime=00:30:00\n") == []
    bad = rehearsal.check_directives("torque", "#PBS -l select=2:mpiprocs=4\n#PBS -W x\n")
    assert len(bad) == 2 and "mpiprocs, select is not a documented resource" in bad[0] and "-W x" in bad[1]
    assert rehearsal.check_directives("pbs", "#PBS -l select=2:mpiprocs=4:ngpus=4\n") == []


def test_wall_time_bins_reach_the_clusters_job_submit_lua_and_a_negative_case():
    """Frontier's "Job Priority by Node Count" bins: job_submit.lua refuses what its MaxTime cannot (2 h up to 91
    nodes, 6 h up to 183), and the rehearsal submits the 2-node script with a minute more than its bin."""
    frontier = site_mod.load("frontier")
    fs = shape.shape_of(frontier)
    assert fs.submit_rules and fs.partitions[0].time_by_nodes == ((91, 120), (183, 360))
    lua = shape.job_submit_lua(fs)
    assert "[ [[batch]] ] = {{91, 120}, {183, 360}}," in lua and shape.TIME_REFUSAL in lua
    assert not shape.shape_of(site_mod.load("lumi")).submit_rules           # no bins, no constraint: no lua
    from generator.run import launch
    script = launch.script(frontier, launch.Job(workload="mpi", nodes=2, bare=True, account="abc123"))
    neg = {n.name: n for n in rehearsal.negatives(frontier, script, "batch")}["time-over-bin"]
    assert (neg.drop, neg.put) == ("#SBATCH --time=00:30:00", "#SBATCH --time=02:01:00")
    changed = neg.applied(script)
    assert "#SBATCH --time=02:01:00\n" in changed and "--time=00:30:00" not in changed
    assert changed.count("\n") == script.count("\n")
    import shutil
    if shutil.which("luac"):
        import subprocess
        assert subprocess.run(["luac", "-p", "-"], input=lua, text=True).returncode == 0
