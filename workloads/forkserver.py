"""python -m workloads.forkserver: fresh workload processes without paying the torch import each time.

The benchmark suite runs one server bare and one inside the container. Each has imported torch (and
done nothing with it, so no threads exist yet) and forks a child per request: every child is a new
process — with its own lasting speed, the unit the statistics replicate over — that starts in
milliseconds instead of seconds. The children run the workload's --serve loop; the server relays.

Protocol: one line per command on stdin, one JSON line per answer on stdout, every answer tagged
with the child id:
    spawn ID NAME ARG...   fork a child running `python -m workloads.NAME ARG... --serve`;
                           answers the child's "ready" line (or {"event": "exit", "code": N})
    send ID LINE...        pass LINE to the child (e.g. "run 5"); answers the child's reply
    close ID               ask the child to quit; answers its final line plus its exit code
    quit                   end the children and the server
The server's first line is {"event": "server-ready", "pid": ..., "torch": ...}.
WORKLOADS_CPUS (e.g. "1") pins the server and its children to those CPUs.
"""

import importlib
import json
import os
import signal
import sys
import time

from workloads import common
from workloads.registry import WORKLOADS
# Imported once by the server, so that children start in a fraction of a second: the optimisers
# import torch._dynamo lazily (~2 s); the llm workload transformers' LLaMA (~1.5 s idle, 3 s beside a
# busy loop), imported by the server at its first llm child (before that fork), not by every server.
# Optional ones that are missing are skipped. None of them starts a thread.
PRELOAD = ("torch._dynamo", "torch.optim")
PRELOAD_FOR = {"llm": ("transformers", "transformers.models.llama.modeling_llama")}


def _child(name, argv, stdin_fd, stdout_fd):
    """In the forked child: wire the pipes to fds 0/1 and run the workload; never returns."""
    os.dup2(stdin_fd, 0)
    os.dup2(stdout_fd, 1)
    sys.stdin = os.fdopen(0, "r", buffering=1)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    common.PROCESS_START = time.time()  # this process's start: startup_s counts from the fork
    code = 1
    try:
        module = importlib.import_module(f"workloads.{name}")
        code = module.main([*argv, "--serve"])
    finally:
        sys.stdout.flush()
        os._exit(code or 0)


class Server:
    def __init__(self, out):
        self.out = out
        self.children = {}   # id -> (pid, writer, reader)

    def answer(self, cid, record):
        self.out.line({"id": cid, **record})

    def _read(self, cid):
        pid, _, reader = self.children[cid]
        line = reader.readline()
        if line:
            try:
                return json.loads(line)
            except ValueError:
                return {"event": "error", "message": f"child printed non-JSON: {line.strip()[:200]}"}
        _, status = os.waitpid(pid, 0)
        del self.children[cid]
        return {"event": "exit", "code": os.waitstatus_to_exitcode(status)}

    def spawn(self, cid, name, argv):
        if name not in WORKLOADS:
            return self.answer(cid, {"event": "error", "message": f"unknown workload {name!r}"})
        if cid in self.children:
            return self.answer(cid, {"event": "error", "message": f"child {cid} exists"})
        preload(PRELOAD_FOR.get(name, ()))
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(to_child_w)
            os.close(from_child_r)
            for _, writer, reader in self.children.values():
                writer.close()
                reader.close()
            _child(name, argv, to_child_r, from_child_w)
        os.close(to_child_r)
        os.close(from_child_w)
        self.children[cid] = (pid, os.fdopen(to_child_w, "w", buffering=1), os.fdopen(from_child_r, "r"))
        self.answer(cid, self._read(cid))

    def send(self, cid, line):
        if cid not in self.children:
            return self.answer(cid, {"event": "error", "message": f"no child {cid}"})
        self.children[cid][1].write(line + "\n")
        self.answer(cid, self._read(cid))

    def close(self, cid):
        if cid not in self.children:
            return self.answer(cid, {"event": "error", "message": f"no child {cid}"})
        pid, writer, reader = self.children[cid]
        writer.write("quit\n")
        writer.close()
        final = reader.readline()
        reader.close()
        _, status = os.waitpid(pid, 0)
        del self.children[cid]
        record = json.loads(final) if final.strip() else {"event": "exit"}
        self.answer(cid, {**record, "exit_code": os.waitstatus_to_exitcode(status)})

    def stop(self):
        for pid, writer, reader in self.children.values():
            writer.close()
            reader.close()
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass
        self.children.clear()


def preload(names):
    """Import `names` (already imported ones cost nothing; missing optional ones are skipped)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def pin_from_env():
    """WORKLOADS_CPUS=1 or 0,2: pin the server (and so its children) to those CPUs, on both sides alike."""
    cpus = os.environ.get("WORKLOADS_CPUS", "")
    if cpus:
        try:
            os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
        except (ValueError, OSError) as e:
            raise common.UsageError(f"WORKLOADS_CPUS={cpus!r}: {e}") from None


def serve(argv=None):
    pin_from_env()
    out = common.Output()
    torch = common.import_torch()  # imported, not used: no threads before fork
    preload(PRELOAD)
    server = Server(out)
    out.line({"event": "server-ready", "pid": os.getpid(), "torch": torch.__version__})
    try:
        for raw in sys.stdin:
            words = raw.split()
            if not words:
                continue
            cmd, args = words[0], words[1:]
            if cmd == "quit":
                break
            if cmd == "spawn" and len(args) >= 2:
                server.spawn(args[0], args[1], args[2:])
            elif cmd == "send" and len(args) >= 2:
                server.send(args[0], " ".join(args[1:]))
            elif cmd == "close" and len(args) == 1:
                server.close(args[0])
            else:
                out.line({"event": "error", "message": f"bad command {raw.strip()!r}"})
    finally:
        server.stop()
    return 0


def main(argv=None):
    return common.main("forkserver", serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
