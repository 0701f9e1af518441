"""DSSE envelopes of in-toto statements, signed with Ed25519 keys: securesystemslib's signer and envelope (the
format in-toto's tools read), the keys as PEM files (PKCS#8 private, SubjectPublicKeyInfo public)."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from generator.errors import GenRecipeError, UsageError, shown
from generator.files import read_bytes, write_atomic

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
MAX_ENVELOPE = 16 * 1024 * 1024          # bytes: an SBOM of a large image is a few MB
DEFAULT_KEY = "~/.config/gen-recipe/signing.key"   # gen-recipe keygen's default
ALLOW_READABLE = "--allow-readable-key"             # the option that signs with a key others can read
NAME_MAX = 255                                      # bytes of one file name (Linux, every common file system)


class Untrusted(GenRecipeError):
    """An envelope that does not verify: tampered, signed by an unknown key, or not a statement."""

    exit_code = 1


def keygen(private: Path) -> tuple[Path, Path]:
    """A new Ed25519 key pair: `private` (mode 600) and `private` + ".pub"; refuses to replace either."""
    if not private.name or private.name in (".", "..") or str(private).endswith("/"):
        raise UsageError(f"{shown(private)}: a folder, not a key file's name (e.g. {shown(private / 'site.key')})")
    public = private.with_name(private.name + ".pub")
    if len(os.fsencode(public.name)) > NAME_MAX:
        raise UsageError(f"{shown(private)}: a name of {len(os.fsencode(private.name))} bytes is too long for a key "
                         f"(its .pub must fit the file system's {NAME_MAX}): choose a name of at most "
                         f"{NAME_MAX - 4} bytes")
    try:
        folder, there = private.is_dir(), [p for p in (private, public) if p.exists() or p.is_symlink()]
    except OSError as exc:
        raise UsageError(f"{shown(private)}: {exc.strerror} (choose another path)") from None
    if folder:
        raise UsageError(f"{shown(private)}: a folder, not a key file's name (e.g. {shown(private / 'site.key')})")
    if there:
        raise UsageError(f"{shown(there[0])} exists: keygen never replaces a key (choose another path, or remove it)")
    try:
        private.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise UsageError(f"{shown(private.parent)}: cannot create the key's folder ({exc.strerror})") from None
    key = Ed25519PrivateKey.generate()
    write_atomic(private, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()), mode=0o600)
    write_atomic(public, key.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


_KIND = {"RSA": "an RSA", "EllipticCurve": "an EC", "EC": "an EC", "DSA": "a DSA", "Ed448": "an Ed448", "X25519": "an X25519",
         "X448": "an X448"}


def _kind(key) -> str:
    name = type(key).__name__.lstrip("_")
    return next((v for k, v in _KIND.items() if name.startswith(k)), f"a {name}") + " key"


def load_signer(path: Path, allow_readable: bool = False, flag: str | None = ALLOW_READABLE) -> CryptoSigner:
    """The signer of the private key file at `path`; one line naming the file for anything else. A key that group
    or others may read or write is refused (as ssh refuses one) unless `allow_readable`; `flag`: the option that
    says so, for the message (None: the command has none)."""
    data = read_bytes(path, "private key")
    if b"PUBLIC KEY-----" in data:
        raise UsageError(f"{shown(path)}: a public key: sign with the private key ({shown(str(path).removesuffix('.pub'))}"
                         " if this is its .pub)")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{shown(path)}: not an unencrypted PEM private key ({shown(exc)[:120]}); make one with "
                         "gen-recipe keygen") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{shown(path)}: {_kind(key)}, not an Ed25519 key; make one with gen-recipe keygen")
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077 and not allow_readable:
        raise UsageError(f"{shown(path)}: a private key that group or others can access (mode {mode:04o}): chmod 600 "
                         f"{shown(path)}" + (f" (or, to sign with it as it is, {flag})" if flag else ""))
    return CryptoSigner(key)


def load_public(path: Path) -> SSlibKey:
    """The public key in the PEM file at `path`."""
    data = read_bytes(path, "public key")
    if b"PRIVATE KEY-----" in data:
        raise UsageError(f"{shown(path)}: a private key: verify with its public key ({shown(path)}.pub, as keygen "
                         "wrote it), and keep this one private")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{shown(path)}: not a PEM public key ({shown(exc)[:120]})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"{shown(path)}: {_kind(key)}, not an Ed25519 public key")
    return SSlibKey.from_crypto(key)


def canonical(obj) -> bytes:
    """The bytes that are signed: JSON with sorted keys and no spaces (the same statement, the same bytes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(statement: dict, signer: CryptoSigner) -> dict:
    """`statement` in a DSSE envelope signed by `signer` (as a dict, ready for JSON)."""
    if statement.get("_type") != STATEMENT_TYPE:
        raise ValueError(f"not an in-toto statement: _type {statement.get('_type')!r}")
    envelope = Envelope(payload=canonical(statement), payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    return envelope.to_dict()


def verify(envelope: dict, keys: list[SSlibKey], where: str = "envelope") -> dict:
    """The statement inside `envelope` when one of `keys` signed it; Untrusted names the reason otherwise."""
    try:
        env = Envelope.from_dict(copy.deepcopy(envelope))       # from_dict takes the dict apart
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Untrusted(f"{where}: not a DSSE envelope ({exc.__class__.__name__}: {exc})") from None
    if env.payload_type != PAYLOAD_TYPE:
        raise Untrusted(f"{where}: payload type {env.payload_type!r}, not {PAYLOAD_TYPE}")
    if not env.signatures:
        raise Untrusted(f"{where}: no signature")
    known = {k.keyid for k in keys}
    if not known & set(env.signatures):
        raise Untrusted(f"{where}: signed by an unknown key ({', '.join(sorted(env.signatures))[:80]}); "
                        "pass the signer's public key with --key")
    for key in keys:                    # every signature under a given key's id, not one of them: fail closed
        if key.keyid in env.signatures:
            try:
                env.verify([key], 1)
            except VerificationError:
                raise Untrusted(f"{where}: the signature does not match the payload: tampered (the signature of key "
                                f"{key.keyid[:16]}…)") from None
    try:
        statement = json.loads(env.payload)
    except (ValueError, RecursionError):
        raise Untrusted(f"{where}: the signed payload is not JSON") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise Untrusted(f"{where}: the signed payload is not an in-toto statement")
    return statement


def read_envelope(path: Path) -> dict:
    data = read_bytes(path, "DSSE envelope", max_bytes=MAX_ENVELOPE)
    try:
        out = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise Untrusted(f"{path}: not JSON ({exc.__class__.__name__})") from None
    if not isinstance(out, dict):
        raise Untrusted(f"{path}: not a DSSE envelope (a JSON object)")
    return out

