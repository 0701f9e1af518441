"""`gen-recipe launch`: defaults, --out, errors (one line, exit 2)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from generator.cli import main as cli
from generator.run import launch
from generator.model import site as site_mod
from generator.images import convert, tags


def run_cli(capsys, *argv):
    rc = cli.main(["launch", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_default_image_is_what_build_makes(capsys):
    rc, out, err = run_cli(capsys, "--site", "local", "--recipe", "pytorch")
    assert rc == 0 and err == ""
    s = site_mod.load("local")
    expected = convert.runtime_image_name(s, tags.default_ref(s, "pytorch"), "charliecloud")
    assert expected.startswith("build/images/pytorch-local-0.1.0-")
    assert f" {expected} -- python3 -m workloads.cnn" in out.replace(" \\\n    ", " ")
    rc, out, _ = run_cli(capsys, "--site", "local", "--runtime", "podman")
    assert tags.default_ref(s, "pytorch") in out


def test_sif_default_for_apptainer(capsys):
    rc, out, _ = run_cli(capsys, "--site", "frontier", "--nodes", "4", "--gpus-per-node", "2")
    assert rc == 0
    flat = " ".join(out.replace("\\\n", " ").split())
    assert "apptainer exec --rocm pytorch-frontier.sif " in flat
    assert "#SBATCH --nodes=4" in out and "#SBATCH --gpus-per-node=2" in out


def test_out_writes_executable_script_and_workload_args(capsys, tmp_path):
    target = tmp_path / "sub" / "job.sh"
    rc, out, _ = run_cli(capsys, "--site", "local", "--workload", "mnist", "--tasks-per-node", "2",
                         "--image", "/img", "--out", str(target), "--", "--steps", "2", "--batch-size", "8")
    assert rc == 0 and out.strip() == str(target)
    text = target.read_text()
    assert os.stat(target).st_mode & stat.S_IXUSR
    assert "python3 -m workloads.mnist --mode ddp --steps 2 --batch-size 8" in text.replace(" \\\n    ", " ")
    assert "-- --steps 2 --batch-size 8" in text.splitlines()[1]
    assert not list(target.parent.glob(".*.tmp"))


def test_bare_uses_host_python_and_workloads_path(capsys):
    rc, out, _ = run_cli(capsys, "--site", "local", "--bare", "--workloads-dir", "/srv/wl")
    assert rc == 0
    assert ': "${GEN_RECIPE_WORKLOADS:=/srv/wl}"' in out
    assert "ch-run" not in out and "mpirun -np 1 --map-by ppr:1:node" in out


@pytest.mark.parametrize("argv,message", [
    (("--site", "local", "--mode", "bind"), "site local's charliecloud supports hybrid; not bind (use --mode hybrid)"),
    (("--site", "perlmutter", "--mode", "hybrid"), "site perlmutter's podman-hpc supports bind; not hybrid"),
    (("--site", "frontier", "--runtime", "podman"), "runtime 'podman' is not available at site 'frontier'"),
    (("--site", "frontier", "--gpus-per-node", "9"), "site frontier has 8 GPUs per node, not 9"),
    (("--site", "local", "--workload", "nope"), "invalid choice: 'nope'"),
    (("--site", "local", "--time", "soon"), "--time 'soon' is not HH:MM:SS"),
    (("--site", "local", "--recipe", "pytorh"), "unknown recipe 'pytorh'"),
])
def test_errors_are_one_line_exit_2(capsys, argv, message):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("gen-recipe: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_plan_defaults():
    s = site_mod.load("frontier")
    p = launch.plan_job(s, launch.Job(nodes=2))
    assert (p.runtime, p.mode, p.gpus, p.tasks) == ("apptainer", "bind", 8, 8)
    assert p.workload_argv == ("python3", "-m", "workloads.cnn", "--mode", "ddp")
    single = launch.plan_job(site_mod.load("local"), launch.Job(workload="llm"))
    assert single.workload_argv == ("python3", "-m", "workloads.llm") and single.tasks == 1


def test_schedulers():
    torque = launch.script(site_mod.load("hlrs"), launch.Job(nodes=2, image="x.sif"))
    assert "#PBS -l nodes=2:ppn=1:gpus=1" in torque and 'cd "${PBS_O_WORKDIR}"' in torque
    import dataclasses
    s = site_mod.load("leonardo")
    for sched, marker in (("pbs", "#PBS -l select=2:mpiprocs=4:ngpus=4"), ("lsf", '#BSUB -R "span[ptile=4]"')):
        alt = dataclasses.replace(s, host=dataclasses.replace(s.host, scheduler=sched))
        assert marker in launch.script(alt, launch.Job(nodes=2, image="x.sif"))


@pytest.mark.parametrize("flag,value", [("--account", "abc;touch /tmp/x"), ("--account", "a\n#SBATCH --x"),
                                        ("--partition", "$(id)"), ("--partition", "=-batch")])
def test_account_and_partition_that_could_inject_are_refused(capsys, flag, value):
    rc, out, err = run_cli(capsys, "--site", "frontier", f"{flag}={value}")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and flag in err and "letters, digits" in err


def test_the_sites_partition_is_the_default_and_an_account_can_be_required(capsys, tmp_path):
    rc, out, _ = run_cli(capsys, "--site", "local-slurm", "--bare")
    assert rc == 0 and "#SBATCH --partition=debug\n" in out          # sites/local-slurm.toml: host.partition
    rc, out, _ = run_cli(capsys, "--site", "local-slurm", "--bare", "--partition", "long", "--account", "proj1")
    assert "#SBATCH --partition=long\n" in out and "#SBATCH --account=proj1\n" in out
    text = (Path(__file__).resolve().parents[2] / "sites" / "local-slurm.toml").read_text().replace(
        'launcher = "srun"\n', 'launcher = "srun"\nneeds_account = true\n').replace('name = "local-slurm"', 'name = "acct"')
    (tmp_path / "acct.toml").write_text(text)
    rc, out, err = run_cli(capsys, "--site", str(tmp_path / "acct.toml"), "--bare")
    assert rc == 2 and "runs no job without an account" in err and "--account PROJECT" in err
    rc, out, _ = run_cli(capsys, "--site", str(tmp_path / "acct.toml"), "--bare", "--account", "proj1")
    assert rc == 0 and "#SBATCH --account=proj1" in out
