"""The suite's runs of an application's workload (generator/suite/harness.py): one run = one value, a run that
reports nothing or fails is one line naming the side, the command and what was expected, times are
turned into higher-is-better speeds, and unlike Python environments get no verdict."""

from __future__ import annotations

import os
import sys

import pytest

from generator.model.app import AppWorkload as Workload
from generator.suite import harness

PY = sys.executable


def run(code: str, label: str = "bare") -> harness.Run:
    return harness.Run(label, (PY, "-c", code), dict(os.environ))


def test_a_run_reports_its_metric():
    w = Workload(command=("x",), json_key="rate", unit="items/s")
    value, seconds = harness._run_once(run("print('warming up'); print('{\"rate\": 12.5}')"), w)
    assert value == 12.5 and seconds > 0


def test_a_run_that_reports_nothing_is_one_line_naming_command_and_expectation():
    w = Workload(command=("x",), json_key="rate", unit="items/s")
    with pytest.raises(harness.HarnessError) as exc:
        harness._run_once(run("print('done')"), w)
    message = str(exc.value)
    assert "\n" not in message and message.startswith("bare: `")
    assert "reported no items/s value" in message and 'a JSON line with key "rate"' in message
    assert "its last output line: 'done'" in message


def test_a_failing_run_names_its_exit_code_and_last_words():
    w = Workload(command=("x",), regex=r"rate: ([0-9.]+)", unit="u")
    with pytest.raises(harness.HarnessError, match=r"podman: `.*` exited with 3 \(boom\)"):
        harness._run_once(run("import sys; print('boom', file=sys.stderr); sys.exit(3)", "podman"), w)


def test_pairs_of_runs_and_times_as_speeds():
    w = Workload(command=("x",), regex=r"took ([0-9.]+) s", unit="s", better="lower")
    comp = harness.compare_runs(run("print('took 2.0 s')"), run("print('took 2.5 s')", "podman"), w, 3)
    assert len(comp.pairs) == 3
    assert all(abs(p.container.speed() / p.bare.speed() - 0.8) < 1e-9 for p in comp.pairs)   # 25% longer = 0.8x
    assert comp.series["a"] == [[2.0]] * 3 and comp.series["b"] == [[2.5]] * 3


def test_unlike_python_environments_get_no_verdict():
    bare = run("import json; print(json.dumps({'torch': '2.13.0', 'tqdm': '4.67.1'}))")
    same = run("import json; print(json.dumps({'torch': '2.13.0', 'tqdm': '4.67.1'}))", "podman")
    other = run("import json; print(json.dumps({'torch': '2.13.0', 'tqdm': '4.66.0'}))", "podman")
    harness.same_packages(bare, same)
    with pytest.raises(harness.Unlike, match=r"tqdm '4.67.1' vs '4.66.0'"):
        harness.same_packages(bare, other)


def test_versions_probe_reads_installed_distributions():
    import json
    import subprocess

    argv = harness.versions_argv(["pytest", "no-such-distribution-x"])
    out = subprocess.run([PY, *argv[1:]], capture_output=True, text=True, check=True).stdout
    found = json.loads(out.splitlines()[-1])
    assert found["pytest"] and found["no-such-distribution-x"] is None
