"""Certificates in a real registry (Debian's docker-registry, which has no referrers API: the tag-schema
fallback): attach and verify, and each way a certificate in a registry can be wrong ends verify with its
reason. Small artifacts stand for images here (a referrer's subject is any manifest); the round trip with
the `local` pytorch image, built, pushed and certified, is in test_integration.py."""

from __future__ import annotations

import base64
import hashlib
import http.client
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from generator.certify import certificate, referrers, sign
from generator.certify.sign import Untrusted
from generator.certify.statement import SBOM_TYPE, VERDICT_TYPE, statement, subject

REPO = Path(__file__).resolve().parents[2]


def gen_recipe(*argv):
    return subprocess.run([sys.executable, "-m", "generator.cli.main", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def small_image(host: str, repo: str, content: bytes) -> str:
    """A one-layer manifest pushed to `host/repo`: its ref @digest."""
    client = referrers.Client(host)
    layer = client.put_blob(repo, content)
    config = client.put_blob(repo, b'{"architecture":"amd64","os":"linux"}')
    manifest = json.dumps({"schemaVersion": 2, "mediaType": referrers.MANIFEST,
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 37},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer,
                                       "size": len(content)}]}).encode()
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    client.put_manifest(repo, "v1", manifest, referrers.MANIFEST)
    return f"{host}/{repo}:v1@{digest}"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    private, public = sign.keygen(tmp_path_factory.mktemp("keys") / "site.key")
    return sign.load_signer(private), private, public


def sbom_of(ref: str) -> dict:
    digest = ref.rsplit("@", 1)[1]
    return statement(certificate.subjects_of(ref, digest), SBOM_TYPE,
                     {"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [
                         {"name": "openmpi-bin", "version": "4.1.4-3", "purl": "pkg:deb/debian/openmpi-bin@4.1.4-3"}]})


def verify(ref: str, public: Path):
    return gen_recipe("verify", ref, "--key", str(public))


def test_attach_then_verify_through_the_fallback_tag(registry, keys):
    signer, _, public = keys
    ref = small_image(registry, "cert/attach", b"one")
    (where,) = certificate.publish(ref, {"sbom": sbom_of(ref)}, signer)
    digest = ref.rsplit("@", 1)[1]
    index = json.loads(urllib_get(f"http://{registry}/v2/cert/attach/manifests/{referrers.fallback_tag(digest)}"))
    assert [m["digest"] for m in index["manifests"]] == [where.split()[1]]
    assert index["manifests"][0]["artifactType"] == referrers.ENVELOPE_TYPE
    r = verify(ref, public)
    assert r.returncode == 0, r.stderr
    assert f"found in the tag {referrers.fallback_tag(digest)}" in r.stdout and "openmpi-bin" in r.stdout
    by_tag = verify(ref.rsplit("@", 1)[0], public)            # the tag resolves to the same digest
    assert by_tag.returncode == 0 and by_tag.stdout.splitlines()[1:] == r.stdout.splitlines()[1:]


def urllib_get(url: str) -> bytes:
    import urllib.request
    req = urllib.request.Request(url, headers={"Accept": referrers.INDEX + ", " + referrers.MANIFEST})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read()


def _attach_raw(ref: str, envelope: dict, kind_type: str = SBOM_TYPE) -> None:
    referrers.attach(ref, json.dumps(envelope).encode(), kind_type, "2026-11-27T00:00:00Z")


def _payload(envelope: dict, change) -> dict:
    st = json.loads(base64.b64decode(envelope["payload"]))
    change(st)
    return {**envelope, "payload": base64.b64encode(json.dumps(st).encode()).decode()}


@pytest.mark.parametrize("case", ["payload", "signature", "subject digest", "unknown key"])
def test_a_tampered_certificate_fails_verify_with_its_reason(registry, keys, tmp_path, case):
    signer, private, public = keys
    ref = small_image(registry, f"cert/{case.replace(' ', '-')}", case.encode())
    envelope = sign.sign(sbom_of(ref), signer)
    if case == "payload":
        envelope, reason = _payload(envelope, lambda st: st["predicate"]["components"].clear()), "tampered"
    elif case == "signature":
        sig = base64.b64decode(envelope["signatures"][0]["sig"])
        envelope["signatures"][0]["sig"] = base64.b64encode(bytes([sig[0] ^ 1]) + sig[1:]).decode()
        reason = "tampered"
    elif case == "subject digest":
        st = sbom_of(ref)
        st["subject"] = [subject("elsewhere", "sha256:" + "e" * 64)]
        envelope, reason = sign.sign(st, signer), "a statement about another digest (sha256:eeee"
    else:
        other, _ = sign.keygen(tmp_path / "other.key")
        envelope, reason = sign.sign(sbom_of(ref), sign.load_signer(other)), "signed by an unknown key"
    _attach_raw(ref, envelope)
    r = verify(ref, public)
    assert r.returncode == 1 and reason in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stdout == ""


def test_a_referrer_swapped_in_from_another_image_is_refused(registry, keys):
    signer, _, public = keys
    mine, theirs = small_image(registry, "cert/swap", b"mine"), small_image(registry, "cert/swap", b"theirs")
    certificate.publish(theirs, {"sbom": sbom_of(theirs)}, signer)
    mine_digest, their_digest = mine.rsplit("@", 1)[1], theirs.rsplit("@", 1)[1]
    client = referrers.Client(registry)
    their_index = client.manifest("cert/swap", referrers.fallback_tag(their_digest))[0]
    client.put_manifest("cert/swap", referrers.fallback_tag(mine_digest), their_index, referrers.INDEX)
    r = verify(mine, public)
    assert r.returncode == 1 and f"is about another manifest ({their_digest})" in r.stderr, r.stderr
    assert verify(theirs, public).returncode == 0


def test_no_certificate_and_no_image(registry, keys):
    _, _, public = keys
    ref = small_image(registry, "cert/none", b"none")
    r = verify(ref, public)
    assert r.returncode == 1 and "no certificate attached to" in r.stderr
    r = verify(f"{registry}/cert/none:nosuchtag", public)
    assert r.returncode == 1 and "no such image in the registry" in r.stderr
    r = verify(f"{ref.rsplit('@', 1)[0]}@sha256:{'f' * 64}", public)
    assert r.returncode == 1 and "no such image" in r.stderr


def test_a_verdict_certified_from_results_names_the_image_and_prints_its_verdicts(registry, keys, tmp_path):
    _, private, public = keys
    ref = small_image(registry, "cert/verdict", b"verdict")
    results = tmp_path / "results.json"
    record = {"site": "local", "workload": "cnn", "runtime": "charliecloud", "mode": "hybrid", "metric": "throughput",
              "ratio": 0.994, "low": 0.981, "high": 1.007, "pairs": 12, "verdict": "pass", "message": "",
              "tolerance": [1.0, -0.05, 0.1, "ratio"], "bare": [], "container": [],
              "extra": {"image": ref, "environment": {"bare": {"torch": "2.13.0+cpu"}, "container": {"torch": "2.13.0+cpu"}}}}
    results.write_text(json.dumps({"benchmarks": [{"name": "test_overhead[cnn-charliecloud]",
                                                   "extra_info": {"results": [record]}}]}))
    r = gen_recipe("certify", str(results), "--image", ref, "--key", str(private))
    assert r.returncode == 0, r.stderr
    r = verify(ref, public)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("local "))
    assert line.split() == ["local", "1", "charliecloud", "hybrid", "cnn", "(eager)", "0.994", "[0.981,", "1.007]",
                            "12", "[0.950,", "1.100]", "PASS"]
    r = gen_recipe("verify", ref, "--key", str(public), "--json")
    (st,) = json.loads(r.stdout)["statements"]
    assert st["predicateType"] == VERDICT_TYPE
    assert st["predicate"]["verdicts"][0]["likeForLike"]["bare"] == st["predicate"]["verdicts"][0]["likeForLike"]["container"]


class _ReferrersFront(http.server.BaseHTTPRequestHandler):
    """The referrers API of the OCI distribution spec in front of Debian's registry (which lacks it): a
    manifest PUT with a subject is answered with OCI-Subject and listed by GET /v2/<name>/referrers/<digest>."""

    protocol_version = "HTTP/1.1"
    upstream = ("127.0.0.1", 0)
    listed: dict = {}

    def log_message(self, *args):
        pass

    def _forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.command == "GET" and "/referrers/" in self.path:
            digest = self.path.split("/referrers/", 1)[1].split("?")[0]
            self._send(200, {"Content-Type": referrers.INDEX}, json.dumps(
                {"schemaVersion": 2, "mediaType": referrers.INDEX, "manifests": self.listed.get(digest, [])}).encode())
            return
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("content-length", "connection", "host")}
        conn.request(self.command, self.path, body=body if self.command in ("PUT", "POST", "PATCH") else None,
                     headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        extra = {}
        if self.command == "PUT" and "/manifests/" in self.path and resp.status == 201:
            doc = json.loads(body)
            if "subject" in doc:
                mine = "sha256:" + hashlib.sha256(body).hexdigest()
                self.listed.setdefault(doc["subject"]["digest"], []).append(
                    {"mediaType": doc["mediaType"], "digest": mine, "size": len(body), "artifactType": doc["artifactType"]})
                extra["OCI-Subject"] = doc["subject"]["digest"]
        out = {k: v for k, v in resp.getheaders() if k.lower() not in ("content-length", "connection", "transfer-encoding")}
        self._send(resp.status, {**out, **extra}, data if self.command != "HEAD" else b"",
                   resp.getheader("Content-Length") if self.command == "HEAD" else None)
        conn.close()

    def _send(self, status, headers, data, length=None):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = _forward


def test_a_registry_with_the_referrers_api_is_used_without_the_fallback_tag(registry, keys):
    signer, _, public = keys
    host, port = registry.split(":")
    handler = type("Front", (_ReferrersFront,), {"upstream": (host, int(port)), "listed": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        front = f"127.0.0.1:{server.server_address[1]}"
        ref = small_image(front, "cert/api", b"api")
        certificate.publish(ref, {"sbom": sbom_of(ref)}, signer)
        digest = ref.rsplit("@", 1)[1]
        assert referrers.Client(registry).manifest("cert/api", referrers.fallback_tag(digest)) is None   # no tag made
        r = verify(ref, public)
        assert r.returncode == 0 and "found in the referrers API" in r.stdout, r.stdout + r.stderr
    finally:
        server.shutdown()


def test_the_registry_must_serve_the_bytes_a_referrer_was_listed_with(registry, keys):
    signer, _, _ = keys
    ref = small_image(registry, "cert/bytes", b"bytes")
    certificate.publish(ref, {"sbom": sbom_of(ref)}, signer)
    digest = ref.rsplit("@", 1)[1]
    (d,), _ = referrers.listed(ref, digest)
    with pytest.raises(Untrusted, match="is listed but not in the registry"):
        referrers.fetch(ref, {**d, "digest": "sha256:" + "0" * 64}, digest)
