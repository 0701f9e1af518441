"""`gen-recipe detect` front: bad input is one line and exit 2, a breaking mismatch exit 1, writes are
atomic and checked. Detection is replaced by a recorded machine where the result must not depend on
this one."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.detect import machine as detect_mod
from generator.model import site as site_mod

from .conftest import detect_kind, run_cli

SITES = Path(__file__).resolve().parents[2] / "sites"


@pytest.fixture
def ifca_machine(monkeypatch):
    facts = detect_kind("openmpi-ucx-cuda")
    monkeypatch.setattr(detect_mod, "detect", lambda **kw: facts)
    return facts


def one_line_error(r, code: int, *words: str) -> None:
    assert r.code == code, (r.out, r.err)
    assert r.err.startswith("gen-recipe: ") and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    for w in words:
        assert w in r.err, r.err


def test_compare_unknown_site():
    one_line_error(run_cli("detect", "--compare", "nosuchsite"), 2, "unknown site 'nosuchsite'")


def test_compare_unreadable_or_invalid_site_file(tmp_path):
    one_line_error(run_cli("detect", "--compare", str(tmp_path / "missing.toml")), 2, "cannot read site file")
    bad = tmp_path / "bad.toml"
    bad.write_text((SITES / "local.toml").read_text().replace('flavour = "openmpi"', 'flavour = "lam"'))
    one_line_error(run_cli("detect", "--compare", str(bad)), 2, "bad.toml", "mpi.flavour")


def test_out_into_missing_directory_writes_nothing(tmp_path):
    target = tmp_path / "nosuchdir" / "mysite.toml"
    one_line_error(run_cli("detect", "--out", str(target)), 2, "does not exist", "create it first")
    assert not target.parent.exists()


def test_out_is_a_directory_or_exists(tmp_path):
    one_line_error(run_cli("detect", "--out", str(tmp_path)), 2, "is a directory")
    existing = tmp_path / "mine.toml"
    existing.write_text("# mine\n")
    one_line_error(run_cli("detect", "--out", str(existing)), 2, "exists", "--force", "--compare")
    assert existing.read_text() == "# mine\n"


@pytest.mark.parametrize("argv, words", [
    (("--name", "My Site"), ("not a valid site name",)),
    (("--timeout", "0"), ("--timeout", "out of range")),
    (("--timeout", "nan"), ("--timeout", "out of range")),
    (("--timeout", "inf"), ("--timeout", "out of range")),
    (("--out", "x.toml", "--compare", "local"), ("not allowed with argument",)),
    (("--bogus",), ("unrecognized arguments",)),
])
def test_bad_arguments(argv, words):
    one_line_error(run_cli("detect", *argv), 2, *words)


def test_writes_a_loadable_site_named_after_the_file(tmp_path, ifca_machine):
    out = tmp_path / "ifca-now.toml"
    r = run_cli("detect", "--out", str(out))
    assert r.code == 0, r.err
    site = site_mod.load(str(out))
    assert (site.name, site.mpi.flavour, str(site.mpi.version)) == ("ifca-now", "openmpi", "4.1.5")
    assert str(out) in r.out and "--compare" in r.out
    assert not list(tmp_path.glob(".*.tmp")), "atomic write leaves no temporary file"
    r = run_cli("detect", "--out", str(out), "--force", "--name", "other")
    assert r.code == 0 and site_mod.load(str(out)).name == "other"


def test_prints_to_stdout_without_out(ifca_machine):
    r = run_cli("detect")
    assert r.code == 0 and r.err == ""
    assert site_mod.parse(r.out, "stdout").name == "detected"


def test_compare_mismatch_exits_1_with_the_message(ifca_machine):
    r = run_cli("detect", "--compare", "ifca")
    assert r.code == 1
    assert ("BREAKS:      mpi.version: host MPI is openmpi 4.1.5, sites/ifca.toml says 4.1.0: the container's OpenMPI "
            "must match — update the TOML or rebuild") in r.out
    assert "Result: the container would break here: 1 mismatch (mpi.version)" in r.out
    one_line_error(r, 1, "sites/ifca.toml does not match this machine: mpi.version")


def test_compare_match_exits_0_and_lists_notes_and_unchecked(tmp_path, ifca_machine):
    site = tmp_path / "ifca-fixed.toml"
    site.write_text((SITES / "ifca.toml").read_text().replace('version = "4.1.0"', 'version = "4.1.5"'))
    r = run_cli("detect", "--compare", str(site))
    assert r.code == 0, r.out + r.err
    assert "Result: no mismatch that would break the container" in r.out
    assert "note:        host.launcher: the launcher is srun on this machine" in r.out
    assert "not checked: host.internet" not in r.out  # ifca says "unknown": nothing to check


def test_out_is_shown_without_raw_control_characters(tmp_path, ifca_machine):
    """The review's finding: detect --out FILE printed the file's name, escape codes and all, to the terminal."""
    from generator.errors import UNSAFE_FOR_TERMINAL

    out = tmp_path / "ifca\x1b]0;title\x07.toml"
    r = run_cli("detect", "--out", str(out), "--name", "ifca-now")
    assert r.code == 0 and out.is_file(), r.err
    assert not UNSAFE_FOR_TERMINAL.search(r.out.replace("\n", "")), r.out
    assert "ifca\\x1b]0;title\\x07.toml" in r.out and "--compare '" in r.out
