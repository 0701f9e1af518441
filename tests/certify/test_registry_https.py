"""Credentials are bound to scheme, host and port: a registry on https (127.0.0.2, with a CA made here) that sends
the client to http on its own host and port — a referrers `Link`, a redirect of a manifest, of a blob, of its token
service, a chain through another host (127.0.0.1), an upload's `Location` — gets nothing in clear: the client
refuses before it sends a byte over http. The server answers http and https on the same port, and records the
scheme and the Authorization header of every request."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from generator.certify import certificate, referrers, sign
from generator.certify.statement import PROVENANCE_TYPE, statement, subject
from generator.errors import GenRecipeError
from tests.certify.registry import Answer, Registry, attach, drip, image, make_ca, serve

REPO = Path(__file__).resolve().parents[2]
BASIC = "Basic " + base64.b64encode(b"alice:hunter2").decode()


@dataclass(frozen=True)
class Net:
    host: str                   # 127.0.0.2:PORT, https (and http on the same port)
    port: int
    registry: Registry
    other: str                  # 127.0.0.1:PORT, another host, https and http too
    elsewhere: Registry
    keys: dict
    signer: object
    env: dict

    def plain(self) -> list:
        """Every request that came in clear, to either host."""
        return [s for s in self.registry.seen + self.elsewhere.seen if s.scheme == "http"]


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def signing(tmp_path_factory):
    private, public = sign.keygen(tmp_path_factory.mktemp("keys") / "site.key")
    return sign.load_signer(private), {str(public): sign.load_public(public)}, public


@pytest.fixture
def net(ca, signing, tmp_path, monkeypatch):
    cafile, tls = ca
    registry, elsewhere = Registry(login=BASIC), Registry()
    server, other = serve(registry.handler(), "127.0.0.2", tls), serve(elsewhere.handler(), "127.0.0.1", tls)
    host = f"127.0.0.2:{server.server_address[1]}"
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"auths": {host: {"auth": BASIC.split()[1]}}}))
    env = {"SSL_CERT_FILE": str(cafile), "REGISTRY_AUTH_FILE": str(auth), "HOME": str(tmp_path)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    digest = image(registry)
    st = statement([subject(f"{host}/r", digest)], PROVENANCE_TYPE, {"buildDefinition": {}, "runDetails": {}})
    attach(registry, digest, sign.canonical(sign.sign(st, signing[0])))
    yield Net(host, server.server_address[1], registry, f"127.0.0.1:{other.server_address[1]}", elsewhere,
              signing[1], signing[0], env)
    for s in (server, other):
        s.shutdown()
        s.server_close()


def test_the_https_registry_verifies_with_its_login_sent_over_https_only(net):
    cert = certificate.verify(f"{net.host}/r:1", net.keys)
    assert len(cert.statements) == 1 and cert.where == "referrers API"
    assert any(s.auth == BASIC for s in net.registry.seen) and net.plain() == []


def _on(path_part: str, answer):
    """A hook: `answer(net_port, request)` for authenticated https requests whose path holds `path_part`."""
    def hook(registry, req):
        if req.scheme == "https" and req.headers.get("Authorization") == BASIC and path_part in req.path:
            return answer(req.server.server_address[1], req)
        return None
    return hook


def _link(port, req):
    if "page=2" in req.path:
        return None
    return Answer(200, [("Content-Type", referrers.INDEX),
                        ("Link", f'<http://127.0.0.2:{port}{req.path.split("?")[0]}?page=2>; rel="next"')],
                  json.dumps({"schemaVersion": 2, "mediaType": referrers.INDEX, "manifests": []}).encode())


def _to_http(port, req):
    return Answer(307, [("Location", f"http://127.0.0.2:{port}{req.path}")])


def _verify(net):
    return certificate.verify(f"{net.host}/r:1", net.keys)


def _attach(net):
    st = statement([subject(f"{net.host}/r", "sha256:" + "0" * 64)], PROVENANCE_TYPE, {})
    return referrers.attach(f"{net.host}/r:1", sign.canonical(sign.sign(st, net.signer)), PROVENANCE_TYPE, "now")


@pytest.mark.parametrize("hook, run, words", [
    (_on("/referrers/", _link), _verify, "as the next page: refused"),
    (_on("/manifests/1", _to_http), _verify, "refused (http or https only, and only https from https"),
    (_on("/blobs/", _to_http), _verify, "refused (http or https only, and only https from https"),
    (_on("/blobs/uploads/", lambda port, req: Answer(202, [("Location", f"http://127.0.0.2:{port}/v2/r/blobs/uploads/1")])
         if req.command == "POST" else None), _attach, "refused (http or https only, and only https from https"),
], ids=["link", "redirect-manifest", "redirect-blob", "upload-location"])
def test_a_downgrade_to_http_on_the_same_host_and_port_sends_nothing_in_clear(net, hook, run, words):
    net.registry.hook = hook
    with pytest.raises(referrers.RegistryError, match=re.escape(words)) as got:
        run(net)
    assert "\n" not in str(got.value)
    assert net.plain() == [], net.plain()
    assert any(s.auth == BASIC for s in net.registry.seen)              # the login was in play, over https


def test_a_token_service_that_redirects_to_http_gets_no_login_in_clear(net):
    net.registry.challenge = f'Bearer realm="https://{net.host}/token",service="r"'

    def hook(registry, req):
        if req.path.startswith("/token") and req.scheme == "https":
            return Answer(302, [("Location", f"http://{net.host}/token?again=1")])
        return None
    net.registry.hook = hook
    with pytest.raises(referrers.RegistryError, match="refused"):
        _verify(net)
    assert net.plain() == [] and any(s.auth == BASIC and s.path.startswith("/token") for s in net.registry.seen)


def test_a_chain_through_another_host_back_to_http_is_refused_and_the_other_host_gets_no_login(net):
    net.registry.hook = _on("/manifests/1", lambda port, req: Answer(307, [("Location", f"https://{net.other}/hop")]))
    net.elsewhere.hook = lambda registry, req: Answer(307, [("Location", f"http://{net.host}/v2/r/manifests/1")])
    with pytest.raises(referrers.RegistryError, match="refused"):
        _verify(net)
    assert net.plain() == [] and [s.path for s in net.elsewhere.seen] == ["/hop"]
    assert all(s.auth is None for s in net.elsewhere.seen)


def test_a_next_page_on_another_host_gets_no_login_even_when_it_asks(net):
    """A Link to another host over https may be read, without the registry's login; when it answers 401 naming a
    token service, the client does not log in there (the login is the registry's, for its own host)."""
    def page(port, req):
        return Answer(200, [("Content-Type", referrers.INDEX), ("Link", f'<https://{net.other}/page2>; rel="next"')],
                      json.dumps({"schemaVersion": 2, "mediaType": referrers.INDEX, "manifests": []}).encode())
    net.registry.hook = _on("/referrers/", page)
    net.elsewhere.hook = lambda registry, req: Answer(401, [("WWW-Authenticate", f'Bearer realm="https://{net.other}/t"')])
    with pytest.raises(referrers.RegistryError, match="answered 401"):
        _verify(net)
    assert net.plain() == [] and [s.path for s in net.elsewhere.seen] == ["/page2"]
    assert all(s.auth is None for s in net.elsewhere.seen)


def test_an_https_registry_that_drips_its_header_meets_the_deadline(net):
    net.registry.hook = lambda registry, req: drip(req, b"HTTP/1.1 200 OK\r\n" + b"X-Pad: 1\r\n" * 40)
    start = time.monotonic()
    with pytest.raises(referrers.RegistryError, match=r"did not answer within 0\.6 s"):
        referrers.Client(net.host, "r", timeout=0.4, deadline=0.6).call("GET", "/v2/r/manifests/1", "r")
    assert time.monotonic() - start < 2.0


def test_verify_on_the_command_line_refuses_the_downgrade_in_one_line(net, signing):
    """The command as a user runs it (SSL_CERT_FILE names the registry's CA; the login from REGISTRY_AUTH_FILE)."""
    net.registry.hook = _on("/referrers/", _link)
    r = subprocess.run([sys.executable, "-m", "generator.cli.main", "verify", f"{net.host}/r:1", "--key", str(signing[2])],
                       capture_output=True, text=True, cwd=REPO, timeout=120, env={**net.env, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "as the next page: refused" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert net.plain() == [] and any(s.auth == BASIC for s in net.registry.seen)


def test_origins_compare_scheme_host_and_port():
    assert referrers.origin("https://Reg.example/v2/") == referrers.origin("https://reg.example:443/x")
    assert referrers.origin("http://reg.example:443/") != referrers.origin("https://reg.example:443/")
    assert referrers.origin("https://reg.example:5000/") != referrers.origin("https://reg.example/")
    assert not referrers.allowed("https://a/x", "http://a/y") and referrers.allowed("http://a/x", "https://b/y")
    assert not any(referrers.allowed("https://a/", u) for u in ("file:///etc/passwd", "ftp://a/x", "//a/x", "https://a:0/",
                                                                 "https://[x/", "https://a:99999/", "data:,x"))
    with pytest.raises(GenRecipeError):
        referrers.Client("reg.example:5000", "r", {}).call("GET", "http://reg.example:5000/v2/", "r")
