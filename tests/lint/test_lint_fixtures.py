"""The fixture corpus (tests/fixtures/lint): smelly hand-written files, hpccm's raw output and the
file the real-build test builds, the real-world constructs in realworld/. Each has a sidecar
NAME.expected.json with the findings ([line, rule]), what --fix fixes and what is left afterwards,
and the same for --unsafe-fixes."""

from __future__ import annotations

import importlib.util

import pytest

from generator.lint import Target, lint_text
from generator.lint.fix import fix_text
from generator.lint.model import read_source

from .helpers import CORPUS, FIXTURES, REGEN, REPO, dump_expected, load_expected, sidecar

# Fixes without conditions: none of these may be left after --unsafe-fixes.
ALWAYS_FIXED = {"DL3009", "DL3014", "DL3015", "DL3027", "DL3042", "DL3030", "DL3032", "DL3038", "DL3040",
                "DL3034", "DL3036"}


def pairs(findings) -> list[list]:
    return [[f.line, f.rule] for f in findings]


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_findings_fix_and_what_is_left(path):
    src = read_source(path)
    expected = load_expected(path) if sidecar(path).exists() else {}
    target = Target.parse(expected.get("target", "apptainer"))
    found = lint_text(src.text, src.path, src.kind, target)
    fixed_text, fixed = fix_text(src.text, src.kind)
    left = lint_text(fixed_text, src.path, src.kind, target)
    unsafe_text, unsafe = fix_text(src.text, src.kind, unsafe=True)
    unsafe_left = lint_text(unsafe_text, src.path, src.kind, target)
    actual = {"findings": pairs(found), "fixed": [[f.line, f.rule] for f in fixed], "after_fix": pairs(left),
              "unsafe_fixed": [[f.line, f.rule] for f in unsafe if f.unsafe], "after_unsafe_fix": pairs(unsafe_left)}
    if REGEN:
        data = {"target": expected["target"]} if "target" in expected else {}
        sidecar(path).write_text(dump_expected({**data, **actual}), encoding="utf-8")
        pytest.skip("sidecar rewritten")
    assert actual == {k: expected[k] for k in actual}, "\n".join(map(str, found + left))
    assert found, "a corpus file without findings tests nothing"
    assert not ALWAYS_FIXED & {f.rule for f in unsafe_left}
    assert not any(f.unsafe for f in fixed)
    # fixing again changes nothing
    assert fix_text(fixed_text, src.kind) == (fixed_text, [])
    assert fix_text(unsafe_text, src.kind, unsafe=True) == (unsafe_text, [])


def test_corpus_covers_every_rule_we_own():
    seen = {rule for path in CORPUS for _, rule in load_expected(path)["findings"]}
    own = {f"GR{n:03d}" for n in range(1, 8)} | {f"AP{n:03d}" for n in range(1, 21)}
    assert own <= seen, f"no fixture for {sorted(own - seen)}"
    assert {"DL3003", "DL4006", "DL3013", "DL3008", "DL3033", "SC2046"} <= seen


def test_hpccm_fixtures_are_what_the_script_writes():
    spec = importlib.util.spec_from_file_location("hpccm_raw", REPO / "scripts" / "hpccm_raw.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    outputs = module.outputs()
    assert outputs
    for name, text in outputs.items():
        assert (FIXTURES / "hpccm" / name).read_text(encoding="utf-8") == text, \
            f"tests/fixtures/lint/hpccm/{name} is stale: run .venv/bin/python scripts/hpccm_raw.py"
