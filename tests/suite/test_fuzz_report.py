"""The results-file fuzzer: mutated pytest-benchmark JSON (types, values, raw tokens such as 1e400 and NaN,
nesting 100,000 deep, payload and escape-code strings, deleted and added keys, truncated text) and special
files (FIFO, device, directory) through `gen-recipe report`. Every case must end with exit 0, or one line
on stderr and exit 1/2 — never a traceback; no payload runs, nothing outside the output folder changes and
no raw escape code reaches the terminal or report.md. A few hundred cases here (a handful with plots),
20,000 with --fuzz-long (README, Hostile input)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import operator
import os
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.errors import UNSAFE_FOR_TERMINAL
from generator.suite.result import KEY, Result
from tests.model.test_fuzz import paths
from tests.suite.test_report import LATENCY, OVERHEAD, results

LONG = "--fuzz-long" in sys.argv
CASES = 20_000 if LONG else int(os.environ.get("FUZZ_CASES", 600))
PLOTS_EVERY = 100                  # every 100th case also draws the plots (about 1 s each)

CONTROL = Result(site="local", runtime="bare-bare", workload="mnist", ratio=1.01, low=0.97, high=1.05, pairs=48,
                 verdict="info", bare=(1.0,), container=(1.0,))
HOG = Result(site="frontier", runtime="apptainer+hog", mode="bind", workload="cnn", metric="throughput", ratio=0.5,
             low=0.4, high=0.6, pairs=3, verdict="fail", tolerance=(1.0, -0.05, 0.1, "ratio"))


def richer() -> dict:
    doc = results()
    doc["benchmarks"].append({"name": "test_controls", "extra_info": {KEY: [CONTROL.as_dict(), HOG.as_dict()]}})
    return doc


BASES = [results(), richer(), {"benchmarks": [{"extra_info": {KEY: [LATENCY.as_dict()]}}]}]


def marker(folder: Path) -> Path:
    return folder / "PAYLOAD-RAN"


PAYLOADS = ["$(touch {m})", "`touch {m}`", "x; touch {m}", "a\nb", "# c", "\x1b[31mred", "\x1b]0;title\x07",
            "\u202egnp.exe", "\u2066x\u2069", "a|b", "`code`", "<b>", "x" * 3000, "", "../../etc/passwd", "/etc/passwd",
            "$x$", "\x00", "\x85", "\u2028", "pass", "info", "bare-bare", "x+hog", "-", "mpi", "ünï", "\ud800"]
RAW = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1" * 5000, "-0.0", "1e308", "5e-324", "true", "null",
       "[]", "{}", '""', "[1, 2]", '[1.0, -0.05, 0.1]', '[1, 2, 3, "ratio"]', '[1, 2, 3, "\\u001b[31m"]',
       "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000]
RAW_MARK = "\u0000raw:"

scalars = st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=30),
                    st.integers(min_value=-2**70, max_value=2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.booleans(), st.none(), st.sampled_from(RAW).map(lambda r: RAW_MARK + r),
                    st.lists(st.one_of(st.floats(), st.sampled_from(PAYLOADS[:8])), max_size=4),
                    st.dictionaries(st.sampled_from(["a", KEY, "site", "\x1b"]), st.integers(), max_size=2))


def dumps(doc) -> str:
    """JSON text of `doc`, raw tokens (RAW_MARK strings) put in as they are."""
    text = json.dumps(doc)
    for raw in RAW:
        text = text.replace(json.dumps(RAW_MARK + raw), raw)
    return text


@st.composite
def texts(draw) -> str:
    base = BASES[draw(st.integers(0, len(BASES) - 1))]
    m = draw(st.integers(0, 19))
    if m == 0:                                  # broken text: truncated, spliced
        text = json.dumps(base)
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + draw(st.text(max_size=20)) + text[cut + draw(st.integers(0, 40)):]
    if m == 1:
        return dumps(draw(scalars))             # not an object at all
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):       # 1-3 values set, deleted or added (as tests/model/test_fuzz.py)
        found = [path for path, _ in paths(doc)]
        if not found:
            break
        *up, last = draw(st.sampled_from(found))
        parent = functools.reduce(operator.getitem, up, doc)
        action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        if action == "add" and isinstance(parent, dict):
            last = draw(st.sampled_from(["extra_info", KEY, "site", "tolerance", "\x1b[31m"]))
        if action == "delete":
            del parent[last]
        else:
            parent[last] = draw(scalars)
    return dumps(doc)


SPECIAL = ["fifo", "/dev/zero", "/dev/null", "dir", "missing", "link-to-dev", "huge"]


@st.composite
def cases(draw):
    special = draw(st.integers(0, 49)) == 0
    return (draw(st.sampled_from(SPECIAL)) if special else None, draw(texts()))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def tree(folder: Path) -> dict:
    """Every entry below `folder` with its kind and content hash (links as their targets)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = os.readlink(p) if p.is_symlink() else \
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def raw_escape(text: str) -> bool:
    return bool(UNSAFE_FOR_TERMINAL.search(text.replace("\n", "")))


def source(special: str | None, text: str, folder: Path) -> Path:
    if special in ("/dev/zero", "/dev/null"):
        return Path(special)
    src = folder / ("r\x1b[31m.json" if len(text) % 7 == 0 else "results.json")     # a hostile file name too
    if special == "fifo":
        os.mkfifo(src)
    elif special == "dir":
        src.mkdir()
    elif special == "link-to-dev":
        src.symlink_to("/dev/zero")
    elif special == "huge":
        with open(src, "wb") as fh:
            fh.truncate(65 << 20)
    elif special is None:
        src.write_text(text.replace(RAW_MARK, ""), encoding="utf-8", errors="surrogatepass")
    return src


def test_fuzzed_results_files_give_exit_0_or_one_line(tmp_path_factory):
    seen = {"inputs": 0, "plots": 0, "refused": 0}
    start = time.monotonic()

    @settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(case=cases())
    def one(case):
        special, text = case
        plots = seen["inputs"] % PLOTS_EVERY == PLOTS_EVERY - 1
        folder = tmp_path_factory.mktemp("fuzzreport")
        text = text.replace("{m}", str(marker(folder)))
        sentinel = folder / "sentinel"
        sentinel.mkdir()
        (sentinel / "keep").write_text("mine")
        out = folder / "out"
        out.mkdir()
        (out / ".ratios.png.tmp").symlink_to(sentinel / "keep")      # the old fixed temporary name, planted
        before = tree(sentinel)
        src = source(special, text, folder)
        code, stdout, stderr = run("report", str(src), "--out", str(out), *(() if plots else ("--no-plots",)))
        seen["inputs"] += 1
        seen["plots"] += plots
        assert code in (0, 1, 2), (code, stderr)
        if code:
            seen["refused"] += 1
            assert stderr.count("\n") == 1 and stderr.startswith("gen-recipe: "), stderr[:500]
            assert not (out / "report.md").exists()
        else:
            assert not raw_escape((out / "report.md").read_text())
        assert not raw_escape(stdout) and not raw_escape(stderr), (stdout[-300:], stderr[:300])
        assert not marker(folder).exists()
        assert tree(sentinel) == before
        assert sorted(p.name for p in out.iterdir()) in ([".ratios.png.tmp"], [".ratios.png.tmp", "report.md"],
                                                         [".ratios.png.tmp", "ratios.png", "report.md", "series.png"])

    one()
    print(f"\nreport fuzz: {seen['inputs']} inputs ({seen['plots']} with plots, {seen['refused']} refused), "
          f"{time.monotonic() - start:.0f} s, 0 tracebacks, 0 payloads run, 0 files clobbered, 0 raw escape codes")


def test_the_plots_take_every_valid_record(tmp_path):
    """Records the schema lets through, at the edges (low > ratio, 1e15, zero and negative speeds, no pairs)
    are drawn without an error."""
    import dataclasses

    from generator.suite import report

    edges = [dataclasses.replace(OVERHEAD, ratio=0.5, low=0.9, high=0.4, bare=(), container=(-1e15, 1e15)),
             dataclasses.replace(OVERHEAD, runtime="podman", ratio=1e15, low=0.0, high=1e15, pairs=0,
                                 tolerance=(-1e15, 1e15, 0.0, "ratio")),
             dataclasses.replace(LATENCY, ratio=0.0, low=0.0, high=0.0, bare=(0.0,), container=(0.0,)), CONTROL, HOG]
    pngs = report.plots(edges)
    assert all(png[:8] == b"\x89PNG\r\n\x1a\n" for png in pngs.values())
