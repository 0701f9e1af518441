"""Hostile and careless input to the certificate commands, in process (the CLI's own `main`): one line naming the
file or source, the key and a fix, exit 2, never a traceback; a private key others can read is refused unless
--allow-readable-key says otherwise; a referrer listed 150 times counts once."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from generator.certify import certificate, referrers, sign
from generator.certify.statement import PROVENANCE_TYPE, VERDICT_TYPE, statement, subject
from generator.cli import main as cli
from tests.certify.registry import Answer, Registry, attach, image, serve


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, err: str, *words: str) -> None:
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


@pytest.fixture
def exported(tmp_path):
    image_file = tmp_path / "img.tar.gz"
    image_file.write_bytes(b"an image")
    private, public = sign.keygen(tmp_path / "site.key")
    return image_file, private, public


def results(tmp_path, ratio, image_name="img.tar.gz"):
    path = tmp_path / "results.json"
    record = {"site": "local", "workload": "cnn", "runtime": "podman", "ratio": ratio, "low": 0.9, "high": 1.1,
              "pairs": 3, "verdict": "pass", "extra": {"image": image_name}}
    path.write_text(json.dumps({"benchmarks": [{"name": "t", "extra_info": {"results": [record]}}]}))
    return path


@pytest.mark.parametrize("length", [252, 253, 254, 255, 256])
def test_keygen_with_a_name_too_long_for_its_pub_is_one_line_and_writes_nothing(capsys, tmp_path, length):
    code, _, err = run(capsys, "keygen", str(tmp_path / ("k" * length)))
    one_line(code, err, "too long for a key", "at most 251 bytes")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["report", "certify"])
def test_a_ratio_of_10_to_the_400_is_one_line_naming_the_key(capsys, tmp_path, exported, command):
    image_file, private, _ = exported
    data = results(tmp_path, 10 ** 400)
    argv = ["report", str(data), "--out", str(tmp_path / "out")] if command == "report" else \
        ["certify", str(data), "--image", str(image_file), "--key", str(private)]
    code, _, err = run(capsys, *argv)
    one_line(code, err, "results.json: benchmarks[0].extra_info.results[0].ratio: expected a finite number")


def test_verifys_table_survives_a_signed_ratio_of_10_to_the_400_and_run_details_of_5(capsys, exported):
    """What a trusted signer wrote in a shape the table cannot show is a note in the table (the statement verifies:
    --json shows it), never a traceback."""
    image_file, private, public = exported
    subj = certificate.subjects_of(str(image_file), "sha256:" + hashlib.sha256(image_file.read_bytes()).hexdigest())
    made = {"verdict": statement(subj, VERDICT_TYPE, {"verdicts": [{"ratio": 10 ** 400, "interval": [10 ** 400, 1]}]}),
            "provenance": statement(subj, PROVENANCE_TYPE, {"runDetails": 5, "buildDefinition": 5})}
    certificate.publish(str(image_file), made, sign.load_signer(private))
    code, out, err = run(capsys, "verify", str(image_file), "--key", str(public))
    assert code == 0 and err == "", err
    assert out.count("verifies, but its predicate is not in the shape gen-recipe writes") == 2, out
    code, out, _ = run(capsys, "verify", str(image_file), "--key", str(public), "--json")
    assert code == 0 and json.loads(out)["statements"]


def test_a_private_key_others_can_read_is_refused_unless_the_user_says_so(capsys, tmp_path, exported):
    image_file, private, _ = exported
    os.chmod(private, 0o644)
    data = results(tmp_path, 1.0)
    code, _, err = run(capsys, "certify", str(data), "--image", str(image_file), "--key", str(private))
    one_line(code, err, f"{private}: a private key that group or others can access (mode 0644): chmod 600 {private}",
             "--allow-readable-key")
    assert not list(tmp_path.glob("img.tar.gz.verdict.*"))
    code, out, err = run(capsys, "certify", str(data), "--image", str(image_file), "--key", str(private),
                         "--allow-readable-key")
    assert code == 0 and "certified" in out, err
    os.chmod(private, 0o640)
    code, _, err = run(capsys, "build", "--site", "local", "--key", str(private), "--export", str(tmp_path / "x.sif"))
    one_line(code, err, "chmod 600")
    os.chmod(private, 0o600)
    assert sign.load_signer(private) is not None


@pytest.fixture
def registry():
    """A plain-http registry on 127.0.0.1 (a host the client reaches over http) with an image tagged 1."""
    reg = Registry()
    server = serve(reg.handler())
    reg.host = f"127.0.0.1:{server.server_address[1]}"
    reg.digest = image(reg)
    yield reg
    server.shutdown()
    server.server_close()


def test_a_referrer_layer_without_a_digest_is_one_line_naming_the_key(registry, exported):
    _, _, public = exported
    mine = attach(registry, registry.digest, b"{}")
    doc = json.loads(registry.manifests[mine][0])
    del doc["layers"][0]["digest"]
    del registry.manifests[mine]
    registry.push_manifest(doc)
    with pytest.raises(referrers.RegistryError, match=r"referrer sha256:[0-9a-f]{64}: layers\[0\]\.digest: 'None' is "
                                                      r"not sha256:<64 hex>; remove the referrer") as got:
        certificate.verify(f"{registry.host}/r:1", {"k": sign.load_public(public)})
    assert got.value.exit_code == 2


def test_a_referrers_tag_listing_a_number_is_one_line_for_certify(registry, exported):
    """A registry without the referrers API: attach reads the tag sha256-<hex>, which lists [1]."""
    _, private, _ = exported
    registry.push_manifest({"schemaVersion": 2, "mediaType": referrers.INDEX, "manifests": [1]},
                           referrers.fallback_tag(registry.digest), referrers.INDEX)
    registry.hook = lambda reg, req: Answer(404) if "/referrers/" in req.path else None
    st = statement([subject(f"{registry.host}/r", registry.digest)], PROVENANCE_TYPE, {})
    with pytest.raises(referrers.RegistryError, match=r":sha256-[0-9a-f]{64}: manifests\[0\]: 1 is not a descriptor.*"
                                                      r"delete the tag") as got:
        referrers.attach(f"{registry.host}/r:1", sign.canonical(sign.sign(st, sign.load_signer(private))),
                         PROVENANCE_TYPE, "now")
    assert got.value.exit_code == 2


def test_150_copies_of_one_referrer_count_once(registry, exported):
    _, private, public = exported
    st = statement([subject(f"{registry.host}/r", registry.digest)], PROVENANCE_TYPE, {"runDetails": {}})
    mine = attach(registry, registry.digest, sign.canonical(sign.sign(st, sign.load_signer(private))))
    copies = [{"mediaType": referrers.MANIFEST, "digest": mine, "size": 1, "artifactType": referrers.ENVELOPE_TYPE}] * 150
    registry.hook = lambda reg, req: Answer(200, [("Content-Type", referrers.INDEX)], json.dumps(
        {"schemaVersion": 2, "mediaType": referrers.INDEX, "manifests": copies}).encode()) if "/referrers/" in req.path else None
    cert = certificate.verify(f"{registry.host}/r:1", {"k": sign.load_public(public)})
    assert len(cert.statements) == 1 and cert.others == 0
    assert [s.path for s in registry.seen].count(f"/v2/r/manifests/{mine}") == 1
