"""The hostile-registry fuzzer: `verify` (by tag and by digest) and `attach` (what certify and build --key do)
against a registry on https (127.0.0.2, a CA made here, the login stored for it) whose answers are replaced at
random — status codes, redirects and Link headers to http and https on the same or another host (127.0.0.1) or to
no URL at all, token challenges, content types, bodies (index and referrer manifests of random shapes, digests of
every kind, deep nesting, huge numbers, bytes that are not UTF-8, lying lengths, cut connections) — over statements
that verify, are tampered, swapped or signed by another key. Every case must end in a result or one line (a
GenRecipeError), never a traceback, and nothing may arrive over http: 0 credentials in clear. 250 cases
here (8-14 s on this 2-vCPU machine), 20,000 with --fuzz-long (README, Hostile input)."""

from __future__ import annotations

import base64
import json
import os
import random
import sys
import time
import traceback

import pytest

from generator.certify import certificate, referrers, sign
from generator.certify.statement import PROVENANCE_TYPE, SBOM_TYPE, statement, subject
from generator.errors import GenRecipeError
from tests.certify.registry import Answer, Registry, attach, image, make_ca, serve, sha

CASES = 20_000 if "--fuzz-long" in sys.argv else int(os.environ.get("FUZZ_CASES", 250))
BASIC = "Basic " + base64.b64encode(b"alice:hunter2").decode()
STATUS = (200, 201, 202, 204, 301, 302, 303, 307, 308, 400, 401, 403, 404, 405, 500, 503, 999)
TYPES = (referrers.INDEX, referrers.MANIFEST, "application/json", "", "text/html", referrers.INDEX + "; charset=utf-8",
         referrers.ENVELOPE_TYPE, "application/vnd.docker.distribution.manifest.v2+json")


def _urls(rng: random.Random, host: str, other: str) -> str:
    name = host.split(":")[0]
    return rng.choice([
        f"http://{host}/v2/r/manifests/1", f"http://{host}/v2/r/referrers/x", f"http://{host}/token", f"HTTP://{host}/v2/",
        f"https://{host}/v2/r/manifests/1", f"https://{host}/v2/r/referrers/x?page=2", f"https://{host}/token",
        f"https://{other}/x", f"http://{other}/x", f"https://{other}/token", f"//{host}/v2/r/blobs/x", f"//{other}/x",
        "/v2/r/manifests/1", "/v2/r/referrers/x?n=1", "?page=2", "", " ", "ftp://x/y", "file:///etc/passwd", "data:,x",
        "http://[::1", "https://[x", f"https://{name}:99999/x", f"https://{name}:0/x", f"https://{name}:x/y",
        "javascript:alert(1)", "\x1b[31m", "https://" + "a" * 300, f"https://{host}@{other}/x", f"https://u:p@{host}/x",
        "http:/" + host, "https:" + host, "https://x/\xe9", "https://127.0.0.1:1/x", f"http://{host}:{host}/",
    ])


def _descriptor(rng: random.Random, digests: list[str]) -> object:
    digest = rng.choice([*digests, *digests, sha(b"nothing"), "sha256:xyz", "SHA256:" + "A" * 64, 5, None, [], {},
                         "sha256:" + "0" * 64 + "\n"])
    d = {"mediaType": rng.choice(TYPES), "digest": digest, "size": rng.choice([1, -1, 10 ** 400, "x"]),
         "artifactType": rng.choice([referrers.ENVELOPE_TYPE] * 4 + ["x", None, 7])}
    for key in rng.sample(list(d), rng.randint(0, 2)):
        del d[key]
    return rng.choice([d, d, d, d, 1, "x", None, [d]])


def _manifest(rng: random.Random, subject_digest: str, digests: list[str]) -> object:
    layer = {"mediaType": rng.choice([referrers.ENVELOPE_TYPE] * 3 + ["x"]), "digest": rng.choice(digests + [5, None]),
             "size": 3}
    if rng.random() < 0.3:
        del layer["digest"]
    doc = {"schemaVersion": 2, "mediaType": referrers.MANIFEST, "artifactType": referrers.ENVELOPE_TYPE,
           "layers": rng.choice([[layer], [layer, layer], layer, [], [1], "x"]),
           "subject": rng.choice([{"digest": subject_digest}, {"digest": sha(b"other")}, {}, [], "x", {"digest": 5}])}
    for key in rng.sample(list(doc), rng.randint(0, 2)):
        del doc[key]
    return doc


def _body(rng: random.Random, subject_digest: str, digests: list[str]) -> bytes:
    kind = rng.randrange(10)
    if kind == 0:
        return json.dumps({"schemaVersion": 2, "mediaType": referrers.INDEX,
                           "manifests": [_descriptor(rng, digests) for _ in range(rng.randint(0, 4))]}).encode()
    if kind == 1:
        return json.dumps({"manifests": [_descriptor(rng, digests)] * rng.choice([1, 150])}).encode()
    if kind == 2:
        return json.dumps(_manifest(rng, subject_digest, digests)).encode()
    if kind == 3:
        return json.dumps(rng.choice([[1], {"manifests": 5}, {}, "x", None, 10 ** 400, {"manifests": [1]},
                                      {"token": 5}, {"token": "t0ken"}, {"access_token": ""}])).encode()
    if kind == 4:
        return b"[" * rng.choice([10, 3000, 100_000]) + b"]" * 10
    if kind == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    if kind == 6:
        return b'{"manifests": [{"digest": "' + rng.choice(digests).encode()
    if kind == 7:
        return b"1" * 5000 + b"e400"
    if kind == 8:
        return b"\xff\xfe" + "{}".encode("utf-16-le")
    return b""


def _hostile(rng: random.Random, host: str, other: str, subject_digest: str, digests: list[str], rate: float):
    """A hook that replaces about `rate` of the answers with hostile ones."""
    def hook(registry, req):
        if rng.random() >= rate:
            return None
        if rng.random() < 0.05:
            return "done"                                   # the connection cut before any answer
        headers = []
        code = rng.choice(STATUS)
        if code in (301, 302, 303, 307, 308) or rng.random() < 0.1:
            headers.append(("Location", _urls(rng, host, other)))
        for _ in range(rng.choice([0, 0, 1, 2])):
            rel = rng.choice(['rel="next"', "rel=next", 'rel="prev next"', 'type="x"; rel="next"', 'rel="prev"', ""])
            headers.append(("Link", f"<{_urls(rng, host, other)}>; {rel}" if rng.random() < 0.9 else "<oops"))
        if code == 401 or rng.random() < 0.05:
            headers.append(("WWW-Authenticate", rng.choice([
                'Basic realm="x"', f'Bearer realm="{_urls(rng, host, other)}",service="s",scope="x"', "Bearer",
                "Negotiate", 'Bearer realm=""', "", 'Bearer realm="https://' + host + '/token"'])))
        if rng.random() < 0.8:
            headers.append(("Content-Type", rng.choice(TYPES)))
        if rng.random() < 0.05:
            headers.append(("OCI-Subject", subject_digest))
        body = _body(rng, subject_digest, digests)
        if rng.random() < 0.1:
            headers.append(("Content-Length", rng.choice([str(len(body) + 100), "x", "-1", str(10 ** 30)])))
        headers = [(k, v.encode("latin-1", "backslashreplace").decode("latin-1")) for k, v in headers]
        return Answer(code, headers, body)
    return hook


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    cafile, tls = make_ca(folder)
    mine, theirs = sign.keygen(folder / "site.key"), sign.keygen(folder / "other.key")
    registry, elsewhere = Registry(login=BASIC), Registry()
    servers = serve(registry.handler(), "127.0.0.2", tls), serve(elsewhere.handler(), "127.0.0.1", tls)
    host = f"127.0.0.2:{servers[0].server_address[1]}"
    (folder / "auth.json").write_text(json.dumps({"auths": {host: {"auth": BASIC.split()[1]}}}))
    yield {"host": host, "other": f"127.0.0.1:{servers[1].server_address[1]}", "registry": registry,
           "elsewhere": elsewhere, "signers": (sign.load_signer(mine[0]), sign.load_signer(theirs[0])),
           "keys": {str(p): sign.load_public(p) for p in (mine[1], theirs[1])},
           "ids": [sign.load_public(p).keyid for p in (mine[1], theirs[1])],
           "env": {"SSL_CERT_FILE": str(cafile), "REGISTRY_AUTH_FILE": str(folder / "auth.json")}}
    for s in servers:
        s.shutdown()
        s.server_close()


def _statements(rng: random.Random, world: dict, digest: str) -> list[bytes]:
    """Envelopes of every kind a registry may hold: verifying, by another signer, tampered, forged, about another
    image, not one at all."""
    mine, theirs = world["signers"]
    st = statement([subject(f"{world['host']}/r", digest)], rng.choice([SBOM_TYPE, PROVENANCE_TYPE]),
                   {"runDetails": rng.choice([{}, 5, {"metadata": {"finishedOn": 10 ** 400}}])})
    good = sign.sign(st, mine)
    forged = json.loads(json.dumps(good))           # a garbage signature under the other given key's id
    forged["signatures"].append({"keyid": world["ids"][1], "sig": base64.b64encode(b"\0" * 64).decode()})
    other = sign.sign(statement([subject("x", sha(b"x"))], PROVENANCE_TYPE, {}), mine)
    choices = [sign.canonical(good), sign.canonical(sign.sign(st, theirs)), sign.canonical(forged),
               sign.canonical(other), b"{}", b"not json", json.dumps({"payload": 5, "signatures": good["signatures"]}).encode()]
    return [rng.choice(choices) for _ in range(rng.randint(0, 3))]


def test_a_hostile_registry_never_causes_a_traceback_nor_a_credential_in_clear(world, monkeypatch):
    for k, v in world["env"].items():
        monkeypatch.setenv(k, v)
    registry, elsewhere, host = world["registry"], world["elsewhere"], world["host"]
    failures, outcomes, start = [], {}, time.monotonic()
    for case in range(CASES):
        rng = random.Random(case)
        registry.manifests.clear()
        registry.blobs.clear()
        registry.hook = elsewhere.hook = None
        digest = image(registry)
        envelopes = _statements(rng, world, digest)
        found = [attach(registry, digest, e) for e in envelopes]
        if rng.random() < 0.3:                      # the referrers tag schema's index too, of some shape
            index = {"schemaVersion": 2, "manifests": [_descriptor(rng, found or [digest]) for _ in range(rng.randint(0, 3))]}
            registry.manifests[referrers.fallback_tag(digest)] = (
                _body(rng, digest, found or [digest]) if rng.random() < 0.3 else json.dumps(index).encode(), referrers.INDEX)
        digests = [*found, *registry.blobs, digest]
        rate = rng.choice([0.0, 0.2, 0.5, 0.9])
        registry.hook = _hostile(rng, host, world["other"], digest, digests, rate)
        elsewhere.hook = _hostile(rng, host, world["other"], digest, digests, 0.8)
        op = rng.choice(["verify", "verify@", "attach"])
        try:
            if op == "attach":
                referrers.attach(f"{host}/r:1", rng.choice(envelopes or [b"{}"]), PROVENANCE_TYPE, "now")
            else:
                certificate.verify(f"{host}/r" + (f"@{digest}" if op == "verify@" else ":1"), world["keys"])
            outcome = "ok"
        except GenRecipeError as exc:
            outcome = f"{type(exc).__name__} (exit {exc.exit_code})"
            if "\n" in str(exc) or not str(exc):
                failures.append((case, op, f"not one line: {str(exc)[:300]!r}"))
        except Exception:                                    # noqa: BLE001 (the fuzzer's finding)
            outcome = "traceback"
            failures.append((case, op, traceback.format_exc()[-1500:]))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        clear = [s for s in registry.seen + elsewhere.seen if s.scheme == "http"]
        assert clear == [], f"case {case} ({op}): sent over http: {clear[:3]}"
        registry.seen.clear()
        elsewhere.seen.clear()
    print(f"\n{CASES} cases in {time.monotonic() - start:.1f} s: {outcomes}")
    assert not failures, f"{len(failures)} of {CASES} cases failed; the first:\n" + "\n".join(
        f"case {c} ({op}):\n{tb}" for c, op, tb in failures[:3])
