"""`pytest suites/ --certify KEY --image REF`: the run's verdicts signed at its end (after pytest-benchmark
wrote --benchmark-json); what it cannot certify is one line and a failing exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from generator.certify import sign

REPO = Path(__file__).resolve().parents[2]


def suite(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider", "--site=local",
                           *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_certify_needs_the_image_and_the_results_file(tmp_path):
    private, _ = sign.keygen(tmp_path / "k")
    r = suite("--certify", str(private))
    assert r.returncode == 4 and "--certify KEY: also give --image REF" in r.stderr, r.stderr[-2000:]
    r = suite("--certify", str(tmp_path / "missing.key"), "--image", "x", f"--benchmark-json={tmp_path / 'r.json'}")
    assert r.returncode == 4 and "--certify: " in r.stderr and "missing.key" in r.stderr, r.stderr[-2000:]
    r = suite("--certify", str(private), "--image", "localhost/gen-recipe/pytorch-local:1",
              f"--benchmark-json={tmp_path / 'r.json'}")
    assert r.returncode == 4 and "names podman's own storage, not a registry" in r.stderr, r.stderr[-2000:]


def test_a_run_that_measured_nothing_is_not_certified(tmp_path):
    private, _ = sign.keygen(tmp_path / "k")
    image = tmp_path / "pytorch-local.tar.gz"
    image.write_bytes(b"x")
    results = tmp_path / "results.json"
    r = suite("--certify", str(private), "--image", str(image), f"--benchmark-json={results}", "-k", "no_such_test")
    assert "--certify: the run wrote no " in r.stdout and "nothing to certify" in r.stdout, r.stdout[-2000:]
    assert r.returncode == 2 and not list(tmp_path.glob("*.dsse.json"))
    results.write_text('{"benchmarks": []}')           # an earlier run's file is not this run's results
    import os
    os.utime(results, (1e9, 1e9))
    r = suite("--certify", str(private), "--image", str(image), f"--benchmark-json={results}", "-k", "no_such_test")
    assert r.returncode == 2 and "a file there is from an earlier run" in r.stdout, r.stdout[-2000:]
    assert not list(tmp_path.glob("*.dsse.json"))
