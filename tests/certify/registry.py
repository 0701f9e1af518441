"""Test registries for the certificate's network side: `serve` (a real http.server on 127.0.0.x, in a thread), a CA
made for the test (`make_ca`), a server that answers http and https on the same port (as a hostile registry could:
`http://host:port` is then the same host and port as `https://host:port`), and `Registry`: a small in-memory
distribution API (manifests, blobs, the referrers API, uploads) whose answers a test or the fuzzer can replace.
Every request is recorded with its scheme and its Authorization header."""

from __future__ import annotations

import datetime
import hashlib
import http.server
import ipaddress
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from generator.certify import referrers

INDEX, MANIFEST, ENVELOPE = referrers.INDEX, referrers.MANIFEST, referrers.ENVELOPE_TYPE


def serve(handler_cls, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None):
    """A threading HTTP server on `host` (a free port), serving in a daemon thread; with `tls`, https as well as
    http on the same port. Stop it with `server.shutdown(); server.server_close()`."""
    server = Both((host, 0), handler_cls)
    server.tls = tls
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


class Both(http.server.ThreadingHTTPServer):
    """http and https on one port: a TLS connection starts with a handshake record (0x16)."""

    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def handle_error(self, request, client_address):     # a client that hangs up mid-answer is what tests do
        pass

    def finish_request(self, request, client_address):          # in the request's own thread
        conn = request
        if self.tls is not None:
            try:
                request.settimeout(10)
                if request.recv(1, socket.MSG_PEEK) == b"\x16":
                    conn = self.tls.wrap_socket(request, server_side=True)
            except OSError:
                return
        try:
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            if conn is not request:
                conn.close()


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA of the test's own (its certificate in folder/ca.pem, for SSL_CERT_FILE) and a server context whose
    certificate it signed, for 127.0.0.1, 127.0.0.2 and localhost."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("gen-recipe test CA")).issuer_name(_name("gen-recipe test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("127.0.0.2")),
             x509.DNSName("localhost")]
    cert = (x509.CertificateBuilder().subject_name(_name("127.0.0.2")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(cert.public_bytes(pem) + key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "server.pem")
    return folder / "ca.pem", server


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Seen:
    scheme: str                 # http or https
    port: int                   # the server's
    method: str
    path: str
    auth: str | None


@dataclass
class Answer:
    code: int = 200
    headers: list = field(default_factory=list)
    body: bytes = b""


class Registry:
    """An in-memory registry: `manifests` (tag or digest → (bytes, media type)), `blobs` (digest → bytes), the
    referrers API computed from the manifests' subjects, uploads. `login` ("Basic …"): every request must carry it
    (or the bearer token its /token hands out; else 401 with `challenge`). `hook(registry, request)` may answer
    instead: an Answer, or "done" when it wrote to request.wfile itself."""

    def __init__(self, login: str | None = None, challenge: str = 'Basic realm="test"'):
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.blobs: dict[str, bytes] = {}
        self.seen: list[Seen] = []
        self.login, self.challenge = login, challenge
        self.hook = None
        self.lock = threading.Lock()

    def push_manifest(self, doc: dict, tag: str | None = None, media: str = MANIFEST) -> str:
        data = json.dumps(doc, sort_keys=True).encode()
        digest = sha(data)
        self.manifests[digest] = (data, media)
        if tag:
            self.manifests[tag] = (data, media)
        return digest

    def push_blob(self, data: bytes) -> str:
        self.blobs[sha(data)] = data
        return sha(data)

    def referrers_of(self, digest: str) -> list[dict]:
        out = []
        for ref, (data, media) in sorted(self.manifests.items()):
            doc = json.loads(data) if ref.startswith("sha256:") else None
            if isinstance(doc, dict) and (doc.get("subject") or {}).get("digest") == digest:
                out.append({"mediaType": media, "digest": ref, "size": len(data), "artifactType": doc.get("artifactType")})
        return out

    def answer(self, req) -> Answer:
        """What the registry says to `req` (a Handler) when the hook does not."""
        if self.login and req.headers.get("Authorization") not in (self.login, "Bearer t0ken") \
                and not req.path.startswith("/token"):
            return Answer(401, [("WWW-Authenticate", self.challenge)])
        parts = req.path.split("?")[0].split("/")
        if req.path.startswith("/token"):
            return Answer(200, [("Content-Type", "application/json")], json.dumps({"token": "t0ken"}).encode())
        if len(parts) >= 5 and parts[1] == "v2" and parts[-2] == "manifests":
            if req.command == "PUT":
                self.manifests[parts[-1]] = (req.body, req.headers.get("Content-Type", MANIFEST))
                return Answer(201, [("Location", req.path)])
            got = self.manifests.get(parts[-1])
            return Answer(200, [("Content-Type", got[1])], got[0]) if got else Answer(404)
        if len(parts) >= 5 and parts[1] == "v2" and parts[-2] == "referrers":
            index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": self.referrers_of(parts[-1])}
            return Answer(200, [("Content-Type", INDEX)], json.dumps(index).encode())
        if len(parts) >= 5 and parts[1] == "v2" and parts[-2] == "blobs":
            got = self.blobs.get(parts[-1])
            return Answer(200, [("Content-Type", "application/octet-stream")], got) if got is not None else Answer(404)
        if len(parts) >= 5 and parts[1] == "v2" and parts[-2] == "uploads" and req.command == "POST":
            return Answer(202, [("Location", f"/v2/{'/'.join(parts[2:-2])}/uploads/1")])
        if len(parts) >= 5 and parts[1] == "v2" and parts[-2] == "uploads" and req.command == "PUT":
            digest = req.path.split("digest=")[-1].replace("%3A", ":")
            if sha(req.body) != digest:
                return Answer(400)
            self.blobs[digest] = req.body
            return Answer(201, [("Location", f"/v2/x/blobs/{digest}")])
        return Answer(404)

    def handler(self):
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _any(self):
                scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
                size = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(min(size, 1 << 24)) if size > 0 else b""
                self.scheme = scheme
                with registry.lock:
                    registry.seen.append(Seen(scheme, self.server.server_address[1], self.command, self.path,
                                              self.headers.get("Authorization")))
                got = (registry.hook(registry, self) if registry.hook else None) or registry.answer(self)
                if got == "done":               # the hook wrote the answer itself (a drip, a cut connection)
                    return
                self.send_response(got.code)
                for k, v in got.headers:
                    self.send_header(k, v)
                if not any(k.lower() == "content-length" for k, _ in got.headers):
                    self.send_header("Content-Length", str(len(got.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(got.body)

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _any

        return Handler


def drip(req, data: bytes, every: float = 0.05, head: bytes = b"") -> str:
    """Send `head`, then `data` a byte at a time (a server that keeps a client waiting without ever going quiet)."""
    try:
        req.wfile.write(head)
        for i in range(len(data)):
            req.wfile.write(data[i:i + 1])
            time.sleep(every)
    except OSError:
        pass
    return "done"


def image(registry: Registry, repo: str = "r", tag: str = "1") -> str:
    """An image (its manifest, config and layer) tagged `tag`; its manifest digest."""
    config = registry.push_blob(b'{"architecture":"amd64","os":"linux"}')
    layer = registry.push_blob(b"a layer")
    return registry.push_manifest({"schemaVersion": 2, "mediaType": MANIFEST,
                                   "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                              "digest": config, "size": 37},
                                   "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer,
                                               "size": 7}]}, tag)


def attach(registry: Registry, subject: str, envelope: bytes, predicate: str = "https://slsa.dev/provenance/v1") -> str:
    """A DSSE referrer of `subject` (as `referrers.attach` writes one), stored directly; its digest."""
    layer = registry.push_blob(envelope)
    empty = registry.push_blob(b"{}")
    return registry.push_manifest({
        "schemaVersion": 2, "mediaType": MANIFEST, "artifactType": ENVELOPE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2},
        "layers": [{"mediaType": ENVELOPE, "digest": layer, "size": len(envelope)}],
        "subject": {"mediaType": MANIFEST, "digest": subject, "size": len(registry.manifests[subject][0])},
        "annotations": {"in-toto.io/predicate-type": predicate}})
