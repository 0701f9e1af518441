"""The real-world constructs that made `--fix` change what a build produces, and the checks that
were wrong or missing (tests/fixtures/lint/realworld/, one file per construct): the findings, that
`--fix` leaves every meaning-changing rewrite to `--unsafe-fixes` with its reason, and that the
rewrites it does apply keep the built image (podman: files, environment, user, entrypoint)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from generator.lint import DOCKER, Target, lint_text
from generator.lint.fix import fix_text
from generator.lint.model import read_source

from .helpers import FIXTURES

REAL = FIXTURES / "realworld"


def fixes(name: str, unsafe: bool = False):
    src = read_source(REAL / name)
    return fix_text(src.text, src.kind, unsafe=unsafe)


def rules(findings) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in findings]


@pytest.mark.parametrize("name, rule, reason", [
    ("aliases.def", "DL4006", "aliases: sh expands them"),
    ("echo-pin.Dockerfile", "DL4006", "echo with backslash escapes"),
    ("https-after-install.Dockerfile", "DL3015", "drops the packages' Recommends"),
    ("base-image.Dockerfile", "DL3009", "the image looks like a base"),
    ("base-image.Dockerfile", "GR003", "Apptainer ignores USER"),
    ("base-stage.Dockerfile", "DL3009", "line 7 runs `apt-get install -y`, which reads (or may read) the apt lists"),
    ("workdir.Dockerfile", "DL3003", "the WORKDIR inherited from the base image is unknown"),
])
def test_meaning_changing_rewrites_need_unsafe_fixes(name, rule, reason):
    text = (REAL / name).read_text(encoding="utf-8")
    safe_text, safe = fixes(name)
    assert rule not in [f.rule for f in safe if reason.split(":")[0] in f.unsafe]
    assert not any(f.unsafe for f in safe)
    _, unsafe = fixes(name, unsafe=True)
    assert any(f.rule == rule and reason in f.unsafe for f in unsafe), [f.unsafe for f in unsafe]
    if name in ("aliases.def", "echo-pin.Dockerfile", "base-image.Dockerfile", "base-stage.Dockerfile"):
        assert safe_text == text                            # nothing safe to do there


def test_https_after_install_gets_ca_certificates():
    fixed, done = fixes("https-after-install.Dockerfile", unsafe=True)
    assert "apt-get install --no-install-recommends ca-certificates -y curl=7.88.1-10+deb12u8" in fixed
    assert any("a later step uses HTTPS" in f.what for f in done)


def test_workdir_relative_and_inherited():
    fixed, done = fixes("workdir.Dockerfile", unsafe=True)
    assert "WORKDIR /opt/src\nRUN ls\nWORKDIR /opt\n" in fixed              # relative to the stage's WORKDIR
    assert "WORKDIR /build\nRUN ls\nWORKDIR /\n" in fixed                    # under an inherited WORKDIR: unsafe
    cds = [f for f in done if f.rule == "DL3003"]
    assert [f.line for f in cds] == [4, 7, 8] and "symbolic links" in cds[0].unsafe
    assert "inherited from the base image is unknown" in cds[1].unsafe


def test_download_tracking_follows_the_working_directory():
    src = read_source(REAL / "cwd-download.Dockerfile")
    assert "GR002" not in [f.rule for f in lint_text(src.text, src.path, DOCKER)]
    text = ("FROM debian:12\nWORKDIR /tmp/x\nRUN wget -q https://x/a.tar.gz && tar xzf a.tar.gz\n"
            "RUN rm -rf /tmp/x\nUSER 1\nCMD [\"sh\"]\n")
    found = [f for f in lint_text(text, kind=DOCKER) if f.rule == "GR002"]
    assert [f.message.split(" is ")[0] for f in found] == ["/tmp/x/a.tar.gz"]
    assert "deleted only by the RUN on line 4" in found[0].message


def test_tab_after_the_keyword_is_an_instruction():
    src = read_source(REAL / "tab.Dockerfile")
    assert {(3, "GR001"), (4, "DL3014")} <= set(rules(lint_text(src.text, src.path, DOCKER)))
    fixed, _ = fixes("tab.Dockerfile")
    assert "RUN\tapt-get update && apt-get install -y curl=7.88.1-10+deb12u8 && \\" in fixed


@pytest.mark.parametrize("target, found", [("apptainer:1.3.6", True), ("apptainer:1.4.0", False),
                                           ("singularity:4.2.0", True), ("singularity:4.3.0", False),
                                           ("apptainer", False)])
def test_bootstrap_agents_by_version(target, found):
    text = (REAL / "agents-old.def").read_text(encoding="utf-8")
    hits = [f for f in lint_text(text, kind="definition", target=Target.parse(target)) if f.rule == "AP002"]
    assert bool(hits) is found
    text = "Bootstrap: dockerfile\nFrom: .\nFilename: Dockerfile\n"
    assert bool(lint_text(text, kind="definition", target=Target.parse(target))) is (target != "apptainer")


def test_line_separators_and_crlf_bom_survive_the_fix():
    fixed, done = fixes("separators.Dockerfile", unsafe=True)      # apt -> apt-get keeps the .deb files: unsafe
    assert [f.rule for f in done] == ["DL3027"] and "/var/cache/apt/archives" in done[0].unsafe
    assert "\u2028" in fixed and "\f" in fixed and fixed.count("\n") == 6
    fixed, done = fixes("crlf-bom.Dockerfile")
    assert fixed.startswith("\ufeff#") and fixed.count("\r\n") == fixed.count("\n") == 5
    assert "pip install --no-cache-dir six==1.16.0\r\n" in fixed


# ---------------------------------------------------------------------------------------------
# Built with podman: the unsafe fixes change the image, as their reasons say (the safe ones keep it:
# test_lint_equivalence.py)
# ---------------------------------------------------------------------------------------------

BUILD = """FROM {base}
ENV TOOL_HOME=/opt/tool
WORKDIR /opt
RUN mkdir -p /opt/src /opt/x
RUN cd src && echo built > out.txt
RUN cd /opt/x && printf 'data' > a.tar.gz
RUN ls /opt/x > /opt/listing.txt && rm -rf /opt/x
RUN echo "Pin: a\\nPin: b" | tee /opt/pin.txt
CMD ["sh"]
"""
PROBE = ("cd /opt && find . -type f | sort | xargs sha256sum; printf 'user=%s cwd=%s home=%s\\n' \"$(id -u)\" "
         "\"$(pwd)\" \"$TOOL_HOME\"")


def _build(text: str, tmp_path, tag: str) -> tuple[str, dict]:
    path = tmp_path / f"{tag.rsplit(':', 1)[-1]}.Dockerfile"
    path.write_text(text, encoding="utf-8")
    build = subprocess.run(["podman", "build", "-q", "-t", tag, "-f", str(path), str(tmp_path)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run(["podman", "run", "--rm", tag, "sh", "-c", PROBE], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    config = json.loads(subprocess.run(["podman", "image", "inspect", tag], capture_output=True, text=True,
                                       check=True).stdout)[0]["Config"]
    return run.stdout, {k: config.get(k) for k in ("Env", "User", "Entrypoint", "Cmd", "WorkingDir")}


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman not found on PATH (needed to build the images)")
def test_unsafe_fixes_change_the_image_as_their_reasons_say(tmp_path, local_base_image):
    text = BUILD.format(base=local_base_image)
    assert fix_text(text, DOCKER) == (text, [])        # cd -> WORKDIR and SHELL: not provable, so not in --fix
    unsafe, done = fix_text(text, DOCKER, unsafe=True)
    assert "SHELL" in unsafe and "USER 10001:10001" in unsafe and {"DL3003", "DL4006", "GR003"} <= {f.rule for f in done}
    tags = [f"localhost/gen-recipe-lint-meaning:{os.getpid()}-{n}" for n in ("orig", "unsafe")]
    try:
        original, changed = (_build(t, tmp_path, tag) for t, tag in zip((text, unsafe), tags))
        assert changed[1]["User"] == "10001:10001" != original[1]["User"]
        assert "pin.txt" in original[0] and changed[0] != original[0]       # bash's echo keeps the \n
    finally:
        subprocess.run(["podman", "rmi", "-f", *tags], capture_output=True, timeout=120)
