"""Launch scripts of the `local-slurm` site through the real scheduler: sbatch and its job's state on the test
cluster, the workload's JSON lines, one-line errors, and no job left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from generator.run import slurmjob

from .conftest import REPO


def launch(out: Path, *argv: str) -> Path:
    """`gen-recipe launch --site local-slurm --out FILE ...`, through the command line."""
    proc = subprocess.run([sys.executable, "-m", "generator.cli.main", "launch", "--site", "local-slurm", "--out", str(out),
                           *argv], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def queue(env) -> str:
    return subprocess.run(["squeue", "--noheader"], env=env, capture_output=True, text=True, timeout=30).stdout


# -- pure parts -----------------------------------------------------------------------------------

def test_argv_builders():
    assert slurmjob.sbatch_argv("/j/run.sh", "/j/run-%j.out") == [
        "sbatch", "--parsable", "--output=/j/run-%j.out", "/j/run.sh"]
    pauses = slurmjob.polls()
    first = [round(next(pauses), 2) for _ in range(12)]
    assert first[:3] == [0.2, 0.3, 0.45] and first[-1] == 5.0 and first == sorted(first)
    assert slurmjob.scancel_argv("12") == ["scancel", "--full", "12"]
    assert slurmjob.scontrol_argv("12") == ["scontrol", "show", "job", "--oneliner", "12"]


def test_parsers():
    info = slurmjob.parse_job("JobId=12 JobName=x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode "
                              "Dependency=(null) ExitCode=1:0 NodeList=n[1-2] StdOut=/j/run-12.out")
    assert (info["JobState"], info["ExitCode"], info["NodeList"], info["StdOut"]) == (
        "FAILED", "1:0", "n[1-2]", "/j/run-12.out")
    assert slurmjob.job_id_of("12\n") == "12" and slurmjob.job_id_of("12;mini\n") == "12"
    assert slurmjob.job_id_of("") is None
    assert slurmjob.json_lines('log\n{"a": 1}\n{broken\n {"b": 2}\n') == [{"a": 1}, {"b": 2}]
    line = slurmjob.failure_line("12", "FAILED", "1:0", "a\n\nb\nc\nd\n")
    assert line == "job 12 FAILED (exit code 1:0): b | c | d"
    assert len(slurmjob.tail("x" * 1000)) < 310
    srun = "ch-run[1]: error: can't stat: /x.sqfs\nsrun: error: n2: task 1: Exited with exit code 1\n"
    assert slurmjob.failure_line("3", "FAILED", "1:0", srun) == \
        "job 3 FAILED (exit code 1:0): ch-run[1]: error: can't stat: /x.sqfs"
    assert slurmjob.failure_line("3", "FAILED", "1:0", srun.split("\n", 1)[1]).endswith("Exited with exit code 1")


# -- real jobs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes,tasks", [(1, 2), (2, 1)], ids=["1node-2ranks", "2nodes-1rank-each"])
def test_bare_mpi_script_runs_through_sbatch(slurm_env, workloads_dir, tmp_path, nodes, tasks):
    script = launch(tmp_path / "job.sh", "--bare", "--workload", "mpi", "--nodes", str(nodes),
                    "--tasks-per-node", str(tasks), "--workloads-dir", str(workloads_dir), "--time", "00:05:00",
                    "--", "--sizes", "1,4k", "--iters", "20", "--warmup", "2")
    assert f"srun --nodes={nodes} --ntasks-per-node={tasks} --mpi=pmix python3 -m workloads.mpi" in script.read_text()
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="minicluster-canary-") as canary:
        result = slurmjob.submit(script, env=slurm_env, timeout=300)
        # Open MPI has the PMIx server remove its top session directory's files when the step ends: with
        # that directory /tmp, every file in /tmp went (minicluster.Layout.tmp_root)
        assert Path(canary.name).exists(), "a file in /tmp went with the step"
    assert (result.state, result.exit_code) == ("COMPLETED", "0:0")
    assert result.nodes == ("n1" if nodes == 1 else "n[1-2]")
    [record] = slurmjob.json_lines(result.output)            # rank 0 reports for every rank
    assert record["workload"] == "mpi" and record["world_size"] == 2
    assert "Open MPI" in record["library_version"]
    assert len(record["evidence"]["per_rank"]) == 2
    assert record["transport"] == ("shm" if nodes == 1 else "tcp")
    assert set(record["latency_us"]) == {"1", "4096"} and all(v > 0 for v in record["latency_us"].values())
    assert not queue(slurm_env).strip()


@pytest.mark.parametrize("nodes,tasks", [(1, 2), (2, 1)], ids=["1node-2ranks", "2nodes-1rank-each"])
def test_charliecloud_mpi_script_runs_through_sbatch(slurm_env, charliecloud_image, tmp_path, nodes, tasks):
    script = launch(tmp_path / "job.sh", "--workload", "mpi", "--nodes", str(nodes), "--tasks-per-node", str(tasks),
                    "--image", charliecloud_image, "--time", "00:05:00", "--", "--sizes", "1,4k", "--iters", "20")
    assert f"srun --nodes={nodes} --ntasks-per-node={tasks} --mpi=pmix ch-run" in script.read_text()
    result = slurmjob.submit(script, env=slurm_env, timeout=300)
    assert result.nodes == ("n1" if nodes == 1 else "n[1-2]")
    [record] = slurmjob.json_lines(result.output)
    assert record["world_size"] == 2 and len(record["evidence"]["per_rank"]) == 2
    assert "Open MPI v4.1.4" in record["library_version"]
    assert record["transport"] == ("shm" if nodes == 1 else "tcp")     # one node's ranks share memory
    assert "ERROR" not in result.output                                # no PMIx/ORTE complaints either
    assert not queue(slurm_env).strip()


def test_a_failing_container_job_is_one_line_and_leaves_no_job(slurm_env, tmp_path):
    script = launch(tmp_path / "job.sh", "--workload", "mpi", "--nodes", "2", "--image",
                    str(tmp_path / "no-such-image.sqfs"))
    with pytest.raises(slurmjob.JobFailed) as failed:
        slurmjob.submit(script, env=slurm_env, timeout=120)
    message = str(failed.value)
    assert "\n" not in message
    assert re.fullmatch(r"job \d+ FAILED \(exit code [1-9]\d*:0\): .*no-such-image\.sqfs.*", message), message
    assert failed.value.job_id in message
    assert not queue(slurm_env).strip()


def test_a_job_past_its_timeout_is_cancelled(slurm_env, tmp_path):
    script = tmp_path / "sleep.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\necho started\nsrun --nodes=2 sleep 300\n")
    with pytest.raises(slurmjob.JobFailed) as failed:
        slurmjob.submit(script, env=slurm_env, timeout=5)
    assert re.fullmatch(r"job \d+ still (RUNNING|PENDING) after 5 s: cancelled; .*", str(failed.value))
    assert not slurmjob.in_queue(failed.value.job_id, slurm_env)
    assert not queue(slurm_env).strip()


def test_ctrl_c_cancels_the_job(slurm_env, tmp_path):
    script = tmp_path / "sleep.sh"
    script.write_text("#!/bin/bash\nsleep 300\n")
    # Ctrl-C as Python sees it: a shell without job control starts background commands with SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler (e.g. `.ci/run &`)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            slurmjob.submit(script, env=slurm_env, timeout=120)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert not queue(slurm_env).strip()


def test_a_job_sbatch_refuses_is_one_line(slurm_env, tmp_path):
    script = tmp_path / "big.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=3\necho never\n")
    with pytest.raises(slurmjob.JobFailed) as failed:
        slurmjob.submit(script, env=slurm_env, timeout=60)
    assert re.fullmatch(r"sbatch big\.sh failed \(exit 1\): sbatch: error: .*[Nn]ode count.*", str(failed.value)), str(failed.value)
    assert failed.value.job_id is None and not queue(slurm_env).strip()


def test_sbatch_options_are_checked_and_read():
    good = ["--account=abc123", "--partition=batch", "--time=00:30:00", "--time=1-00:00:00", "--exclusive",
            "--constraint=nvme", "--qos=normal"]
    assert slurmjob.check_options(good) is None
    for bad in ("--account=a;touch /tmp/x", "-A", "--account=$(id)", "--partition=a b", "--time=soon",
                "--account=a\n#SBATCH --x", "account=abc"):
        problem = slurmjob.check_options([bad])
        assert problem and "\n" not in problem, bad
    assert slurmjob.given(good, "time") == "1-00:00:00" and slurmjob.given(good, "reservation") is None
    assert slurmjob.salloc_argv(2, "00:10:00", "suite", ["--partition=debug"]) == [
        "salloc", "--no-shell", "--nodes=2", "--time=00:10:00", "--job-name=suite", "--partition=debug"]


def test_an_allocation_takes_job_steps_and_is_released(slurm_env):
    job_id = slurmjob.allocate(2, "00:05:00", env=slurm_env, timeout=60)
    try:
        assert slurmjob.in_queue(job_id, slurm_env)
        step = subprocess.run(["srun", "--nodes=2", "--ntasks-per-node=1", "bash", "-c", "echo $SLURMD_NODENAME"],
                              env={**slurm_env, "SLURM_JOB_ID": job_id}, capture_output=True, text=True, timeout=60)
        assert step.returncode == 0, step.stderr
        assert sorted(step.stdout.split()) == ["n1", "n2"]
    finally:
        slurmjob.cancel(job_id, slurm_env)
    assert not queue(slurm_env).strip()


def test_an_allocation_slurm_refuses_is_one_line(slurm_env):
    with pytest.raises(slurmjob.JobFailed) as failed:
        slurmjob.allocate(3, "00:05:00", env=slurm_env, timeout=60)
    message = str(failed.value)
    assert "\n" not in message and re.match(r"salloc --nodes=3: no allocation \(exit 1: salloc: error: .*", message), message
    assert not queue(slurm_env).strip()


def test_inside_an_allocation_the_suite_makes_job_steps_there(slurm_env):
    """pytest run inside an allocation (SLURM_JOB_ID set) with --launch=scheduler: no new job (sbatch tests
    skip saying why), the comparisons' steps go into that allocation. The allocation holds both nodes, so
    a new job could not start: the transport test passing shows its steps ran in ours."""
    job_id = slurmjob.allocate(2, "00:10:00", env=slurm_env, timeout=60)
    try:
        env = {**slurm_env, "SLURM_JOB_ID": job_id, "SLURM_JOB_NUM_NODES": "2"}
        proc = subprocess.run([sys.executable, "-m", "pytest", "suites/test_scheduler.py", "--site=local-slurm",
                               "--launch=scheduler", "--workloads", "mpi", "-k", "script or slower_transport",
                               "-q", "-rs", "-p", "no:cacheprovider"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=900)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        assert re.search(r"1 passed, 4 skipped", out), out[-2000:]
        assert "inside an allocation: sbatch would wait for nodes this job holds" in out
        assert queue(slurm_env).split()[0] == job_id          # still the only job
    finally:
        slurmjob.cancel(job_id, slurm_env)
    assert not queue(slurm_env).strip()
