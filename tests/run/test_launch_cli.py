"""`gen-recipe launch`: defaults, --out, errors (one line, exit 2)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from generator.cli import main as cli
from generator.errors import UsageError
from generator.run import launch
from generator.model import site as site_mod
from tests.helpers import account
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
    rc, out, _ = run_cli(capsys, "--site", "frontier", "--account", "abc123", "--nodes", "4", "--gpus-per-node", "2")
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
    (("--site", "local", "--time", "soon"), "--time 'soon': give a wall time as Slurm's --time takes it"),
    (("--site", "local", "--recipe", "pytorh"), "unknown recipe 'pytorh'"),
])
def test_errors_are_one_line_exit_2(capsys, argv, message):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("gen-recipe: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_plan_defaults():
    s = site_mod.load("frontier")
    p = launch.plan_job(s, launch.Job(nodes=2, account=account(s)))
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
        assert marker in launch.script(alt, launch.Job(nodes=2, image="x.sif", account=account(alt)))


@pytest.mark.parametrize("flag,value", [("--account", "abc;touch /tmp/x"), ("--account", "a\n#SBATCH --x"),
                                        ("--partition", "$(id)"), ("--partition", "=-batch")])
def test_account_and_partition_that_could_inject_are_refused(capsys, flag, value):
    rc, out, err = run_cli(capsys, "--site", "frontier", f"{flag}={value}")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and flag in err and "letters, digits" in err


def test_the_sites_partition_is_the_default_and_an_account_can_be_required(capsys, tmp_path):
    rc, out, _ = run_cli(capsys, "--site", "local-slurm", "--bare")
    assert rc == 0 and "#SBATCH --partition=debug\n" in out          # sites/local-slurm.toml: the default partition
    rc, out, _ = run_cli(capsys, "--site", "local-slurm", "--bare", "--partition", "debug", "--account", "proj1")
    assert "#SBATCH --partition=debug\n" in out and "#SBATCH --account=proj1\n" in out
    rc, out, err = run_cli(capsys, "--site", "local-slurm", "--bare", "--partition", "long")
    assert rc == 2 and out == "" and "site local-slurm has no such partition" in err
    text = (Path(__file__).resolve().parents[2] / "sites" / "local-slurm.toml").read_text().replace(
        'sources = ["M1"]\n\n[gpu]', 'account = "required"\nsources = ["M1"]\n\n[gpu]').replace(
        'name = "local-slurm"', 'name = "acct"')
    (tmp_path / "acct.toml").write_text(text)
    rc, out, err = run_cli(capsys, "--site", str(tmp_path / "acct.toml"), "--bare")
    assert rc == 2 and "runs no job without an account" in err and "--account PROJECT" in err
    assert len(err.strip().splitlines()) == 1 and 'scheduler.account = "required"' in err
    rc, out, _ = run_cli(capsys, "--site", str(tmp_path / "acct.toml"), "--bare", "--account", "proj1")
    assert rc == 0 and "#SBATCH --account=proj1" in out
    old = text.replace('launcher = "srun"\n', 'launcher = "srun"\nneeds_account = true\n')    # a site file of before
    (tmp_path / "old.toml").write_text(old)
    rc, out, err = run_cli(capsys, "--site", str(tmp_path / "old.toml"), "--bare")
    assert rc == 2 and "host.needs_account: moved to [scheduler]" in err and 'account = "required"' in err


# -- hostile launch arguments (issue 28): refused at the boundary, harmless at the sinks -------------------------

HOSTILE = "x\ntouch {m} #"


@pytest.mark.parametrize("argv,option", [
    (("--image", HOSTILE), "--image"), (("--account", HOSTILE), "--account"), (("--partition", HOSTILE), "--partition"),
    (("--time", HOSTILE), "--time"), (("--time", "00:99:00"), "--time"), (("--time", "00:00:60"), "--time"),
    (("--recipe", HOSTILE), "--recipe"), (("--workloads-dir", HOSTILE), "--workloads-dir"),
    (("--runtime", HOSTILE), "--runtime"), (("--image", "\x1b]0;title\x07"), "--image"),
    (("--", "--steps", HOSTILE), "workload argument"), (("--", "\u202eevil"), "workload argument"),
])
def test_a_newline_in_any_launch_argument_is_refused_naming_the_option(capsys, tmp_path, argv, option):
    marker = tmp_path / "pwned"
    argv = tuple(a.format(m=marker) for a in argv)
    rc, out, err = run_cli(capsys, "--site", "frontier", "--bare" if option == "--workloads-dir" else "--nodes=1", *argv)
    assert rc == 2 and out == ""
    assert err.startswith(f"gen-recipe: {option} ") and err.count("\n") == 1 and "\x1b" not in err and "\u202e" not in err
    assert not marker.exists()


def _execute(text: str, folder: Path, file_image: bool = False) -> None:
    """Run `text` with stub commands; a script whose image arrives as a file stops at its missing .sha256."""
    from tests.cli.test_injection import STUBS
    stubs = folder / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in STUBS:
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
        (stubs / name).chmod(stat.S_IRWXU)
    (folder / "job.sh").write_text(text)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(folder), "PBS_O_WORKDIR": str(folder), "USER": "nobody"}
    r = subprocess.run(["bash", str(folder / "job.sh")], env=env, cwd=folder, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 or (file_image and r.returncode == 1 and "does not match" in r.stderr), r.stderr


@pytest.mark.parametrize("name", ["frontier", "alps", "hlrs", "supermuc"])
def test_comment_lines_cannot_be_ended_early_whatever_the_job_holds(name, tmp_path):
    """Defence at the sink: a Job built in Python skips the argument checks; every comment and directive line
    still stays one line, and the script runs no payload."""
    marker = tmp_path / "pwned"
    bad = HOSTILE.format(m=marker)
    site = site_mod.load(name)
    listed = site.scheduler.lists_complete and bool(site.scheduler.partitions) and site.host.scheduler != "none"
    if listed:                                   # a partition the site does not list stops before any line is written
        with pytest.raises(UsageError, match="has no such partition"):
            launch.script(site, launch.Job(image=bad, account=bad, partition=bad, time="00:30:00"))
    job = launch.Job(image=bad, account=bad, partition="" if listed else bad, time="00:30:00", workload_args=(bad,))
    text = launch.script(site, job)
    header = text.split("set -euo pipefail")[0].splitlines()
    assert all(ln.startswith("#") for ln in header), header
    _execute(text, tmp_path, file_image=site_mod.load(name).container.image_from == "file")
    assert not marker.exists()


def test_every_edf_the_scripts_write_is_valid_toml_for_hostile_values(tmp_path):
    import re
    import sys
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    from generator.model import runtimes as registry
    s = site_mod.load("alps")
    for value in ('a"b', "a\\b", "a\nb = 1\n[x]", "\x00\x01\x1b[31m\x7f", "tab\there", "'''", '"""', "ünï☃"):
        doc = tomllib.loads(registry.edf(s, "/img" + value, registry.Options(env={"HOSTILE": value, "K.Y": value})))
        assert doc["image"] == "/img" + value and doc["env"]["HOSTILE"] == value and doc["env"]["K.Y"] == value
        text = launch.script(s, launch.Job(image="/img" + value))
        edfs = re.findall(r"^cat > \S+ <<'(\w+)'\n(.*?)\n\1$", text, re.S | re.M)
        assert len(edfs) == 1 and tomllib.loads(edfs[0][1])["image"] == "/img" + value


def test_the_image_hint_quotes_every_word_of_its_commands():
    text = launch.script(site_mod.load("frontier"), launch.Job(image="x;rm -rf /", nodes=1, account="abc123"))
    hint = next(ln for ln in text.splitlines() if ln.startswith("# Image: "))
    assert hint.endswith("gen-recipe build --site frontier --recipe pytorch --format apptainer --out 'x;rm -rf /'")
    text = launch.script(site_mod.load("frontier"), launch.Job(image="x;rm -rf /", account="abc123", registry="r.io/me"))
    assert "apptainer pull 'x;rm -rf /' oras://r.io/me/pytorch-frontier:" in text
    assert "--image 'x;rm -rf /'" in next(ln for ln in text.splitlines() if ln.startswith("# Generated by"))
    text = launch.script(site_mod.load("supermuc"), launch.Job(image="a b.tar.gz", nodes=1, account="pn12ab"))
    assert "--export 'a b.tar.gz' where" in next(ln for ln in text.splitlines() if ln.startswith("# Image: "))


def test_printing_a_bare_script_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run_cli(capsys, "--site", "local", "--bare")
    assert rc == 0 and "GEN_RECIPE_WORKLOADS:=" in out
    assert os.listdir(tmp_path) == []
    rc, out, _ = run_cli(capsys, "--site", "local", "--bare", "--out", "job.sh")   # writing the script makes build/payload
    assert rc == 0 and f'GEN_RECIPE_WORKLOADS:={tmp_path}/build/payload}}"' in (tmp_path / "job.sh").read_text()
    assert (tmp_path / "build" / "payload" / "workloads").is_symlink()


@pytest.mark.parametrize("argv,message", [
    (("--image", ""), "gen-recipe: argument --image: '' is no value: give one, or leave the option out"),   # the parser's rule
    (("--runtime", "nosuch"), "gen-recipe: --runtime 'nosuch': unknown runtime (site frontier has apptainer)"),
])
def test_an_empty_image_and_an_unknown_runtime_are_one_line_errors(capsys, argv, message):
    rc, out, err = run_cli(capsys, "--site", "frontier", *argv)
    assert rc == 2 and out == "" and err.startswith(message) and err.count("\n") == 1


def test_out_refuses_a_symlink_without_advising_a_flag_launch_lacks(capsys, tmp_path):
    target = tmp_path / "elsewhere.sh"
    target.write_text("keep\n")
    (tmp_path / "job.sh").symlink_to(target)
    rc, out, err = run_cli(capsys, "--site", "local", "--out", str(tmp_path / "job.sh"))
    assert rc == 2 and out == "" and f"is a symbolic link: not replaced (name its target {target} instead, or remove the link)" in err
    assert "--follow-symlinks" not in err and target.read_text() == "keep\n"


@pytest.mark.parametrize("value,said", [
    ("1" + "0" * 5000, "1" + "0" * 36 + "... is out of range"),        # past int()'s 4,300 digits: no ValueError
    ("1" + "0" * 400, "1" + "0" * 36 + "... is out of range"),
    ("-1", "-1 is out of range"), ("1_000", "1_000 is not a whole number"), ("\x1b[2J", "\\x1b[2J is not a whole number"),
])
def test_a_count_past_its_range_is_one_short_line(capsys, value, said):
    rc, out, err = run_cli(capsys, "--site", "frontier", "--account", "abc123", "--nodes", value)
    assert rc == 2 and out == "" and f"--nodes: {said} (give 1 to 100000)" in err and len(err) < 300, err
