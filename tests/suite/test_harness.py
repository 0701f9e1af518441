"""The suite's machinery on its own: the fork server protocol, the throttle, the transport check."""

from __future__ import annotations

import subprocess
import sys
import time

from pathlib import Path

import pytest

from generator.model import site
from generator.suite import harness
from suites.test_mpi import transport_problem
from workloads.registry import Size

MNIST = ("--threads", "1", "--batch-size", "8", "--limit-samples", "256", "--warmup", "1")


@pytest.fixture(scope="module")
def local():
    return site.load("local")


def test_forkserver_protocol_and_fresh_processes(local):
    with harness.Server(harness.bare_side(local, sys.executable, "hybrid")) as s:
        a = s.request(f"spawn a mnist {' '.join(MNIST)}")
        b = s.request(f"spawn b mnist {' '.join(MNIST)}")
        assert a["event"] == b["event"] == "ready" and a["pid"] != b["pid"], "each child is a new process"
        chunk = s.request("send a run 2")
        assert chunk["event"] == "chunk" and chunk["steps"] == 2 and chunk["samples"] == 16 and chunk["seconds"] > 0
        done = s.request("close a")
        assert done["event"] == "done" and done["exit_code"] == 0 and done["steps"] == 2
        with pytest.raises(harness.HarnessError, match="no child a"):
            s.request("send a run 1")
        with pytest.raises(harness.HarnessError, match="unknown workload"):
            s.request("spawn c nosuch")


def test_resnet_without_torchvision_is_cannot_run(local):
    try:
        import torchvision  # noqa: F401
        pytest.skip("torchvision is importable here")
    except ImportError:
        pass
    with harness.Server(harness.bare_side(local, sys.executable, "hybrid")) as s:
        with pytest.raises(harness.CannotRunHere):
            s.request("spawn r resnet --batch-size 1")


def test_compare_pairs_fresh_processes_in_abba_chunks(local, tmp_path):
    """3 pairs with a fresh server pair every 2 pairs: 2 server starts per side, set-up run once."""
    w = Size(MNIST, chunks=2, steps=1)
    starts = tmp_path / "starts"
    side = harness.bare_side(local, sys.executable, "hybrid")
    counted = harness.Side("bare", ("sh", "-c", f'echo >> {starts}; exec "$0" "$@"', *side.argv), side.env,
                           setup=(("sh", "-c", f"echo setup >> {tmp_path / 'setup'}"),))
    comp = harness.compare(counted, counted, "mnist", w, 3, per_server=2)
    assert len(comp.pairs) == 3
    for p in comp.pairs:
        assert len(p.bare.work) == len(p.container.work) == 2 and p.ratio > 0
    # what the machine took (generator.suite.fitness): each side's share of its time waiting for a CPU, per pair
    assert len(comp.waits) == len(comp.steal) == 3
    assert all(share is not None and 0 <= share <= 1 for pair in comp.waits for share in pair)
    assert 0 <= comp.load().bare <= 1 and harness.load_record(comp)["waits"] == [list(w) for w in comp.waits]
    assert len(starts.read_text().splitlines()) == 4
    assert (tmp_path / "setup").read_text().splitlines() == ["setup", "setup"]    # once per side


def test_throttle_slows_by_the_requested_fraction():
    """Under --slowdown 0.5 the command is stopped about half of the time: sampled from its process state
    (T = stopped), which other work on the machine does not change the way it changes CPU time."""
    proc = subprocess.Popen([*harness.throttle_argv(0.5), sys.executable, "-c", "while True: pass"])
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        deadline = time.monotonic() + 30
        while not children.read_text().split() and time.monotonic() < deadline:
            time.sleep(0.01)
        child = children.read_text().split()[0]
        states, end = [], time.monotonic() + 2.0
        while time.monotonic() < end:
            states.append(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0])
            time.sleep(0.002)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    stopped = states.count("T") / len(states)
    assert 0.3 <= stopped <= 0.7, (stopped, len(states))


def test_transport_problem():
    shm = {"transport": "shm", "library_version": "Open MPI v4.1.4, package: Debian", "evidence": []}
    tcp = {"transport": "tcp", "library_version": "Open MPI v4.1.4, package: Debian", "evidence": ["mca_btl_tcp"]}
    other = {"transport": "shm", "library_version": "MPICH Version: 4.1.2", "evidence": []}
    assert transport_problem(shm, dict(shm)) is None
    assert "container MPI uses tcp, bare metal uses shm" in transport_problem(shm, tcp)
    assert "container MPI library is" in transport_problem(shm, other)


def test_sides_that_do_not_run_the_same_thing_get_no_verdict(local):
    """The like-for-like guard: a side whose workload runs with another intra-op thread count is refused,
    before any chunk runs, naming what differs."""
    w = Size(MNIST, chunks=2, steps=1)
    one = harness.bare_side(local, sys.executable, "hybrid", {"WORKLOADS_CPUS": "0"})
    two = harness.Side("bare", one.argv, one.env, extra_args=("--threads", "2"))
    with pytest.raises(harness.Unlike, match=r"threads 1 vs 2.*no verdict on mnist"):
        harness.compare(one, two, "mnist", w, 1)
    assert len(harness.compare(one, one, "mnist", w, 1).pairs) == 1


def test_differences_name_a_torch_build():
    a = {"torch": "2.13.0+cpu", "torch_build": "0123456789abcdef", "threads": 1}
    assert harness.differences(a, {**a, "torch_build": "fedcba9876543210"}) == \
        ["torch_build '0123456789abcdef' vs 'fedcba9876543210'"]
    assert harness.differences(a, dict(a)) == []


def test_bare_twins_share_identical_large_files(tmp_path):
    """link_duplicates: a large file identical to the one at the same place in another twin becomes a
    hard link to it; a different file of the same size, a small one and a symlink stay as they are."""
    old, new = tmp_path / "old", tmp_path / "new"
    files = {"lib/torch.so": (b"T" * 4096, b"T" * 4096), "lib/other.so": (b"A" * 4096, b"B" * 4096),
             "small.py": (b"x", b"x")}
    for rel, (a, b) in files.items():
        for root, data in ((old, a), (new, b)):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
    (new / "link.so").symlink_to(new / "lib" / "torch.so")
    assert harness.link_duplicates(new, [tmp_path / "missing", old], min_size=1024) == 4096
    assert (new / "lib" / "torch.so").samefile(old / "lib" / "torch.so")
    assert (new / "lib" / "torch.so").read_bytes() == b"T" * 4096
    assert not (new / "lib" / "other.so").samefile(old / "lib" / "other.so")
    assert (new / "lib" / "other.so").read_bytes() == b"B" * 4096
    assert not (new / "small.py").samefile(old / "small.py")
    assert (new / "link.so").is_symlink() and not list(new.rglob(".*.link"))
    assert harness.link_duplicates(new, [old], min_size=1024) == 0          # already shared: nothing more


def test_one_machines_site_files_share_a_bare_twin(tmp_path):
    """twin_dir: keyed by what the twin holds (the spec, the interpreter, the site's MPI), not by the site's
    name: `local` and `local-slurm` (one machine) share one; another MPI or another spec gets its own."""
    import dataclasses

    from generator.model import site as site_mod
    from generator.recipe import catalog

    def where(s, recipe="pytorch"):
        r = catalog.load(recipe)
        return harness.twin_dir(s, r, r.python(s), tmp_path)

    local, slurm, frontier = (site_mod.load(n) for n in ("local", "local-slurm", "frontier"))
    assert where(local) == where(slurm) and where(local).parent == tmp_path
    assert where(local).name.startswith("pytorch-") and where(local, "llm").name.startswith("llm-")
    assert len({where(local), where(local, "llm"), where(frontier)}) == 3
    other_mpi = dataclasses.replace(local, mpi=dataclasses.replace(local.mpi, version="4.1.5"))
    assert where(other_mpi) != where(local)
