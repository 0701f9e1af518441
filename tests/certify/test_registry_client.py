"""The registry client against servers that misbehave: redirects elsewhere (no credentials follow), refused
uploads (never taken for stored), a trickling answer (a deadline), a paged referrers list, a token service
that is not https; servers that drip their answer a byte at a time (deadlines per read, per request, per client)."""

from __future__ import annotations

import base64
import http.server
import json
import time

import pytest

from generator.certify import referrers
from generator.certify.sign import Untrusted
from tests.certify.registry import Answer, Registry, drip as _drip, serve

SEEN: dict[str, list] = {"auth_elsewhere": []}


class Elsewhere(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        SEEN["auth_elsewhere"].append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def registry_handler(elsewhere_port: int):
    class Registry(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, code, body=b"", headers=()):
            self.send_response(code)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            if self.headers.get("Authorization") is None:
                return self._send(401, headers=[("WWW-Authenticate", 'Basic realm="test"')])
            if "/blobs/" in self.path:
                return self._send(307, headers=[("Location", f"http://127.0.0.1:{elsewhere_port}/presigned?x=1")])
            if "/referrers/" in self.path and "/many/" in self.path:
                item = {"mediaType": referrers.MANIFEST, "digest": "sha256:" + "3" * 64, "size": 1,
                        "artifactType": referrers.ENVELOPE_TYPE}
                return self._send(200, json.dumps({"schemaVersion": 2, "mediaType": referrers.INDEX,
                                                   "manifests": [item]}).encode(),
                                  [("Content-Type", referrers.INDEX), ("Link", f'<{self.path}>; rel="next"')])
            if "/referrers/" in self.path:
                page = 2 if "page=2" in self.path else 1
                item = {"mediaType": referrers.MANIFEST, "digest": f"sha256:{str(page) * 64}", "size": 1,
                        "artifactType": referrers.ENVELOPE_TYPE}
                links = [("Link", f'<{self.path.split("?")[0]}?page=0>; rel="prev", '
                                   f'<{self.path.split("?")[0]}?page=2>; type="x"; rel="next"')] if page == 1 else []
                return self._send(200, json.dumps({"schemaVersion": 2, "mediaType": referrers.INDEX,
                                                   "manifests": [item]}).encode(),
                                  [("Content-Type", referrers.INDEX), *links])
            if "/slow/" in self.path:
                self.send_response(200)
                self.send_header("Content-Length", "100")
                self.end_headers()
                for _ in range(100):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
                return None
            return self._send(404)

        def do_PUT(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if "/ok200/" in self.path:
                return self._send(200)
            if self.headers.get("Authorization") is None:
                return self._send(401, headers=[("WWW-Authenticate", 'Bearer realm="file:///etc/passwd"')]) \
                    if "/token/" in self.path else self._send(401, headers=[("WWW-Authenticate", 'Basic realm="t"')])
            return self._send(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')

    return Registry


@pytest.fixture
def servers(tmp_path):
    other = serve(Elsewhere)
    registry = serve(registry_handler(other.server_address[1]))
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"auths": {f"127.0.0.1:{registry.server_address[1]}": {
        "auth": base64.b64encode(b"alice:hunter2").decode()}}}))
    yield f"127.0.0.1:{registry.server_address[1]}", {"REGISTRY_AUTH_FILE": str(auth), "HOME": str(tmp_path)}
    registry.shutdown()
    other.shutdown()


def test_a_redirect_to_another_host_carries_no_credentials(servers):
    host, environ = servers
    SEEN["auth_elsewhere"].clear()
    client = referrers.Client(host, "r", environ)
    assert client.blob("r", "sha256:" + "a" * 64, 100) == b"{}"
    assert client.auth == "Basic " + base64.b64encode(b"alice:hunter2").decode()     # the registry got them
    assert SEEN["auth_elsewhere"] == [None]                                           # the other host did not


def test_a_refused_upload_is_an_error_not_a_stored_manifest(servers):
    host, environ = servers
    with pytest.raises(referrers.RegistryError, match="answered 404"):
        referrers.Client(host, "r", environ).put_manifest("r", "sha256:" + "a" * 64, b"{}", referrers.MANIFEST)


def test_a_token_service_that_is_not_https_is_refused(servers):
    host, environ = servers
    with pytest.raises(referrers.RegistryError, match="is not an https URL"):
        referrers.Client(host, "token/r", environ).put_manifest("token/r", "x", b"{}", referrers.MANIFEST)


def test_an_answer_that_trickles_meets_a_deadline(servers):
    host, environ = servers
    start = time.monotonic()
    with pytest.raises(referrers.RegistryError, match="did not answer within 1 s"):
        referrers.Client(host, "slow", environ, deadline=1).call("GET", "/v2/slow/x", "slow")
    assert time.monotonic() - start < 5


def test_every_page_of_the_referrers_api_is_read(servers):
    host, environ = servers
    found, where = referrers.listed(f"{host}/r:1", "sha256:" + "f" * 64, referrers.Client(host, "r", environ))
    assert where == "referrers API" and [d["digest"] for d in found] == ["sha256:" + "1" * 64, "sha256:" + "2" * 64]


def test_credentials_of_a_namespace_and_of_roots_podman_login(tmp_path):
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"auths": {"reg.example/team": {"auth": "dGVhbQ=="}, "reg.example": {"auth": "aG9zdA=="}}}))
    environ = {"REGISTRY_AUTH_FILE": str(auth), "HOME": str(tmp_path)}
    assert referrers.credentials("reg.example", "team/app", environ) == "dGVhbQ=="
    assert referrers.credentials("reg.example", "other/app", environ) == "aG9zdA=="
    assert any(str(p).startswith("/run/containers/") for p in referrers._auth_files({"HOME": str(tmp_path)}))


def test_a_referrer_not_in_the_registry_is_untrusted(servers):
    host, environ = servers
    client = referrers.Client(host, "r", environ)
    with pytest.raises(Untrusted, match="is listed but not in the registry"):
        referrers.fetch(f"{host}/r:1", {"digest": "sha256:" + "1" * 64}, "sha256:" + "f" * 64, client)


def test_a_referrers_list_of_endless_pages_is_refused(servers):
    host, environ = servers
    with pytest.raises(Untrusted, match="more than 20 pages"):
        referrers.listed(f"{host}/many:1", "sha256:" + "f" * 64, referrers.Client(host, "many", environ))


def test_an_upload_answered_with_another_success_than_the_specs_is_not_taken_for_stored(servers):
    host, environ = servers
    client = referrers.Client(host, "ok200", environ)
    client.auth = "Basic " + base64.b64encode(b"alice:hunter2").decode()
    with pytest.raises(referrers.RegistryError, match="answered 200, not 201"):
        client.put_manifest("ok200", "sha256:" + "a" * 64, b"{}", referrers.MANIFEST)


def _hops(registry, req):
    """Ten redirects, each after 0.2 s: every hop is quick, the chain is not."""
    n = int(req.path.rsplit("/", 1)[-1]) if req.path.startswith("/hop/") else 0
    time.sleep(0.2)
    return Answer(302, [("Location", f"/hop/{n + 1}")])


@pytest.mark.parametrize("hook", [
    lambda registry, req: _drip(req, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"),
    lambda registry, req: _drip(req, b"e" * 2000, head=b"HTTP/1.1 500 Oops\r\nContent-Length: 2000\r\n\r\n"),
    lambda registry, req: _drip(req, b"HTTP/1.1 200 OK\r\n" + b"X-Pad: 1\r\n" * 40),
    _hops,
    lambda registry, req: Answer(401, [("WWW-Authenticate", f'Bearer realm="http://{req.headers["Host"]}/token"')])
    if not req.path.startswith("/token") else _drip(req, b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n" + b" " * 20),
], ids=["header-line", "error-body", "headers", "redirects", "token-service"])
def test_a_registry_that_drips_meets_the_requests_deadline(hook):
    """Every read waits at most `timeout` and every request, redirects included, ends by its deadline, whatever the
    server sends meanwhile (here a byte every 0.05 s: the per-read timeout alone would never fire)."""
    registry = Registry()
    registry.hook = hook
    server = serve(registry.handler())
    try:
        client = referrers.Client(f"127.0.0.1:{server.server_address[1]}", "r", {}, timeout=0.4, deadline=0.6)
        start = time.monotonic()
        with pytest.raises(referrers.RegistryError, match=r"did not answer within 0\.6 s"):
            client.call("GET", "/v2/r/manifests/1", "r")
        assert time.monotonic() - start < 2.0
    finally:
        server.shutdown()
        server.server_close()


def test_all_of_a_clients_requests_together_meet_its_total():
    registry = Registry()
    registry.hook = lambda registry, req: time.sleep(0.35)          # then the registry's own answer
    server = serve(registry.handler())
    try:
        start = time.monotonic()
        client = referrers.Client(f"127.0.0.1:{server.server_address[1]}", "r", {}, timeout=1, deadline=1, total=0.9)
        with pytest.raises(referrers.RegistryError, match=r"did not answer within 0\.9 s"):
            for _ in range(4):
                client.call("GET", "/v2/r/manifests/1", "r")
        assert 0.8 < time.monotonic() - start < 2.0
    finally:
        server.shutdown()
        server.server_close()
