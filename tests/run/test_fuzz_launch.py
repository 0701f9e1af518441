"""The launch-argument fuzzer: hostile values (shell payloads, escape codes, traversal, special files) for every
`gen-recipe launch` option and the workload arguments, on every shipped site × runtime × mode and --bare, through
the CLI in-process. Every case ends with exit 0, or one line on stderr and exit 2 (never a traceback); no
payload runs (each accepted script is executed with stub commands for the launcher, the module system and the
runtimes: a sample in CI, all with --fuzz-long); no file outside the work folder changes and printing writes
nothing; every EDF a script writes is valid TOML; stdout and stderr hold no raw control, escape or
bidirectional character. A few hundred cases in CI, 20,000 with --fuzz-long (README, Hostile input)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import random
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.errors import UNSAFE_FOR_TERMINAL
from generator.model import site as site_mod
from tests.cli.test_injection import STUBS
from tests.helpers import all_sites

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

LONG = "--fuzz-long" in sys.argv
CASES = 20_000 if LONG else 300
EXECUTE_EVERY = 1 if LONG else 8          # CI runs every 8th accepted script (bounded cost), --fuzz-long all
SITES = all_sites()
SITE_RUNTIMES = {name: [rt.name for rt in site_mod.load(name).runtimes] for name in SITES}
FILE_IMAGES = ("img.sif", "pytorch-supermuc.tar.gz")     # made with their .sha256 in the run folder

# {m}: the marker file a payload would create; {s}: the sentinel folder outside the work folder.
PAYLOADS = ("$(touch {m})", "`touch {m}`", "x; touch {m}", "x\ntouch {m} #", "a #b", "#", "'; touch {m}; '",
            '"; touch {m}; "', "${{IFS}}touch${{IFS}}{m}", "EOF\ntouch {m}\nEOF", "x\rtouch {m}", "x && touch {m}",
            "$HOME", "${{HOME}}/x", "a}}b", "-", "--x", "")
ESCAPES = ("\x1b[31mred", "\x1b]0;title\x07", "\u202eevil", "\x9b31m", "\u2028", "x\x00y", "\x7f", "\udcff", "a\tb",
           "\u2066iso", "ünïcødé ☃")
TRAVERSAL = ("../..", "../../etc/passwd", "/etc/passwd", "{s}/file", "{s}", "link-out", "/", "..", "~", "../sentinel/file")
SPECIAL = ("fifo", "/dev/zero", "dir", "/dev/null", "fifo.toml", "fifo.py")
HOSTILE = PAYLOADS + ESCAPES + TRAVERSAL + SPECIAL
VALID = {
    "--recipe": ("pytorch", "llm", "osu"),
    "--workload": ("cnn", "mnist", "llm"),
    "--nodes": ("1", "2", "100000", "0", "-1", "1e3"),
    "--gpus-per-node": ("0", "1", "4", "9"),
    "--tasks-per-node": ("1", "2", "0"),
    "--mode": ("bind", "hybrid"),
    "--image": FILE_IMAGES + ("registry.example.org/gen-recipe/pytorch:0.1.0", "/abs/img.sif", "localhost/x:1@sha256:ab",
                              "a+b:c", "docker://x/y"),
    "--time": ("00:30:00", "1:00:00", "999:59:59", "00:99:00", "00:00:60", "soon"),
    "--account": ("proj1", "a.b-c+d"),
    "--partition": ("debug", "gpu"),
    "--workloads-dir": ("/srv/wl", "rel/wl", "${HOME}/wl", "$SCRATCH/a=b,c"),
    "--runtime": ("podman", "nosuch", "ce", "sarus"),
}
ARGS = ("--steps", "2", "--batch-size", "8")
# --out: only names inside the work folder or traps (an absolute path is the user's own choice: launch writes it)
OUTS = ("job.sh", "sub/job.sh", "fifo", "dir", "/dev/zero", "/dev/null", "link-out", "hard", "..", "", "~", "x\ny.sh",
        "\x1b[31m.sh", "\u202e.sh", "sub/../job2.sh")


@st.composite
def argvs(draw, marker: Path, sentinel: Path) -> tuple[list[str], str | None]:
    """(argv after `launch`, the --out value or None). The shape is picked by a seeded generator (hypothesis skews
    its own choices towards the first and last items, which would leave few accepted scripts); hypothesis adds
    arbitrary text to the hostile corpora."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    texts = draw(st.lists(st.text(max_size=12), min_size=1, max_size=2))
    corpus = [t.format(m=marker, s=sentinel) for t in HOSTILE] + texts

    def bad() -> str:
        return rnd.choice(corpus)

    site = rnd.choice(SITES) if rnd.random() < 0.9 else bad()
    argv = ["--site", site]
    for option, valid in VALID.items():
        if option == "--runtime" and site in SITE_RUNTIMES:
            valid = (*SITE_RUNTIMES[site],) * 3 + valid
        choice = rnd.random()                     # mostly the default, else a valid value, else a hostile one
        if choice < 0.2:
            argv += [option, rnd.choice(valid)]
        elif choice < 0.24:
            argv.append(f"{option}={bad()}")
    if rnd.random() < 0.5:
        argv.append("--bare")
    out = rnd.choice(OUTS) if rnd.random() < 0.3 else None
    if out is not None:
        argv.append(f"--out={out}")
    rest = [rnd.choice(ARGS) if rnd.random() < 0.8 else bad() for _ in range(rnd.randint(0, 4))]
    return argv + (["--", *rest] if rest else []), out


@functools.cache
def _cached_load(name: str):
    return _real_load(name)


_real_load = site_mod.load


def load(name, *args, **kwargs):
    """Shipped sites parsed once (the surface here is the arguments, not site files); anything else for real."""
    return _cached_load(name) if isinstance(name, str) and name in SITES and not args and not kwargs \
        else _real_load(name, *args, **kwargs)


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder` (links not followed) with a digest of what it holds."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            p = Path(root, n)
            st_ = os.lstat(p)
            what = os.readlink(p) if stat.S_ISLNK(st_.st_mode) else hashlib.sha256(p.read_bytes()).hexdigest() \
                if stat.S_ISREG(st_.st_mode) else stat.S_IFMT(st_.st_mode)
            out[str(p.relative_to(folder))] = f"{what}:{stat.S_IMODE(st_.st_mode):o}"
    return out


EDF = re.compile(r"^cat > (\S+\.toml) <<'(\w+)'\n(.*?)\n\2$", re.S | re.M)
RAW = re.compile(f"{UNSAFE_FOR_TERMINAL.pattern}|[\ud800-\udfff]")


class Place:
    """The folders of one fuzzing session: work (the cwd, where --out lands), sentinel (outside: never changes),
    run (where scripts execute), stubs, and the marker a payload would create."""

    def __init__(self, root: Path) -> None:
        self.root, self.work, self.sentinel, self.run = root, root / "work", root / "sentinel", root / "run"
        self.marker, self.stubs = root / "pwned", root / "stubs"
        for d in (self.work, self.sentinel, self.run, self.stubs, self.run / "home"):
            d.mkdir()
        (self.sentinel / "file").write_text("keep\n")
        (self.sentinel / "hard").write_text("keep too\n")
        for name in STUBS:
            (self.stubs / name).write_text("#!/bin/sh\nexit 0\n")
            (self.stubs / name).chmod(stat.S_IRWXU)
        for name in FILE_IMAGES:              # an image file copied in, and its checksum (checked before the job)
            (self.run / name).write_text("image\n")
            (self.run / f"{name}.sha256").write_text(f"{hashlib.sha256(b'image' + bytes([10])).hexdigest()}  {name}\n")
        self.reset()
        self.executed = self.accepted = 0

    def reset(self) -> None:
        """The work folder's traps: a FIFO, a directory, links out (file and folder), a hard link to outside."""
        for p in self.work.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        os.mkfifo(self.work / "fifo")
        os.mkfifo(self.work / "fifo.toml")
        os.mkfifo(self.work / "fifo.py")
        (self.work / "dir").mkdir()
        (self.work / "link-out").symlink_to(self.sentinel / "file")
        os.link(self.sentinel / "hard", self.work / "hard")
        self.before = snapshot(self.work)

    def execute(self, text: str) -> None:
        script = self.run / "job.sh"
        script.write_text(text)
        env = {"PATH": f"{self.stubs}:/usr/bin:/bin", "HOME": str(self.run / "home"), "PBS_O_WORKDIR": str(self.run),
               "LS_SUBCWD": str(self.run), "USER": "nobody", "GEN_RECIPE_KERNEL_CACHE": str(self.run / "kernels")}
        r = subprocess.run(["bash", str(script)], env=env, cwd=self.run, capture_output=True, text=True, timeout=60)
        assert not self.marker.exists(), f"a payload ran:\n{text}"
        file_check = "does not match" in r.stderr and "image_file=" in text    # an image file that is not there
        assert r.returncode == 0 or (r.returncode == 1 and file_check), (r.returncode, r.stderr[-1000:], text)
        self.executed += 1


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> Place:
    return Place(tmp_path_factory.mktemp("fuzzlaunch"))


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["launch", *argv])
    return code, out.getvalue(), err.getvalue()


def check_case(place: Place, argv: list[str], out: str | None) -> None:
    sentinel = snapshot(place.sentinel)
    with contextlib.chdir(place.work), mock.patch.object(site_mod, "load", load):
        code, stdout, stderr = run_cli(argv)
    assert code in (0, 2), (argv, code, stderr)
    # no raw control, escape or bidirectional character; a lone surrogate (an undecodable byte of argv) is raw on
    # stdout only: Python's stderr writes it as a backslash escape
    assert not RAW.search(stdout.replace("\n", "")) and not UNSAFE_FOR_TERMINAL.search(stderr.replace("\n", "")), \
        (argv, stdout[-500:], stderr)
    assert snapshot(place.sentinel) == sentinel, f"{argv} changed a file outside the work folder"
    assert not place.marker.exists(), argv
    now = snapshot(place.work)
    if code == 2:
        assert stdout == "" and stderr.startswith("gen-recipe: ") and stderr.count("\n") == 1, (argv, stderr)
        assert now == place.before, f"{argv} refused but wrote {set(now.items()) - set(place.before.items())}"
        return
    # accepted: nothing on stderr but notes, one line each, about names the site file could not check
    assert all(ln.startswith("gen-recipe: note: --") for ln in stderr.splitlines()), (argv, stderr)
    if out is None:
        assert now == place.before, f"printing wrote {set(now.items()) - set(place.before.items())}"
        text = stdout
    else:
        text = (place.work / out).read_text()
        place.reset()
    place.accepted += 1
    for path, _, edf in EDF.findall(text):
        tomllib.loads(edf)                          # every EDF is valid TOML
        assert path.startswith('"${HOME:-}/.edf/') or path.startswith("${HOME}/.edf/"), path
    if place.accepted % EXECUTE_EVERY == 0:
        place.execute(text)


@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_launch_arguments_give_exit_0_or_one_line_and_run_nothing(place, data):
    argv, out = data.draw(argvs(place.marker, place.sentinel))
    try:
        check_case(place, argv, out)
    except BaseException:
        place.reset()           # a failing example leaves nothing for the next one (its own failure shows, not theirs)
        raise


def test_every_site_runtime_mode_and_bare_twin_runs_hostile_workload_arguments(place):
    """The accepted payloads (workload arguments, image names) on every site × runtime × mode, bare or not, each
    script executed: the fuzzer's sample above covers the rest."""
    args = [p.format(m=place.marker, s=place.sentinel) for p in PAYLOADS if p and "\n" not in p and "\r" not in p]
    for name in SITES:
        s = site_mod.load(name)
        for rt in s.runtimes:
            for mode in rt.mpi_modes:
                for bare in (False, True):
                    image = FILE_IMAGES[1] if s.container.image_from == "file" and rt.name == "charliecloud" else "img.sif"
                    argv = ["--site", name, "--runtime", rt.name, "--mode", mode, "--image", image,
                            *(["--account", "p1"] if s.host.scheduler != "none" else []),
                            *(["--bare"] if bare else []), "--", *args]
                    with contextlib.chdir(place.work), mock.patch.object(site_mod, "load", load):
                        code, stdout, stderr = run_cli(argv)
                    if code == 2 and ("not bind" in stderr or "no host MPI" in stderr):
                        continue
                    assert code == 0, (argv, stderr)
                    for _, _, edf in EDF.findall(stdout):
                        tomllib.loads(edf)
                    place.execute(stdout)
    assert place.executed >= 8 and not place.marker.exists()
    print(f"launch fuzzer: {place.accepted} scripts accepted, {place.executed} executed")
