"""Run a batch script through Slurm and wait for it: sbatch, the job's state until it ends, its output, one-line errors.

    result = submit(Path("job.sh"), env=minicluster.slurm_env(), timeout=300)
    result.job_id, result.state, result.exit_code, result.output     # COMPLETED, "0:0", the job's output
    result.nodes                                                       # "n[1-2]"
    records = json_lines(result.output)                                # the workload's JSON lines

`submit` queues the job (`sbatch --parsable` returns at once) and asks the controller for its state, first
every 0.2 s and then less often (at most every 5 s): a job of two seconds is seen ending within a
fraction of a second, where `sbatch --wait` (which sleeps 2 s, then 8 s, then 32 s) took 10 s.
A job that ends in any state but COMPLETED raises JobFailed, one line:
`job 12 FAILED (exit code 1:0): <the last lines of its output>`. Running out of `timeout`, Ctrl-C or
any other interruption cancels the job (scancel) and waits until it has left the queue before
the exception goes on. The argv builders are pure; `submit` is the runner.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.errors import CheckFailed

ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")


class JobFailed(CheckFailed):
    """A job that did not complete: the message names its id, state, exit code and output tail."""

    def __init__(self, message: str, job_id: str | None = None, state: str = "", exit_code: str = "",
                 output: str = "") -> None:
        super().__init__(message)
        self.job_id, self.state, self.exit_code, self.output = job_id, state, exit_code, output


@dataclass(frozen=True)
class JobResult:
    job_id: str
    state: str
    exit_code: str          # Slurm's "exit:signal", e.g. "0:0"
    output: str             # the job's stdout and stderr (sbatch --output)
    output_path: Path
    nodes: str              # Slurm's node list, e.g. "n[1-2]"


# -- pure argv builders and parsers ------------------------------------------------------------

def sbatch_argv(script: Path | str, output: Path | str, extra: Sequence[str] = ()) -> list[str]:
    """Queue `script`; stdout says the job id (--parsable)."""
    return ["sbatch", "--parsable", f"--output={output}", *extra, str(script)]


def salloc_argv(nodes: int, time: str, name: str, extra: Sequence[str] = ()) -> list[str]:
    """Allocate `nodes` nodes and return at once (no shell): job steps go into it with SLURM_JOB_ID set."""
    return ["salloc", "--no-shell", f"--nodes={nodes}", f"--time={time}", f"--job-name={name}", *extra]


def sinfo_argv() -> list[str]:
    return ["sinfo", "--noheader", "--format=%P %a %D %t"]


# An option given to sbatch/salloc from the command line (--sbatch-arg): --name=value, value without
# anything a shell or Slurm's own parser would take apart.
OPTION = re.compile(r"--[a-z][a-z-]{0,40}(=[A-Za-z0-9_.:,@%+/=-]{1,200})?")
TIME = re.compile(r"([0-9]+-)?[0-9]{1,3}(:[0-5][0-9]){0,2}")     # ASCII digits, minutes and seconds below 60


def check_options(options: Sequence[str]) -> str | None:
    """Why these sbatch/salloc options cannot be passed on, or None."""
    for opt in options:
        if not OPTION.fullmatch(opt):
            return (f"{ascii(opt)[:60]} is not --name or --name=value with letters, digits and _ . : , @ % + / = - "
                    "(e.g. --account=abc123, --partition=batch, --time=00:30:00)")
        if opt.startswith("--time=") and not TIME.fullmatch(opt[7:]):
            return f"{opt}: give a time as [D-]HH:MM:SS, MM:SS or minutes"
    return None


def given(options: Sequence[str], name: str) -> str | None:
    """The value of --name=value among `options` (the last one), or None."""
    found = [o.split("=", 1)[1] for o in options if o.startswith(f"--{name}=")]
    return found[-1] if found else None


def scancel_argv(job_id: str) -> list[str]:
    return ["scancel", "--full", job_id]


def scontrol_argv(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "--oneliner", job_id]


def squeue_argv(job_id: str) -> list[str]:
    return ["squeue", "--noheader", "--jobs", job_id, "--format=%T"]


def parse_job(text: str) -> dict[str, str]:
    """`scontrol show job --oneliner` -> {"JobState": "FAILED", "ExitCode": "1:0", ...}."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z:/]+)=(\S*)", text))


def job_id_of(sbatch_stdout: str) -> str | None:
    """The job id from `sbatch --parsable` ("12" or "12;cluster")."""
    first = sbatch_stdout.strip().split(";")[0]
    return first if first.isdigit() else None


def tail(text: str, lines: int = 3, width: int = 300) -> str:
    """The last non-empty lines of `text` as one line."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    joined = " | ".join(kept)
    return ("..." + joined[-width:]) if len(joined) > width else joined or "no output"


# srun's own per-task exit lines: the exit code is in the message already, the cause is in the lines before
SRUN_EXIT = re.compile(r"^srun: error: \S+: tasks? [0-9,-]+: Exited with exit code [0-9]+$")


def failure_line(job_id: str, state: str, exit_code: str, output: str) -> str:
    lines = output.splitlines()
    causes = [ln for ln in lines if not SRUN_EXIT.match(ln.strip())]
    return f"job {job_id} {state} (exit code {exit_code}): {tail(chr(10).join(causes if any(causes) else lines))}"


def json_lines(text: str) -> list[dict]:
    """The JSON objects among the lines of `text` (a job's output mixes them with logs)."""
    records = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln.startswith("{"):
            try:
                records.append(json.loads(ln))
            except ValueError:
                continue
    return records


# -- the runner ---------------------------------------------------------------------------------

def _run(argv: list[str], env: Mapping[str, str] | None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def job_info(job_id: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    proc = _run(scontrol_argv(job_id), env)
    return parse_job(proc.stdout) if proc.returncode == 0 else {}


def in_queue(job_id: str, env: Mapping[str, str] | None = None) -> bool:
    proc = _run(squeue_argv(job_id), env)
    return proc.returncode == 0 and any(s in ACTIVE for s in proc.stdout.split())


def cancel(job_id: str, env: Mapping[str, str] | None = None, wait: float = 30) -> None:
    """scancel the job and wait until it has left the queue."""
    _run(scancel_argv(job_id), env)
    deadline = time.monotonic() + wait
    while in_queue(job_id, env) and time.monotonic() < deadline:
        time.sleep(0.3)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def polls(first: float = 0.2, factor: float = 1.5, most: float = 5.0):
    """The pauses between two questions to the controller: short at first (most jobs here end within
    seconds), then longer, at most `most` seconds (a site's controller is shared)."""
    pause = first
    while True:
        yield pause
        pause = min(pause * factor, most)


def submit(script: Path | str, *, env: Mapping[str, str] | None = None, timeout: float = 600,
           output: Path | str | None = None, extra: Sequence[str] = ()) -> JobResult:
    """Submit `script` and return the finished job; raise JobFailed when it did not complete, or when it
    ran out of `timeout` seconds (then it is cancelled). `output` may hold %j (default: <script>-%j.out
    beside the script). Ctrl-C or any other interruption cancels the job before it goes on."""
    script = Path(script).absolute()
    pattern = str(output) if output else str(script.with_name(script.stem + "-%j.out"))
    proc = _run(sbatch_argv(script, pattern, extra), env, timeout=60)
    job_id = job_id_of(proc.stdout) if proc.returncode == 0 else None
    if job_id is None:
        raise JobFailed(f"sbatch {script.name} failed (exit {proc.returncode}): {tail(proc.stderr or proc.stdout)}")
    path = Path(pattern.replace("%j", job_id))
    try:
        info = wait(job_id, env, timeout)
    except BaseException:
        cancel(job_id, env)
        raise
    state, exit_code = info.get("JobState", "?"), info.get("ExitCode", "?")
    out = _read(path)
    if state in ACTIVE:
        cancel(job_id, env)
        raise JobFailed(f"job {job_id} still {state} after {timeout:g} s: cancelled; {tail(out)}",
                        job_id, state, "", out)
    if state != "COMPLETED":
        raise JobFailed(failure_line(job_id, state, exit_code, out), job_id, state, exit_code, out)
    return JobResult(job_id, state, exit_code, out, path, info.get("NodeList", ""))


def wait(job_id: str, env: Mapping[str, str] | None = None, timeout: float = 600) -> dict[str, str]:
    """The job's `scontrol show job` fields once it has ended (COMPLETING counts as not yet: the epilogue
    and the output are not done), or as they were when `timeout` ran out. A job the controller no longer
    knows for 30 s (purged, or the controller gone) is JobFailed."""
    deadline, unknown_since, pauses = time.monotonic() + timeout, None, polls()
    while True:
        info = job_info(job_id, env)
        now = time.monotonic()
        if info.get("JobState") and info["JobState"] not in ACTIVE:
            return info
        if not info:
            unknown_since = unknown_since or now
            if now - unknown_since > 30:
                raise JobFailed(f"job {job_id}: the controller no longer knows it (scontrol show job {job_id})", job_id)
        else:
            unknown_since = None
        if now >= deadline:
            return info
        time.sleep(min(next(pauses), max(deadline - now, 0.01)))


GRANTED = re.compile(r"(?:Granted|Pending) job allocation ([0-9]+)")


def reachable(env: Mapping[str, str] | None = None) -> str | None:
    """Why no Slurm controller answers here, or None."""
    conf = (os.environ if env is None else env).get("SLURM_CONF")
    if conf and not Path(conf).is_file():       # Slurm's commands would retry for a minute
        return f"SLURM_CONF={conf}, which is not a file"
    try:
        proc = _run(sinfo_argv(), env)
    except FileNotFoundError:
        return "sinfo not found: Slurm's commands are not on PATH"
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 30 s"
    if proc.returncode != 0:
        return f"sinfo failed: {tail(proc.stderr or proc.stdout, 1, 200)}"
    return None


def allocate(nodes: int, time_limit: str, *, name: str = "gen-recipe-suite", env: Mapping[str, str] | None = None,
             extra: Sequence[str] = (), timeout: float = 600) -> str:
    """An allocation of `nodes` nodes (salloc --no-shell): its job id, once granted. Waiting longer than
    `timeout`, Ctrl-C or a refusal cancels it and raises JobFailed (one line)."""
    proc = subprocess.Popen(salloc_argv(nodes, time_limit, name, extra), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        proc.wait(timeout=timeout)      # salloc --no-shell returns once the allocation is granted
    except BaseException as exc:
        proc.kill()
        said = proc.communicate()[1] or ""
        found = GRANTED.search(said)
        if found:
            cancel(found.group(1), env)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise JobFailed(f"salloc --nodes={nodes}: no allocation within {timeout:g} s, cancelled ({tail(said)})",
                            found and found.group(1)) from None
        raise
    said = proc.stderr.read()
    found = GRANTED.search(said)
    if proc.returncode != 0 or not found or "Granted" not in said:
        if found:
            cancel(found.group(1), env)
        raise JobFailed(f"{' '.join(['salloc', f'--nodes={nodes}', *extra])}: no allocation (exit {proc.returncode}: "
                        f"{tail(said)})", found and found.group(1))
    return found.group(1)
