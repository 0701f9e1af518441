"""Shared helpers for the workloads: arguments, exit codes, timing, JSON output, serve loop.

Standard library only at import time (torch is imported lazily), so that
``import workloads.common`` works where torch is missing.
"""

import argparse
import json
import os
import platform
import sys
import time

from workloads.registry import WORKLOADS

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_CANNOT_RUN = 77
SCHEMA = 1


def _process_start_epoch():
    """Wall-clock time at which this process started (from /proc), else now."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
        if 0 <= age < 3600:
            return time.time() - age
    except (OSError, ValueError, IndexError):
        pass
    return time.time()


# Process start time (from /proc; else the time this module was imported, before torch):
# the reference for startup_s. Inside a container it includes the runtime's own start-up.
PROCESS_START = _process_start_epoch()


class UsageError(Exception):
    """Bad arguments: reported as '<workload>: error: ...', exit 2."""


class CannotRun(Exception):
    """A requirement is missing here (optional dependency, GPU, server): exit 77."""


class Failure(Exception):
    """An expected run-time failure with a clear message (no traceback): exit 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message.replace("\n", " "))


def _int_at_least(text, least):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
    return value


def positive_int(text):
    return _int_at_least(text, 1)


def nonneg_int(text):
    return _int_at_least(text, 0)


def parser(name, *, steps=10, warmup=1, batch_size=None, batch_help=None,
           modes=None, device=True, serve=True):
    """An ArgumentParser with the common options, described by the workload registry's entry.
    batch_size=None omits --batch-size."""
    p = _Parser(prog=name, description=WORKLOADS[name].description)
    if device:
        p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                       help="device (auto: cuda/ROCm GPU if available, else cpu)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch.set_num_threads(N) (default: torch's default)")
    p.add_argument("--steps", type=positive_int, default=steps,
                   help=f"measured steps (default {steps})")
    p.add_argument("--warmup", type=nonneg_int, default=warmup,
                   help=f"warm-up steps, not measured (default {warmup})")
    if batch_size is not None:
        p.add_argument("--batch-size", type=positive_int, default=batch_size,
                       help=batch_help or f"batch size per process (default {batch_size})")
    if modes:
        p.add_argument("--mode", choices=modes, default=modes[0],
                       help=f"parallel mode (default {modes[0]})")
    p.add_argument("--json-out", metavar="FILE", default=None,
                   help="also write the final JSON line to FILE")
    if serve:
        p.add_argument("--serve", action="store_true",
                       help="after warm-up print a ready line, then run 'run N' commands from stdin")
    return p


class Output:
    """The real stdout, kept for JSON lines; fd 1 is pointed at stderr so that any
    other output (library prints, C code) cannot pollute stdout."""

    def __init__(self):
        sys.stdout.flush()
        fd = os.dup(1)
        os.dup2(2, 1)
        self._out = os.fdopen(fd, "w", buffering=1)
        sys.stdout = sys.stderr

    def line(self, record):
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()


def main(name, body, argv=None):
    """Run body(argv, out) and map exceptions to exit codes; returns the exit code."""
    try:
        return body(sys.argv[1:] if argv is None else argv) or EXIT_OK
    except UsageError as e:
        print(f"{name}: error: {e} (see --help)", file=sys.stderr)
        return EXIT_USAGE
    except CannotRun as e:
        print(f"{name}: cannot run here: {e}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    except Failure as e:
        print(f"{name}: failed: {e}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_FAIL


def log(name, message):
    print(f"[{name}] {message}", file=sys.stderr, flush=True)


# Variables that change how the same code runs: threads, allocator, loader, instruction set.
ENV_THAT_MATTERS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_ARENA_MAX",
                    "MALLOC_CONF", "GLIBC_TUNABLES", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")


def environment():
    """What this process runs with, for the suite's like-for-like check: Python and torch (version and
    build), intra-op threads, CPU affinity, the CPU capability torch dispatches to, BLAS/oneDNN, libc and
    the environment that changes how the same code runs. Two sides of a comparison must agree on it."""
    import hashlib

    torch = sys.modules.get("torch")
    env = {"python": platform.python_version(), "libc": " ".join(platform.libc_ver()),
           "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
           # a preloaded allocator (not the MPI libraries bind mode preloads on purpose)
           "allocator": sorted(os.path.basename(x) for x in os.environ.get("LD_PRELOAD", "").replace(":", " ").split()
                               if any(a in x for a in ("jemalloc", "tcmalloc", "mimalloc"))),
           "scheduling": scheduling_context(),
           **{k: os.environ.get(k) for k in ENV_THAT_MATTERS}}
    if torch is not None:
        env.update(torch=torch.__version__, torch_build=hashlib.sha256(torch.__config__.show().encode()).hexdigest()[:16],
                   threads=torch.get_num_threads(), cpu_capability=torch.backends.cpu.get_cpu_capability(),
                   mkl=torch.backends.mkl.is_available(), mkldnn=torch.backends.mkldnn.is_available())
    return env


def cpu_cgroup(text=None):
    """This process's cgroup for the CPU controller (cgroup v1's cpu line of /proc/self/cgroup, else the unified
    hierarchy's), e.g. "/" or "/libpod_parent/libpod-ab12"; None when unreadable."""
    if text is None:
        try:
            with open("/proc/self/cgroup", encoding="utf-8") as f:
                text = f.read()
        except OSError:
            return None
    lines = [ln.split(":", 2) for ln in text.splitlines() if ln.count(":") >= 2]
    path = next((p for _, controllers, p in lines if "cpu" in controllers.split(",")), None)
    return path if path is not None else next((p for hid, controllers, p in lines if hid == "0" and controllers == ""), None)


def scheduling_context(text=None):
    """Where the kernel's CPU scheduler places this process, coarsely: "top" (the root cgroup, where a process of
    its own session is an autogroup of its own, or a cgroup directly under the root), else "under /FIRST" (a
    group nested under FIRST: podman's libpod_parent shares one weight among all running containers, so a
    measured container there gets less CPU beside other containers than a top-level side). A container in a
    private cgroup namespace (cgroup v2's default) sees "/" and reads as "top"; None when unreadable."""
    path = cpu_cgroup(text)
    if path is None:
        return None
    parts = [p for p in path.split("/") if p]
    return "top" if len(parts) <= 1 else f"under /{parts[0]}"


def waited_s():
    """(seconds on a CPU, seconds runnable but waiting for one) of this thread so far: the first two fields of
    the kernel's /proc/thread-self/schedstat (nanoseconds), or None where the kernel does not keep them. The
    share waited of the time it wanted a CPU is how much the machine gave to something else (the suite's
    fitness check); time stopped by a signal is in neither."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            ran, waited = f.read().split()[:2]
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError):
        return None


def waited_between(before, after):
    """(seconds on a CPU, seconds waiting for one) between two `waited_s()` readings; None where either is None."""
    return None if before is None or after is None else [max(0.0, b - a) for a, b in zip(before, after)]


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise CannotRun(f"torch is not importable ({e})") from None
    return torch


def torch_version():
    """torch.__version__ without importing torch when it is not imported yet."""
    if "torch" in sys.modules:
        return sys.modules["torch"].__version__
    try:
        from importlib.metadata import version
        return version("torch")
    except Exception:
        return None


def setup_torch(args):
    """Seed and thread settings; returns torch."""
    torch = import_torch()
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return torch


def resolve_device(torch, requested):
    """'auto'|'cpu'|'cuda' -> torch.device. Forcing cuda without a GPU raises CannotRun."""
    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if requested == "cuda":
        raise CannotRun("--device cuda requested but torch.cuda.is_available() is False "
                        f"(torch {torch.__version__})")
    return torch.device("cpu")


def device_name(torch, device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def base_record(name, args, *, device="cpu", world_size=1, rank=0, batch_size=None):
    return {
        "workload": name,
        "schema": SCHEMA,
        "metric": "throughput",
        "unit": "samples/s",
        "value": None,
        "higher_is_better": True,
        "time_per_step_s": None,
        "startup_s": None,
        "wall_s": None,
        "steps": getattr(args, "steps", None),
        "warmup": getattr(args, "warmup", None),
        "batch_size": batch_size if batch_size is not None else getattr(args, "batch_size", None),
        "device": str(device),
        "world_size": world_size,
        "rank": rank,
        "torch": torch_version(),
        "python": platform.python_version(),
        "seed": getattr(args, "seed", None),
    }


class Runner:
    """What a workload gives the driver: step() runs one step (or one prompt) and
    returns the number of samples (or tokens) processed by all ranks."""

    rank = 0
    world_size = 1

    def step(self):
        raise NotImplementedError

    def sync(self):
        """Wait for queued device work (cuda.synchronize); no-op on CPU."""

    def broadcast(self, obj):
        """Rank 0's obj on every rank (needed by serve mode under DDP)."""
        return obj

    def begin_measure(self):
        """Called once after warm-up, before the measured steps or the serve loop."""

    def extra(self):
        """Workload-specific keys for the final record."""
        return {}

    def close(self):
        pass


def drive(name, args, runner, record, out):
    """Warm up, then either measure args.steps steps or serve chunks; emit the final line."""
    startup = None
    for _ in range(args.warmup):
        runner.step()
        if startup is None:
            runner.sync()
            startup = time.time() - PROCESS_START
    serve = getattr(args, "serve", False)
    total_steps, total_samples, total_time = 0, 0, 0.0
    runner.begin_measure()

    def timed(n):
        nonlocal startup
        runner.sync()
        w0, t0 = waited_s(), time.perf_counter()
        samples = 0
        for _ in range(n):
            samples += runner.step()
            if startup is None:
                runner.sync()
                startup = time.time() - PROCESS_START
        runner.sync()
        seconds, w1 = time.perf_counter() - t0, waited_s()
        return samples, seconds, waited_between(w0, w1)

    if serve:
        if runner.rank == 0:  # with --warmup 0, startup_s here is the time to ready
            ready = startup if startup is not None else time.time() - PROCESS_START
            # compiled or eager: a side of a comparison must agree with the other on it, as on the rest
            env = {**environment(), **({"compiled": record["compiled"]} if "compiled" in record else {})}
            out.line({"event": "ready", "startup_s": ready, "pid": os.getpid(), "environment": env})
        while True:
            line = None
            if runner.rank == 0:
                line = sys.stdin.readline()
                line = line.strip() if line else "quit"
            line = runner.broadcast(line)
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            if words[0] == "run" and len(words) == 2 and words[1].isdigit() and int(words[1]) > 0:
                n = int(words[1])
                samples, seconds, waited = timed(n)
                total_steps += n
                total_samples += samples
                total_time += seconds
                if runner.rank == 0:
                    out.line({"event": "chunk", "steps": n, "seconds": seconds, "samples": samples,
                              "ran_s": waited and waited[0], "waited_s": waited and waited[1]})
            elif runner.rank == 0:
                out.line({"event": "error",
                          "message": f"unknown command {line!r} (expected 'run N' or 'quit')"})
    else:
        total_samples, total_time, _ = timed(args.steps)
        total_steps = args.steps

    record.update({
        "value": total_samples / total_time if total_time > 0 else None,
        "time_per_step_s": total_time / total_steps if total_steps else None,
        "startup_s": startup,
        "wall_s": time.time() - PROCESS_START,
        "steps": total_steps,
        "samples": total_samples,
        "measured_s": total_time,
    })
    record.update(runner.extra())
    if serve:
        record["event"] = "done"
    if runner.rank == 0:
        emit(record, out, args.json_out)
    runner.close()
    return record


def emit(record, out, json_out=None):
    out.line(record)
    if json_out:
        with open(json_out, "w") as f:
            f.write(json.dumps(record) + "\n")
