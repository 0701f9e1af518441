"""DSSE envelopes of in-toto statements, signed and verified with real Ed25519 keys (securesystemslib)."""

from __future__ import annotations

import base64
import copy
import json
import stat

import pytest

from generator.certify import sign
from generator.errors import UsageError

STATEMENT = {"_type": sign.STATEMENT_TYPE, "subject": [{"name": "localhost/gen-recipe/pytorch-local",
                                                         "digest": {"sha256": "a" * 64}}],
             "predicateType": "https://slsa.dev/provenance/v1", "predicate": {"buildDefinition": {}}}


@pytest.fixture
def keys(tmp_path):
    private, public = sign.keygen(tmp_path / "site.key")
    return sign.load_signer(private), sign.load_public(public), private, public


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_replaces_one(keys):
    _, _, private, public = keys
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and b"BEGIN PRIVATE KEY" in private.read_bytes()
    assert b"BEGIN PUBLIC KEY" in public.read_bytes()
    with pytest.raises(UsageError, match="never replaces a key"):
        sign.keygen(private)


def test_a_signed_statement_verifies_and_comes_back_unchanged(keys):
    signer, public, _, _ = keys
    envelope = sign.sign(STATEMENT, signer)
    assert envelope["payloadType"] == sign.PAYLOAD_TYPE and len(envelope["signatures"]) == 1
    assert sign.verify(json.loads(json.dumps(envelope)), [public]) == STATEMENT
    assert sign.sign(STATEMENT, signer)["payload"] == envelope["payload"]        # canonical bytes


def _tampered_payload(env):
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["subject"][0]["digest"]["sha256"] = "b" * 64
    env["payload"] = base64.b64encode(sign.canonical(statement)).decode()


def _tampered_signature(env):
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[0] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()


@pytest.mark.parametrize("tamper, reason", [
    (_tampered_payload, "tampered"),
    (_tampered_signature, "tampered"),
    (lambda env: env.update(payloadType="application/json"), "payload type"),
    (lambda env: env.update(signatures=[]), "no signature"),
    (lambda env: env.pop("payload"), "not a DSSE envelope"),
])
def test_a_changed_envelope_fails_with_its_reason(keys, tamper, reason):
    signer, public, _, _ = keys
    envelope = copy.deepcopy(sign.sign(STATEMENT, signer))
    tamper(envelope)
    with pytest.raises(sign.Untrusted, match=reason):
        sign.verify(envelope, [public])


def test_a_statement_signed_by_another_key_is_refused(keys, tmp_path):
    signer, _, _, _ = keys
    _, other = sign.keygen(tmp_path / "other.key")
    with pytest.raises(sign.Untrusted, match="unknown key"):
        sign.verify(sign.sign(STATEMENT, signer), [sign.load_public(other)])


def test_key_files_that_are_not_ed25519_keys_get_one_line(tmp_path):
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    with pytest.raises(UsageError, match="not an unencrypted PEM private key"):
        sign.load_signer(bad)
    with pytest.raises(UsageError, match="not a PEM public key"):
        sign.load_public(bad)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    bad.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(UsageError, match="an EC key, not an Ed25519 key"):
        sign.load_signer(bad)
