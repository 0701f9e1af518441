"""gen-recipe report: pytest-benchmark JSON of a suite run → markdown table + PNG plots."""

from __future__ import annotations

import json
import os

import pytest

from generator.suite import report
from generator.suite.result import KEY, Result
from tests.helpers import run_cli


OVERHEAD = Result(site="local", runtime="charliecloud", mode="hybrid", workload="cnn", metric="throughput",
                  ratio=0.97, low=0.94, high=1.0, pairs=12, verdict="pass", tolerance=(1.0, -0.15, 0.5, "ratio"),
                  bare=(10.0, 11.0, 9.0), container=(9.8, 10.5, 8.9), extra={"ready_s": [[0.1, 0.2]]})
LATENCY = Result(site="local", runtime="podman", workload="mpi", metric="mpi_latency", ratio=0.9, low=0.8,
                 high=1.05, pairs=16, verdict="pass", bare=(1.0, 1.1), container=(1.1, 1.2))


def results() -> dict:
    return {"machine_info": {}, "benchmarks": [
        {"name": "test_overhead[cnn-charliecloud]", "extra_info": {KEY: [OVERHEAD.as_dict()]}},
        {"name": "test_mpi_bare_vs_container[podman]", "extra_info": {KEY: [LATENCY.as_dict()]}},
        {"name": "test_bench_full_matrix", "extra_info": {"files": 72}}]}


def test_result_round_trips_through_json():
    for r in (OVERHEAD, LATENCY):
        assert Result.from_dict(json.loads(json.dumps(r.as_dict()))) == r


def test_rows_from_overhead_and_mpi_entries():
    rows = report.rows(results())
    assert rows == [OVERHEAD, LATENCY]


def test_headline_per_site_names_the_worst_comparison():
    worse = Result(**{**OVERHEAD.as_dict(), "runtime": "podman", "ratio": 0.8, "low": 0.7, "high": 0.9,
                      "verdict": "fail", "tolerance": (1.0, -0.15, 0.5, "ratio")})
    aa = Result(**{**OVERHEAD.as_dict(), "runtime": "bare-bare", "ratio": 0.5, "low": 0.4, "high": 0.6})
    (line,) = report.headlines([OVERHEAD, worse, aa, LATENCY])
    assert line.startswith("1 of 2 workloads within tolerance on local; worst: cnn with podman, 20.0% slower than "
                           "bare metal"), line
    assert "12 pairs, fail" in line and "bare-bare" not in line      # controls are not comparisons


def test_markdown_table():
    md = report.markdown(report.rows(results()))
    assert md.splitlines()[0].startswith("| site | workload | runtime | mode | metric | bare | container | ratio")
    assert "| local | cnn | charliecloud | hybrid | throughput | 10 | 9.8 | 0.970 | 0.940–1.000 | 12 | pass |" in md


def test_eager_and_compiled_side_by_side(tmp_path):
    """Where a workload and runtime have both an eager and a compiled comparison, the report puts them in one
    row: each ratio, what compiling gains per side, the cold start; nothing where there is no pair."""
    compiled = Result(**{**OVERHEAD.as_dict(), "metric": "throughput-compiled", "ratio": 0.95, "low": 0.9, "high": 1.01,
                         "bare": (20.0, 22.0, 18.0), "container": (19.6, 21.0, 17.8),
                         "extra": {"compiled": True, "cold_start_s": [31.5, 33.0]}})
    md = report.compiled_markdown([OVERHEAD, compiled, LATENCY])
    assert md.splitlines()[0].startswith("| site | workload | runtime | eager: container/bare | compiled: container/bare")
    assert ("| local | cnn | charliecloud | 0.970 (0.940–1.000) pass | 0.950 (0.900–1.010) pass | 2× | 2× | "
            "31.5 s / 33 s |") in md
    assert report.compiled_markdown([OVERHEAD, LATENCY]) == ""
    pytest.importorskip("matplotlib")
    src = tmp_path / "results.json"
    doc = results()
    doc["benchmarks"].append({"name": "test_compiled_overhead[cnn-compiled-charliecloud]",
                              "extra_info": {KEY: [compiled.as_dict()]}})
    src.write_text(json.dumps(doc))
    r = run_cli("report", str(src), "--out", str(tmp_path / "out"), "--no-plots")
    assert r.code == 0, r.err
    assert "## Eager and compiled (torch.compile)" in (tmp_path / "out" / "report.md").read_text()


def test_cli_writes_table_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    src = tmp_path / "results.json"
    src.write_text(json.dumps(results()))
    r = run_cli("report", str(src), "--out", str(tmp_path / "out"))
    assert r.code == 0, r.err
    md = (tmp_path / "out/report.md").read_text()
    assert md.startswith("# Container overhead") and "2 of 2 workloads within tolerance on local" in md
    for png in ("ratios.png", "series.png"):
        assert (tmp_path / "out" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "out").glob(".*.tmp"))


@pytest.mark.parametrize("content,words", [
    ("not json", "not JSON"),
    ('{"a": 1}', "not pytest-benchmark JSON"),
    ('{"benchmarks": []}', "no suite comparisons"),
    ('{"benchmarks": [{"name": "x", "extra_info": {"results": [{"ratio": "a"}]}}]}', "missing required key"),
])
def test_bad_input(tmp_path, content, words):
    src = tmp_path / "r.json"
    src.write_text(content)
    r = run_cli("report", str(src), "--out", str(tmp_path / "out"))
    assert r.code in (1, 2) and words in r.err and len(r.err.splitlines()) == 1


def test_missing_file(tmp_path):
    r = run_cli("report", str(tmp_path / "none.json"))
    assert r.code == 2 and "cannot read" in r.err


def test_report_writes_its_set_through_the_write_path(tmp_path):
    """report.md and both PNGs are one set (files.write_set): no fixed temporary name to plant a link at,
    and a link or directory at an output name is refused before any byte is written."""
    pytest.importorskip("matplotlib")
    src = tmp_path / "results.json"
    src.write_text(json.dumps(results()))
    out, victim = tmp_path / "out", tmp_path / "victim"
    out.mkdir()
    victim.write_text("mine")
    (out / ".ratios.png.tmp").symlink_to(victim)            # the old fixed temporary name
    assert run_cli("report", str(src), "--out", str(out)).code == 0
    assert victim.read_text() == "mine" and (out / "ratios.png").read_bytes()[:4] == b"\x89PNG"
    for name, plant in (("series.png", lambda p: p.symlink_to(victim)), ("ratios.png", lambda p: p.mkdir())):
        other = tmp_path / f"out-{name}"
        other.mkdir()
        plant(other / name)
        r = run_cli("report", str(src), "--out", str(other))
        assert r.code == 2 and r.err.count("\n") == 1 and str(other / name) in r.err, r.err
        assert "--follow-symlinks" not in r.err                # report has no such option
        assert sorted(p.name for p in other.iterdir()) == [name] and victim.read_text() == "mine"


DEEP = '{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}"


def record(**kw) -> str:
    doc = results()
    doc["benchmarks"][0]["extra_info"][KEY][0].update(kw)
    return json.dumps(doc)


@pytest.mark.parametrize("text,words", [
    (record().replace('"pairs": 12', '"pairs": 1e400'), "results[0].pairs: expected an integer"),
    (record(runtime=5), "results[0].runtime: expected a string, got an integer 5"),
    ('{"benchmarks": 5}', "benchmarks: expected an array"),
    (DEEP, "nested too deeply"),
    (record(tolerance=[1.0, 0.5]), "results[0].tolerance: expected [reference, lower, upper, unit]"),
    (record(ratio=float("nan")), "results[0].ratio: expected a finite number"),
    (record(ratio=-5), "results[0].ratio: expected a ratio above 0, got"),
    (record(low=0), "results[0].low: expected a ratio above 0"),
    (record(low=10.0, high=2.0), "results[0].low: the interval's low end 10 is above its high end 2"),
    (record(bare=["fast"]), "results[0].bare[0]: expected a finite number"),
    (record(bare=[10 ** 400]), "got an integer 1" + "0" * 56 + "... (not a record"),        # no stray quote
    (record(site=["local"]), "results[0].site: expected a string"),
    (record(workload="a$b$"), "results[0].workload: 'a$b$' is not lower-case"),
    (record(verdict="ok"), "results[0].verdict: expected one of pass, fail"),
    (record(extra=[1]), "results[0].extra: expected an object"),
    ('{"benchmarks": [{"extra_info": {"results": 3}}]}', "benchmarks[0].extra_info.results: expected an array"),
    ('{"benchmarks": [{"extra_info": []}]}', "benchmarks[0].extra_info: expected an object"),
    ('{"benchmarks": ["x"]}', "benchmarks[0]: expected an object"),
])
def test_report_checks_the_results_file_at_the_boundary(tmp_path, text, words):
    """Each field report reads is checked when the file is read: one line naming the file, the JSON path and
    a fix, exit 2 — never a traceback (a fuzzer found these: tests/suite/test_fuzz_report.py)."""
    src = tmp_path / "r.json"
    src.write_text(text)
    r = run_cli("report", str(src), "--out", str(tmp_path / "out"), "--no-plots")
    assert r.code == 2 and r.err.count("\n") == 1 and str(src) in r.err and words in r.err, r.err
    assert not (tmp_path / "out").exists()


def test_report_refuses_special_inputs_and_a_file_as_out(tmp_path):
    src = tmp_path / "r.json"
    src.write_text(json.dumps(results()))
    (tmp_path / "file").write_text("mine")
    os.mkfifo(tmp_path / "fifo")
    for argv, words in (((str(src), "--out", str(tmp_path / "file")), "not a folder"),
                        ((str(tmp_path / "fifo"),), "a FIFO, not a regular file"),
                        (("/dev/zero",), "not a regular file"),
                        ((str(tmp_path),), "a directory, not a regular file")):
        r = run_cli("report", *argv, "--no-plots")
        assert r.code == 2 and r.err.count("\n") == 1 and words in r.err, r.err
    assert (tmp_path / "file").read_text() == "mine"


def test_report_plots_an_interval_that_does_not_hold_its_ratio(tmp_path):
    pytest.importorskip("matplotlib")
    src = tmp_path / "r.json"
    src.write_text(record(ratio=0.5, low=1.2, high=2.0))     # a bootstrap's point can sit outside its interval
    assert run_cli("report", str(src), "--out", str(tmp_path / "out")).code == 0


def test_report_escapes_what_it_echoes(tmp_path):
    """Strings from the results and the command line reach the terminal through errors.shown and report.md
    as markdown escapes (`|` and backquotes too): no raw escape code, no broken table."""
    src = tmp_path / "r\x1b[31m|`x`.json"
    src.write_text(json.dumps(results()))
    out = tmp_path / "out\x1b]0;title\x07"
    r = run_cli("report", str(src), "--out", str(out), "--no-plots")
    assert r.code == 0 and "\x1b" not in r.out + r.err and "\\x1b]0;title\\x07" in r.out
    md = (out / "report.md").read_text()
    assert "From r\\\\x1b[31m\\|\\`x\\`.json." in md and "\x1b" not in md
    hostile = Result(**{**OVERHEAD.as_dict(), "site": "a|b\x1b[31m", "workload": "w\nx", "runtime": "\u202ert"})
    row = report.markdown([hostile]).splitlines()[2]
    assert row.startswith("| a\\|b\\\\x1b[31m | w\\\\nx | \\\\u202ert | hybrid |"), row
    assert "\x1b" not in row and "\u202e" not in row


def test_the_machine_table_shows_each_sides_context_and_waits(tmp_path):
    """Per comparison: each side's scheduling context (the like-for-like fingerprint's) and the share of its time
    it waited for a CPU, the steal and the verdict, `unfit` included; odd values (untrusted JSON) read as '-'."""
    busy = Result(**{**OVERHEAD.as_dict(), "runtime": "podman", "verdict": "unfit", "extra": {
        "environment": {"bare": {"scheduling": "top"}, "container": {"scheduling": "under /libpod_parent"}},
        "load": {"bare": 0.05, "container": 0.3, "steal": 0.0}}})
    odd = Result(**{**OVERHEAD.as_dict(), "extra": {"load": {"bare": 1e400, "container": "x", "steal": True},
                                                    "environment": {"bare": {"scheduling": ["a|b"]}}}})
    md = report.machine_markdown([OVERHEAD, busy, odd, LATENCY])
    lines = md.splitlines()
    assert lines[0] == ("| site | workload | runtime | scheduling bare / container | waited for a CPU bare / container | "
                        "steal | verdict |")
    assert lines[2:] == ["| local | cnn | podman | top / under /libpod_parent | 5.0% / 30.0% | 0.0% | unfit |",
                         "| local | cnn | charliecloud | - / - | - / - | - | pass |"]
    assert report.machine_markdown([OVERHEAD, LATENCY]) == ""
    src = tmp_path / "results.json"
    src.write_text(json.dumps({"benchmarks": [{"name": "t", "extra_info": {KEY: [busy.as_dict()]}}]}))
    r = run_cli("report", str(src), "--out", str(tmp_path / "out"), "--no-plots")
    assert r.code == 0, r.err
    assert "## The machine during each comparison" in (tmp_path / "out" / "report.md").read_text()


def test_a_wait_share_past_floats_range_reads_as_unknown():
    """The machine table's shares come from the results file (untrusted): 10**400 is "-", not an OverflowError."""
    assert report._share(10 ** 400) == "-" and report._share(0.25) == "25.0%" and report._share(float("nan")) == "-"
