"""`gen-recipe lint` as users run it: exit codes, output formats, --explain, bad input, --fix."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from generator.cli import main as cli
from generator import files
from generator.recipe import render
from generator.model import site
from generator.lint.rules import RULES

from .helpers import FIXTURES

SMELLY = FIXTURES / "smelly"


def lint(capsys, *args):
    rc = cli.main(["lint", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def clean_files(tmp_path):
    s = site.load("local")
    for fmt in ("docker", "apptainer"):
        path = tmp_path / render.relpath(s, "osu", fmt)
        files.write_atomic(path, render.recipe_text(s, "osu", fmt))
    return tmp_path / "local"


def test_clean_files_exit_0(capsys, clean_files):
    rc, out, err = lint(capsys, *sorted(clean_files.iterdir()))
    assert (rc, err) == (0, "")
    assert out.strip() == "0 findings in 2 files"


def test_findings_exit_1_one_line_each(capsys):
    rc, out, _ = lint(capsys, SMELLY / "apt.def")
    assert rc == 1
    lines = out.strip().splitlines()
    assert lines[-1] == "8 findings in 1 file"
    assert lines[0].startswith(f"{SMELLY / 'apt.def'}:7: DL3008 warning: ")


def test_json_schema(capsys):
    rc, out, _ = lint(capsys, "--format", "json", SMELLY / "pipe.Dockerfile", SMELLY / "shells.def")
    assert rc == 1
    doc = json.loads(out)
    assert set(doc) == {"version", "files", "findings", "fixed", "summary"}
    assert doc["version"] == 1 and doc["fixed"] == []
    assert doc["files"] == [{"file": str(SMELLY / "pipe.Dockerfile"), "kind": "docker"},
                            {"file": str(SMELLY / "shells.def"), "kind": "definition"}]
    for f in doc["findings"]:
        assert set(f) == {"file", "line", "rule", "severity", "message"}
        assert isinstance(f["line"], int) and f["line"] >= 1
        assert f["severity"] in ("error", "warning", "info", "style")
        assert "\n" not in f["message"]
    summary = doc["summary"]
    assert summary["findings"] == len(doc["findings"]) == sum(summary[s] for s in ("error", "warning", "info", "style"))
    assert summary["files"] == 2


def test_explain_every_rule_and_upstream_urls(capsys):
    for rule_id in RULES:
        rc, out, _ = lint(capsys, "--explain", rule_id.lower())
        assert rc == 0 and out.startswith(f"{rule_id} ({RULES[rule_id].severity}): ")
    assert "https://github.com/hadolint/hadolint/wiki/DL3008" in lint(capsys, "--explain", "DL3008")[1]
    assert "https://www.shellcheck.net/wiki/SC2164" in lint(capsys, "--explain", "SC2164")[1]   # not in our table
    rc, out, err = lint(capsys, "--explain", "AP999")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "AP999" in err


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    (b"\xff\xfe\x00binary", "not a UTF-8 text file"),
    (b"# notes\nhello world\n", "not a recipe"),
])
def test_bad_input_exit_2_one_line(capsys, tmp_path, content, message):
    path = tmp_path / "input.txt"
    if content is not None:
        path.write_bytes(content)
    rc, out, err = lint(capsys, path)
    assert rc == 2 and out == ""
    assert err.startswith("gen-recipe: lint: ") and err.count("\n") == 1
    assert str(path) in err and message in err


@pytest.mark.parametrize("args", [[], ["--no-backup", "x.def"], ["--target", "docker", "x.def"],
                                  ["--target", "apptainer:new", "x.def"], ["--format", "xml", "x.def"]])
def test_bad_options_exit_2(capsys, args):
    rc, out, err = lint(capsys, *args)
    assert rc == 2 and err.startswith("gen-recipe: ") and err.count("\n") == 1


def test_content_decides_when_the_name_does_not(capsys, tmp_path):
    (tmp_path / "recipe.txt").write_text("# a comment\n\nBootstrap: docker\nFrom: debian:12\n"
                                         "%post\n    apt-get install x\n")
    (tmp_path / "build.txt").write_text("# syntax=docker/dockerfile:1\nFROM debian:12\nUSER 1000\n")
    rc, out, _ = lint(capsys, "--format", "json", tmp_path / "recipe.txt", tmp_path / "build.txt")
    assert [f["kind"] for f in json.loads(out)["files"]] == ["definition", "docker"]
    assert rc == 1


def test_directory_lints_recipe_files_only(capsys, tmp_path, clean_files):
    shutil.copy(SMELLY / "apt.Dockerfile", clean_files / "Dockerfile")
    (clean_files / "README.md").write_text("not a recipe\n")
    (clean_files / "Dockerfile.orig").write_text("FROM x\n")          # --fix backups are not linted
    (clean_files / ".hidden.def").write_text("Bootstrap: nonsense\n")
    rc, out, _ = lint(capsys, "--format", "json", tmp_path)
    files = [f["file"] for f in json.loads(out)["files"]]
    assert sorted(os.path.basename(f) for f in files) == ["Dockerfile", "osu.Dockerfile", "osu.def"]
    assert rc == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, out, err = lint(capsys, empty)
    assert rc == 2 and str(empty) in err


def test_target_decides_multi_stage(capsys):
    path = SMELLY / "old-singularity.def"
    assert lint(capsys, path)[0] == 0
    assert lint(capsys, "--target", "singularity:3.2.0", path)[0] == 0
    rc, out, _ = lint(capsys, "--target", "singularity:3.1.0", path)
    assert rc == 1 and out.count("AP008") == 3          # two `Stage:` lines, one `%files from`


def test_fix_keeps_a_backup_and_reports(capsys, tmp_path):
    path = tmp_path / "apt.def"
    original = (SMELLY / "apt.def").read_text()
    path.write_text(original)
    rc, out, _ = lint(capsys, "--fix", path)
    assert rc == 1                              # DL3008 (pins), DL3015 and DL3027 (unsafe) are left
    assert (tmp_path / "apt.def.orig").read_text() == original
    fixed = path.read_text()
    assert "apt-get install -y curl" in fixed and "rm -rf /var/lib/apt/lists/*" in fixed
    lines = out.strip().splitlines()
    assert any(": fixed DL3014: " in line for line in lines) and "unsafe" not in out
    assert [line.split(": ")[1] for line in lines if "warning" in line] == ["DL3008 warning", "DL3008 warning",
                                                                           "DL3027 warning"]
    assert lines[-1] == "fixed 2, 5 findings left in 1 file"
    # the unsafe level adds --no-install-recommends and apt-get (the .deb files stay) with their reasons; the
    # first backup is kept
    rc, out, _ = lint(capsys, "--unsafe-fixes", path)
    assert (tmp_path / "apt.def.orig").read_text() == original
    assert (tmp_path / "apt.def.orig.1").read_text() == fixed
    assert "apt-get install --no-install-recommends -y curl" in path.read_text()
    assert out.count("fixed DL3015: ") == 2 and out.count("(unsafe: drops the packages' Recommends") == 2
    assert "fixed DL3027: apt install -> apt-get install (unsafe: apt deletes the .deb files" in out
    assert out.strip().splitlines()[-1] == "fixed 3 (3 unsafe), 2 findings left in 1 file"


def test_fix_without_backup_and_clean_result(capsys, tmp_path):
    path = tmp_path / "Dockerfile"
    shutil.copy(SMELLY / "root.Dockerfile", path)
    rc, out, _ = lint(capsys, "--fix", "--no-backup", path)             # USER is an unsafe fix
    assert rc == 1 and out.strip().splitlines()[-1] == "fixed 0, 1 finding left in 1 file"
    rc, out, _ = lint(capsys, "--unsafe-fixes", "--no-backup", "--format", "json", path)
    doc = json.loads(out)
    assert rc == 0 and doc["findings"] == [] and [f["rule"] for f in doc["fixed"]] == ["GR003"]
    assert doc["fixed"][0]["unsafe"].startswith("processes that need root") and doc["summary"]["unsafe_fixed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"]
    assert path.read_text().endswith("USER 10001:10001\n")
    rc, out, _ = lint(capsys, "--fix", path)                # nothing to do: no rewrite, no backup
    assert rc == 0 and out.strip() == "fixed 0, 0 findings left in 1 file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"]


def test_fix_keeps_mode_crlf_and_bom(capsys, tmp_path):
    real = tmp_path / "Dockerfile"
    real.write_bytes("\ufeffFROM debian:12\r\nRUN apt install -y curl=7.88.1-10+deb12u8 && apt-get clean && rm -rf /var/lib/apt/lists/*"
                     "\r\nUSER 1\r\n".encode())
    real.chmod(0o640)
    rc, out, _ = lint(capsys, "--fix", real)
    assert "fixed DL3027" in out
    assert real.read_bytes() == ("\ufeffFROM debian:12\r\nRUN apt-get install -y curl=7.88.1-10+deb12u8 && apt-get clean && "
                                 "rm -rf /var/lib/apt/lists/*\r\nUSER 1\r\n").encode()
    assert real.stat().st_mode & 0o777 == 0o640 and (tmp_path / "Dockerfile.orig").stat().st_mode & 0o777 == 0o640


def test_fix_reports_the_fix_limit(capsys, tmp_path, monkeypatch):
    from generator.lint import fix
    path = tmp_path / "Dockerfile"
    path.write_text("FROM debian:12\n" + "RUN pip install --no-cache-dir a==1 && pip install b==1\n" * 3 + "USER 1\n")
    monkeypatch.setattr(fix, "MAX_FIXES", 2)
    rc, out, err = lint(capsys, "--fix", path)
    assert "stopped after 2 fixes; run --fix again" in err and out.count("fixed DL3042") == 2


def test_directory_mode_names_and_skipped_files(capsys, tmp_path):
    for name in ("Dockerfile-cuda", "gpu.dockerfile", "Containerfile.rocm", "Singularity.gpu", "notes.md",
                 "Dockerfile.orig"):
        (tmp_path / name).write_text("FROM debian:12\nUSER 1\n" if "ingularity" not in name else
                                     "Bootstrap: docker\nFrom: debian:12\n")
    rc, out, err = lint(capsys, tmp_path)
    assert out.strip().splitlines()[-1] == "0 findings in 4 files"
    assert f"skipped {tmp_path / 'notes.md'}: its extension says documentation" in err
    assert f"skipped {tmp_path / 'Dockerfile.orig'}: a --fix backup" in err


def test_fix_writes_atomically(capsys, tmp_path, monkeypatch):
    path = tmp_path / "Dockerfile"
    shutil.copy(SMELLY / "root.Dockerfile", path)
    original = path.read_text()

    def fail(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))

    monkeypatch.setattr(os, "replace", fail)
    rc, out, err = lint(capsys, "--unsafe-fixes", path)
    assert rc == 2 and err.startswith("gen-recipe: ") and "cannot write " in err and "Permission denied" in err
    assert path.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"]     # no temporary file left


def test_docs_list_every_rule():
    doc = (FIXTURES.parents[2] / "docs" / "lint.md").read_text(encoding="utf-8")
    missing = [rule_id for rule_id in RULES if rule_id not in doc]
    assert not missing, f"docs/lint.md does not mention {missing}"


def test_build_args_replace_the_defaults_and_bad_ones_are_one_line(capsys, tmp_path):
    path = tmp_path / "app.def"
    path.write_text("Bootstrap: docker\nFrom: debian:{{ DEBIAN }}\n%arguments\n    DEBIAN=12\n"
                    "%post\n    echo {{ VERSION }} > /version\n%runscript\n    exec cat /version\n")
    rc, out, _ = lint(capsys, path)
    assert rc == 1 and ":6: AP021 error: {{ VERSION }} has no value" in out
    rc, out, _ = lint(capsys, "--build-arg", "VERSION=1.0", "--build-arg", "DEBIAN=10", path)
    assert rc == 1 and "AP021" not in out and ":2: GR015 warning: debian:10: Debian 10 left LTS" in out
    for bad in ("VERSION", "A B=1", "V=a\nb"):
        rc, out, err = lint(capsys, "--build-arg", bad, path)
        assert rc == 2 and out == "" and err.count("\n") == 1 and "give NAME=VALUE" in err, err
