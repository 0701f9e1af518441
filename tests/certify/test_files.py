"""Certificates beside an exported file (air-gapped sites), and the commands as a user types them: every
way a certificate can be wrong ends in exit 1 with its reason; bad input in exit 2, one line."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from generator.certify import certificate, sign
from generator.certify.statement import PROVENANCE_TYPE, SBOM_TYPE, VERDICT_TYPE, statement, subject
from generator.cli import main as cli

REPO = Path(__file__).resolve().parents[2]


def in_process(capsys, *argv) -> subprocess.CompletedProcess:
    """The command run by the CLI's own main (a subprocess costs a second or more on a busy machine)."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out, err)


def gen_recipe(*argv, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "generator.cli.main", *argv], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.fixture
def exported(tmp_path):
    """A file as `build --export` leaves it, with a signed SBOM and provenance beside it."""
    image = tmp_path / "pytorch-local.tar.gz"
    image.write_bytes(b"an image's bytes")
    private, public = sign.keygen(tmp_path / "site.key")
    digest = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    subj = certificate.subjects_of(str(image), digest)
    made = {"sbom": statement(subj, SBOM_TYPE, {"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [
                {"name": "openmpi-bin", "version": "4.1.4-3", "purl": "pkg:deb/debian/openmpi-bin@4.1.4-3"},
                {"name": "torch", "version": "2.13.0+cpu", "purl": "pkg:pypi/torch@2.13.0%2Bcpu"}]}),
            "provenance": statement(subj, PROVENANCE_TYPE, {"buildDefinition": {"externalParameters": {"site": "local"}},
                                                            "runDetails": {}})}
    certificate.publish(str(image), made, sign.load_signer(private))
    return image, private, public


def test_the_file_and_its_envelopes_verify_and_print_the_table(exported):
    image, _, public = exported
    r = gen_recipe("verify", str(image), "--key", str(public))
    assert r.returncode == 0, r.stderr
    assert "2 signed statement(s) (1 sbom, 1 provenance), found in the files beside it" in r.stdout
    assert "openmpi-bin" in r.stdout and "torch" in r.stdout and "site local" in r.stdout


def _edit(path: Path, change) -> None:
    env = json.loads(path.read_text())
    change(env)
    path.write_text(json.dumps(env))


def _payload(env, change):
    st = json.loads(base64.b64decode(env["payload"]))
    change(st)
    env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()


@pytest.mark.parametrize("tamper, reason", [
    (lambda env: _payload(env, lambda st: st["predicate"]["components"].pop()), "tampered"),
    (lambda env: env["signatures"][0].update(sig=env["signatures"][0]["sig"][:-4] + "AAAA"), "tampered"),
    (lambda env: env.update(payloadType="text/plain"), "payload type"),
    (lambda env: env.pop("payload"), "not a DSSE envelope"),
])
def test_each_tampered_envelope_fails_with_its_reason(exported, tamper, reason):
    image, _, public = exported
    _edit(image.with_name(image.name + ".sbom.dsse.json"), tamper)
    r = gen_recipe("verify", str(image), "--key", str(public))
    assert r.returncode == 1 and reason in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_a_statement_signed_by_another_key_is_counted_not_trusted(exported):
    """Anyone who can write beside the file (or push to the registry) may add statements: those no key given
    signed are left out and counted; they cannot break, nor join, the certificate."""
    image, _, public = exported
    _edit(image.with_name(image.name + ".sbom.dsse.json"), lambda env: env["signatures"][0].update(keyid="0" * 64))
    r = gen_recipe("verify", str(image), "--key", str(public))
    assert r.returncode == 0, r.stderr
    assert "1 signed statement(s) (1 provenance)" in r.stdout and "1 more signed by no key given, not checked" in r.stdout
    assert "What is inside" not in r.stdout and f"signed by {public}" in r.stdout


def test_a_changed_image_file_no_longer_matches_its_statements(exported):
    image, _, public = exported
    image.write_bytes(b"another image")
    r = gen_recipe("verify", str(image), "--key", str(public))
    assert r.returncode == 1 and "a statement about another digest" in r.stderr


def test_an_envelope_swapped_in_from_another_file_is_about_another_digest(exported, tmp_path):
    image, private, public = exported
    other = tmp_path / "other.tar.gz"
    other.write_bytes(b"other")
    st = statement([subject("other.tar.gz", "sha256:" + hashlib.sha256(b"other").hexdigest())], VERDICT_TYPE,
                   {"verdicts": []})
    certificate.publish(str(other), {"verdict": st}, sign.load_signer(private))
    (theirs,) = tmp_path.glob("other.tar.gz.verdict.*.dsse.json")
    theirs.rename(image.with_name(image.name + ".verdict.0123456789ab.dsse.json"))
    r = gen_recipe("verify", str(image), "--key", str(public))
    assert r.returncode == 1 and "a statement about another digest" in r.stderr, r.stderr


def test_a_statement_under_another_kinds_name_is_refused(exported):
    image, _, public = exported
    sbom = image.with_name(image.name + ".sbom.dsse.json")
    prov = image.with_name(image.name + ".provenance.dsse.json")
    sbom.write_bytes(prov.read_bytes())
    r = gen_recipe("verify", str(image), "--key", str(public))
    assert r.returncode == 1 and "holds a provenance statement, not the sbom" in r.stderr


def test_another_key_and_no_certificate(exported, tmp_path):
    image, _, _ = exported
    _, stranger = sign.keygen(tmp_path / "stranger.key")
    r = gen_recipe("verify", str(image), "--key", str(stranger))
    assert r.returncode == 1 and "are signed by an unknown key" in r.stderr
    bare = tmp_path / "bare.sif"
    bare.write_bytes(b"x")
    r = gen_recipe("verify", str(bare), "--key", str(stranger))
    assert r.returncode == 1 and "no certificate beside it" in r.stderr


@pytest.mark.parametrize("argv, words", [
    (["verify", "nohost/x:1", "--key", "KEY"], "HOST[:PORT]/REPOSITORY"),
    (["verify", "reg:5000/UPPER/x", "--key", "KEY"], "not a valid repository reference"),
    (["verify", "reg:5000/x", "--key", "/nonexistent.pub"], "/nonexistent.pub"),
    (["verify", "reg:5000/x", "--key", "PRIVATE"], "a private key: verify with its public key"),
    (["certify", "/nonexistent.json", "--image", "reg:5000/x", "--key", "PRIVATE"], "/nonexistent.json"),
    (["certify", "RESULTS", "--image", "reg:5000/x", "--key", "PUBLIC"], "a public key: sign with the private key"),
    (["verify", "./missing.sif", "--key", "KEY"], "no such file"),
    (["verify", "../x/y", "--key", "KEY"], "no such file"),
    (["verify", "a..b/c/d", "--key", "KEY"], "give it as HOST[:PORT]/REPOSITORY"),
    (["verify", "x" * 70 + ".org/c/d", "--key", "KEY"], "give it as HOST[:PORT]/REPOSITORY"),
    (["keygen", ""], "a folder, not a key file's name"),
    (["keygen", "/"], "a folder, not a key file's name"),
    (["keygen", "/tmp/no-such-folder-for-a-key/"], "a folder, not a key file's name"),
    (["verify", "reg:5000/g/zzz/../x:1", "--key", "KEY"], "not a valid repository reference"),
    (["verify", "reg:99999/g/x:1", "--key", "KEY"], "give it as HOST[:PORT]/REPOSITORY"),
    (["keygen", "PRIVATE"], "exists: keygen never replaces a key"),
    (["build", "--site", "local", "--key", "PRIVATE"], "add --push"),
])
def test_bad_input_is_one_line_and_exit_2(exported, tmp_path, argv, words):
    _, private, public = exported
    results = tmp_path / "results.json"
    results.write_text('{"benchmarks": []}')
    subst = {"KEY": str(public), "PRIVATE": str(private), "PUBLIC": str(public), "RESULTS": str(results)}
    r = gen_recipe(*[subst.get(a, a) for a in argv])
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_certify_refuses_results_without_a_comparison_of_the_image(exported, tmp_path):
    image, private, _ = exported
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"benchmarks": [{"name": "t", "extra_info": {"results": [
        {"site": "local", "workload": "cnn", "runtime": "bare-bare", "ratio": 1.0, "low": 0.99, "high": 1.01,
         "pairs": 12, "verdict": "pass"}]}}]}))
    r = gen_recipe("certify", str(results), "--image", str(image), "--key", str(private))
    assert r.returncode == 2 and "no comparison of an image with bare metal" in r.stderr, r.stderr


def test_keygen_default_folder_is_private(tmp_path):
    r = subprocess.run([sys.executable, "-m", "generator.cli.main", "keygen"], capture_output=True, text=True, cwd=REPO,
                       env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 0, r.stderr
    key = tmp_path / ".config" / "gen-recipe" / "signing.key"
    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600
    assert (key.parent.stat().st_mode & 0o777) == 0o700 and Path(str(key) + ".pub").is_file()


def test_what_a_signer_wrote_cannot_drive_the_terminal_or_crash_the_table(exported):
    image, private, public = exported
    digest = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    subj = certificate.subjects_of(str(image), digest)
    made = {"sbom": statement(subj, SBOM_TYPE, {"components": [
                {"name": "openmpi\x1b[31mevil\nline", "version": "1", "purl": "pkg:deb/debian/evil@1"}]}),
            "verdict": statement(subj, VERDICT_TYPE, {"verdicts": [{"interval": "x"}]})}
    certificate.publish(str(image), made, sign.load_signer(private))
    r = gen_recipe("verify", str(image), "--key", str(public))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "openmpi\\x1b[31mevil\\nline" in r.stdout
    assert "the verdict statement verifies, but its predicate is not in the shape gen-recipe writes" in r.stdout


def test_unsigned_files_beside_the_image_are_left_out_never_fatal(exported, capsys):
    """Anyone who can write beside the file may add one: whatever names no key given (nested too deeply, {}, not
    JSON, no signatures) is counted and left out, like a statement of another signer."""
    image, _, public = exported
    junk = ["[" * 100000 + "]" * 100000, "{}", "not JSON at all", "[1, 2]", '{"signatures": 5}',
            '{"payload": "e30=", "payloadType": "x", "signatures": []}', "\udcff"]
    for i, text in enumerate(junk):
        image.with_name(f"{image.name}.verdict.{i:012x}.dsse.json").write_bytes(text.encode(errors="surrogateescape"))
    r = in_process(capsys, "verify", str(image), "--key", str(public), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["signedBy"] == [str(public)] * 2 and out["notChecked"] == len(junk)


def test_a_forged_signature_under_a_given_keys_id_is_tampered_though_another_verifies(exported, tmp_path, capsys):
    """--key A --key B: an envelope validly signed by A with a garbage signature under B's key id is tampered (every
    signature under a given key's id must verify), and so is one whose only signature of A is the garbage one."""
    image, private, public = exported
    _, other = sign.keygen(tmp_path / "other.key")
    other_id = sign.load_public(other).keyid
    sbom = image.with_name(image.name + ".sbom.dsse.json")
    _edit(sbom, lambda env: env["signatures"].append({"keyid": other_id, "sig": base64.b64encode(b"\0" * 64).decode()}))
    r = in_process(capsys, "verify", str(image), "--key", str(public), "--key", str(other))
    assert r.returncode == 1 and "sbom.dsse.json: the signature does not match the payload: tampered" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stdout == ""
    r = in_process(capsys, "verify", str(image), "--key", str(public))          # B not given: its signature is not ours to check
    assert r.returncode == 0, r.stderr


def test_an_unsigned_statement_is_left_out_and_a_copy_counts_once(exported, capsys):
    image, private, public = exported
    _edit(image.with_name(image.name + ".provenance.dsse.json"), lambda env: env.update(signatures=[]))
    digest = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    made = statement(certificate.subjects_of(str(image), digest), VERDICT_TYPE, {"verdicts": []})
    certificate.publish(str(image), {"verdict": made}, sign.load_signer(private))
    (verdict,) = image.parent.glob("*.verdict.*.dsse.json")
    image.with_name(image.name + ".verdict.000000000000.dsse.json").write_bytes(verdict.read_bytes())
    r = in_process(capsys, "verify", str(image), "--key", str(public), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["signedBy"] == [str(public)] * 2 and out["notChecked"] == 1          # the sbom, one verdict
    assert sorted(st["predicateType"] for st in out["statements"]) == sorted([SBOM_TYPE, VERDICT_TYPE])
    verdict.write_bytes(image.with_name(image.name + ".sbom.dsse.json").read_bytes())   # a copy under another name
    r = in_process(capsys, "verify", str(image), "--key", str(public))
    assert r.returncode == 1 and "holds a sbom statement, not the verdict its name says" in r.stderr, r.stderr


def test_a_new_export_to_the_same_path_leaves_no_statement_about_the_old_file(exported):
    image, _, _ = exported
    digest = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    assert certificate.stale_beside(image, digest) == []
    image.write_bytes(b"the next export")
    new = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    assert sorted(p.name for p in certificate.stale_beside(image, new)) == [
        "pytorch-local.tar.gz.provenance.dsse.json", "pytorch-local.tar.gz.sbom.dsse.json"]
