"""Writes clobber nothing: devices, directories, links and hard links are refused, modes are kept, an
interrupted run leaves the old set or the new one and no temporary files, concurrent runs are locked out.
Also: a shipped site name wins over a same-named file here, and detect never writes credentials."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator import files
from generator.detect.machine import detect
from generator.errors import UsageError
from generator.detect.toml import site_toml

from tests.helpers import run_cli

REPO = Path(__file__).resolve().parents[2]


def one_line(r, code: int = 2) -> str:
    assert r.code == code and r.err.count("\n") == 1 and "Traceback" not in r.err, (r.code, r.err)
    return r.err


def test_device_directory_and_file_in_the_way_are_refused(tmp_path):
    assert "device or special file" in one_line(run_cli("launch", "--site", "local", "--out", "/dev/null"))
    assert Path("/dev/null").is_char_device()
    (tmp_path / "dir").mkdir()
    assert "is a directory" in one_line(run_cli("launch", "--site", "local", "--out", str(tmp_path / "dir")))
    (tmp_path / "file").write_text("mine")
    assert "not a directory" in one_line(run_cli("--site", "local", "--out", str(tmp_path / "file"))).lower()
    assert (tmp_path / "file").read_text() == "mine"
    os.mkfifo(tmp_path / "fifo")
    assert "special file" in one_line(run_cli("launch", "--site", "local", "--out", str(tmp_path / "fifo")))


def test_unwritable_places_and_a_full_disk_are_one_line(tmp_path):
    assert "cannot" in one_line(run_cli("--site", "local", "--out", "/proc/gen-recipe-test"))
    r = subprocess.run([sys.executable, "-m", "generator.cli.main", "--list-sites"], stdout=open("/dev/full", "w"),
                       stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "No space left" in r.stderr, r.stderr


def test_links_are_refused_or_followed_and_modes_kept(tmp_path):
    out = tmp_path / "out"
    assert run_cli("--site", "local", "--recipe", "osu", "--out", str(out), "-q").code == 0
    docker = out / "local" / "osu.Dockerfile"
    docker.write_text("old")
    docker.chmod(0o600)
    assert run_cli("--site", "local", "--recipe", "osu", "--out", str(out), "-q").code == 0
    assert docker.read_text().startswith("# syntax") and (docker.stat().st_mode & 0o777) == 0o600

    real = tmp_path / "real.Dockerfile"
    real.write_text("old")
    docker.unlink()
    docker.symlink_to(real)
    assert "symbolic link" in one_line(run_cli("--site", "local", "--recipe", "osu", "--out", str(out), "-q"))
    assert real.read_text() == "old" and docker.is_symlink()
    assert run_cli("--site", "local", "--recipe", "osu", "--out", str(out), "-q", "--follow-symlinks").code == 0
    assert docker.is_symlink() and real.read_text().startswith("# syntax")

    docker.unlink()
    real.write_text("old again")
    os.link(real, docker)
    assert "hard link" in one_line(run_cli("--site", "local", "--recipe", "osu", "--out", str(out), "-q"))


def test_a_concurrent_run_is_locked_out(tmp_path):
    folder = tmp_path / "local"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(UsageError, match="being written by another gen-recipe run"):
            files.write_set({folder / "a": "x"})
    finally:
        os.close(fd)
    files.write_set({folder / "a": "x"})
    assert (folder / "a").read_text() == "x"


def test_sigterm_leaves_the_old_set_or_the_new_one_and_no_temporary_files(tmp_path):
    out = tmp_path / "out"
    assert run_cli("--site", "local", "--out", str(out), "-q").code == 0
    old = {p.name: p.read_text() for p in (out / "local").iterdir()}
    site = tmp_path / "mine.toml"
    site.write_text((REPO / "sites" / "local.toml").read_text().replace('name = "local"', 'name = "local"', 1)
                    .replace("description = \"", "description = \"changed: ", 1))
    rng = random.Random(1)
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, "-m", "generator.cli.main", "--site", str(site), "--out", str(out), "-q"],
                                cwd=REPO, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        names = sorted(p.name for p in (out / "local").iterdir())
        assert not [n for n in names if n.startswith(".")], names
        now = {n: (out / "local" / n).read_text() for n in names}
        changed = [n for n in now if now[n] != old[n]]
        assert changed in ([], sorted(now)), f"a mix of old and new files: {changed}"


def test_a_shipped_site_name_wins_over_a_file_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("frontier").write_text("not a site file")
    r = run_cli("--site", "frontier", "--recipe", "osu", "--out", "out", "-q")
    assert r.code == 0 and "say ./frontier for it" in r.err
    assert "frontier: line 1" in one_line(run_cli("--site", "./frontier", "--out", "out2"))


def test_detect_writes_no_credentials():
    env = {"DOCKER_HOST": "tcp://alice:s3cret-pw@docker.example.org:2376", "LOADEDMODULES": "gcc/12",
           "MY_API_TOKEN": "tok-123", "CRAY_MPICH_DIR": "/opt/cray/pe/mpich/8.1.31/ofi/gnu/9.1"}
    facts = detect(runner=lambda argv: (0, "\n".join(f"{k}={v}" for k, v in env.items())), root="/nonexistent", env=env)
    text = site_toml(facts, "mine")
    assert "s3cret-pw" not in text and "tok-123" not in text and "alice" not in text


def test_here_document_cannot_be_ended_early_and_names_are_refused():
    from generator import quoting
    text = 'image = "x"\nEOF\n[env]\nA = "$(touch /tmp/x)"\n'
    marker = quoting.heredoc_marker(text)
    assert marker != "EOF" and marker not in text.splitlines() and quoting.heredoc_marker("a\nb\n") == "EOF"
    with pytest.raises(UsageError, match="not an environment variable name"):
        quoting.name("$(touch X)")
    assert quoting.comment("two\nlines\x1b[31m") == "# two lines [31m"


@pytest.mark.parametrize("argv", [("--tasks-per-node", "-3"), ("--gpus-per-node", "-1"), ("--nodes", "0"),
                                  ("--nodes", "1e9")])
def test_launch_refuses_counts_out_of_range(argv):
    assert "out of range" in one_line(run_cli("launch", "--site", "local", *argv)) or \
        "not a whole number" in run_cli("launch", "--site", "local", *argv).err


def test_launch_bare_payload_folder_is_checked_before_the_script_is_written(tmp_path, monkeypatch):
    """`launch --bare --out` makes ./build/payload/workloads (a link to the package): a linked build or payload
    folder, or a file of the user's at its place, is refused before the script is written; nothing followed."""
    monkeypatch.chdir(tmp_path)
    argv = ("launch", "--site", "local", "--workload", "mnist", "--bare", "--out", "bare.sh")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "payload").symlink_to(outside)
    assert "not a folder of its own" in one_line(run_cli(*argv))
    assert not list(outside.iterdir()) and not (tmp_path / "bare.sh").exists()
    (tmp_path / "build" / "payload").unlink()
    (tmp_path / "build" / "payload" / "workloads").mkdir(parents=True)
    assert "build/payload/workloads: not the link" in one_line(run_cli(*argv))
    assert sorted(p.name for p in (tmp_path / "build" / "payload").iterdir()) == ["workloads"]
    assert not (tmp_path / "bare.sh").exists()
    (tmp_path / "build" / "payload" / "workloads").rmdir()
    r = run_cli(*argv)
    assert r.code == 0 and (tmp_path / "bare.sh").is_file(), r.err
    assert (tmp_path / "build" / "payload" / "workloads").is_symlink()
