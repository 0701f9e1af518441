"""The output-tree fuzzer: `gen-recipe new-site`, `new-recipe` and `report --out` with hostile names and
output paths (payloads, escape codes, 300-character names, traversal, absolute paths) into trees with planted
links to a sentinel folder (a folder link below the output folder, file links at output names, a hard link),
special files (FIFO, device, a directory where a file goes) and existing files, with and without --force.
Every case must end with exit 0, or one line on stderr and exit 1/2 — never a traceback; no payload runs, the
sentinel folder is unchanged, no temporary file is left and no raw escape code reaches the terminal. A few
hundred cases here, 20,000 with --fuzz-long (README, Hostile input). A link the user names as --out (or above
it) is the user's choice of folder and is followed; links below it are not: the corpus plants them there."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.suite.test_fuzz_report import raw_escape, run, tree
from tests.suite.test_report import results

CASES = 20_000 if "--fuzz-long" in sys.argv else int(os.environ.get("FUZZ_CASES", 400))
PLOTS_EVERY = 10          # every 10th report into old/ (a directory at ratios.png, a FIFO at series.png) draws plots

PAYLOADS = ["$(touch {m})", "`touch {m}`", "x;touch {m}", "a\nb", "#x", "x\x1b[31m", "\x1b]0;t\x07", "\u202ex", "a|b"]
NAMES = ["mysite", "abc", "old", "linkfile", "pytorch", "a" * 300, "../../x", "/abs", "My Site", "", "-x", *PAYLOADS]
OUTS = ["out", "out/sub", "old", "linkfile.toml", "pipe.toml", "pipe", "file.txt", "file.txt/x", "/dev/null",
        "a" * 300, "d/" + "a" * 300, "../x", "../../y", "sub/../out", ".", "", "{abs}", "x y", "$HOME", "*",
        "old/app.toml", "hard.toml", *PAYLOADS]


def plant(base: Path) -> tuple[Path, Path]:
    """base/sentinel (must not change) and base/w/cwd (where the command runs) with its traps."""
    sentinel, cwd = base / "sentinel", base / "w" / "cwd"
    (sentinel / "sub").mkdir(parents=True)
    (sentinel / "keep.txt").write_text("mine")
    cwd.mkdir(parents=True)
    old = cwd / "old"
    old.mkdir()
    (old / "src").symlink_to(sentinel)                       # a folder link below the output folder
    for name in ("app.toml", "report.md", "recipe.py"):
        (old / name).symlink_to(sentinel / "keep.txt")       # file links at output names
    (old / "requirements.txt").symlink_to(sentinel / "sub")
    (old / "ratios.png").mkdir()                             # a directory where a file goes
    os.mkfifo(old / "series.png")
    (cwd / "linkfile.toml").symlink_to(sentinel / "keep.txt")
    os.link(sentinel / "keep.txt", cwd / "hard.toml")
    os.mkfifo(cwd / "pipe.toml")
    os.mkfifo(cwd / "pipe")
    (cwd / "file.txt").write_text("a file")
    (base / "w" / "results.json").write_text(json.dumps(results()))
    return sentinel, cwd


# Words an argument can carry: no NUL and no lone surrogate (argv from the system has neither), no "/" (paths
# are joined from segments, at most two ".." so that nothing lands above the case's folder).
words = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00/"), max_size=12)
SEGMENTS = ["out", "sub", "old", "..", ".", "a" * 300, "linkfile.toml", "pipe", "file.txt", "x y", "$HOME", "*",
            "app.toml", "src", "report.md", *PAYLOADS]
segments = st.one_of(st.sampled_from(SEGMENTS), words)
joined = st.lists(segments, min_size=1, max_size=3).map("/".join).filter(lambda p: p.split("/").count("..") <= 2)


@st.composite
def commands(draw):
    command = draw(st.sampled_from(["new-site", "new-recipe", "report"]))
    argv = [command, "../results.json" if command == "report" else draw(st.one_of(st.sampled_from(NAMES), words))]
    if command == "new-recipe" and draw(st.booleans()):
        argv.append("--python")
    if command == "report" or draw(st.integers(0, 3)):
        argv += ["--out", draw(st.one_of(st.sampled_from(OUTS), joined))]
    if command != "report" and draw(st.booleans()):
        argv.append("--force")
    return argv


def test_fuzzed_output_trees_write_only_inside(tmp_path_factory):
    seen = {"inputs": 0, "refused": 0, "old": 0, "named": 0}
    start = time.monotonic()

    @settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(argv=commands())
    def one(argv):
        base = tmp_path_factory.mktemp("fuzzout")
        sentinel, cwd = plant(base)
        mark = base / "PAYLOAD-RAN"
        argv = [a.replace("{m}", str(mark)).replace("{abs}", str(cwd / "abs")) for a in argv]
        if argv[0] == "report" and argv[-1] == "old":
            seen["old"] += 1
        if argv[0] == "report" and not (argv[-1] == "old" and seen["old"] % PLOTS_EVERY == 1):
            argv.append("--no-plots")
        before = tree(sentinel)
        with contextlib.chdir(cwd):
            code, stdout, stderr = run(*argv)
        seen["inputs"] += 1
        assert code in (0, 1, 2), (argv, code, stderr)
        if code:
            seen["refused"] += 1
            assert stderr.count("\n") == 1 and stderr.startswith("gen-recipe: "), (argv, stderr[:500])
        assert not raw_escape(stdout) and not raw_escape(stderr), (argv, stdout[-300:], stderr[:300])
        assert not mark.exists(), argv
        named = [a for before_a, a in zip(argv, argv[1:]) if before_a == "--out"]
        if named and Path(os.path.realpath(cwd / named[0])).is_relative_to(sentinel.resolve()):
            seen["named"] += 1             # the user named a folder through a link: theirs to write to
        else:
            assert tree(sentinel) == before, argv
        assert not [p for p in (base / "w").rglob("*") if p.name.endswith((".tmp", ".part"))], argv

    one()
    print(f"\noutput-tree fuzz: {seen['inputs']} inputs ({seen['refused']} refused, {seen['named']} --out through a "
          f"link into the sentinel, followed as asked), {time.monotonic() - start:.0f} s, "
          "0 tracebacks, 0 payloads run, 0 files clobbered, 0 raw escape codes")
