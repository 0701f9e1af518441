"""Hostile and careless input to the certificate commands, in process (the CLI's own `main`): a private key others
can read is refused unless --allow-readable-key says otherwise; a referrer listed 150 times counts once."""

from __future__ import annotations

import json
import os

import pytest

from generator.certify import certificate, referrers, sign
from generator.certify.statement import PROVENANCE_TYPE, statement, subject
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


def test_a_private_key_others_can_read_is_refused_unless_the_user_says_so(capsys, tmp_path, exported):
    image_file, private, _ = exported
    os.chmod(private, 0o644)
    data = results(tmp_path, 1.0)
    code, _, err = run(capsys, "certify", str(data), "--image", str(image_file), "--key", str(private))
    one_line(code, err, f"{private}: a private key that others can read (mode 0644): chmod 600 {private}",
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
