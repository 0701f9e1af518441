"""gen-recipe report: pytest-benchmark JSON of a suite run → markdown table + PNG plots."""

from __future__ import annotations

import json

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
    ('{"benchmarks": [{"name": "x", "extra_info": {"results": [{"ratio": "a"}]}}]}', "not gen-recipe's"),
])
def test_bad_input(tmp_path, content, words):
    src = tmp_path / "r.json"
    src.write_text(content)
    r = run_cli("report", str(src), "--out", str(tmp_path / "out"))
    assert r.code in (1, 2) and words in r.err and len(r.err.splitlines()) == 1


def test_missing_file(tmp_path):
    r = run_cli("report", str(tmp_path / "none.json"))
    assert r.code == 2 and "cannot read" in r.err
