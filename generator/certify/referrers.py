"""Statements attached to an image in its registry as OCI 1.1 referrers (the OCI distribution spec's
"Listing Referrers"), through the distribution API itself:

    attach(ref, digest, envelope, predicate_type)  → the referrer's manifest digest
    listed(ref, digest)                            → the referrers' descriptors (the API, else the fallback tag)
    fetch(ref, descriptor, subject)                → the envelope bytes, every digest checked

A referrer is an image manifest with `artifactType` application/vnd.dsse.envelope.v1+json, the empty config,
one layer (the DSSE envelope) and `subject` = the image's manifest. Registries without the referrers API
(Debian's docker-registry 2.8 is one) get the spec's fallback: an image index tagged `sha256-<hex of the
subject>` listing the referrers, read, extended and written back. Credentials: none, or the login of
podman/skopeo/docker (their auth.json or config.json), sent to the registry's token service.

Network rules: a request goes only to http or https, never from https to http (a redirect, a `Link`, an upload's
`Location`, a token service: what went over https never goes in clear); credentials go only to the scheme, host
and port they are for; every read waits at most `timeout`, every request (redirects included) ends by its
deadline, and one client talks at most `total` seconds in all, on servers that answer a byte at a time too.
"""

from __future__ import annotations

import base64
import hashlib
import functools
import http.client
import json
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from generator.certify.sign import MAX_ENVELOPE, Untrusted
from generator.certify.statement import DIGEST
from generator.errors import GenRecipeError, UsageError, shown
from generator.images.tags import insecure, registry_host

ENVELOPE_TYPE = "application/vnd.dsse.envelope.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
ACCEPT = ", ".join((MANIFEST, INDEX, "application/vnd.docker.distribution.manifest.v2+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json"))
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"
MAX_MANIFEST = 4 << 20          # the distribution spec's limit for manifests
TIMEOUT = 60                    # seconds one read may wait for a byte
DEADLINE = 300                  # seconds for one whole request, redirects included (a 16 MB envelope on a slow link)
TOTAL = 900                     # seconds one command may talk to the registry, every request together
REFUSED = "refused (http or https only, and only https from https: nothing sent over https goes in clear)"
MAX_REFERRERS = 200             # envelopes one verify reads (each a few MB at most)
MAX_PAGES = 20                  # pages of a referrers list
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"          # the distribution spec's path component
_REF = re.compile(f"(?P<name>{_COMPONENT}(?:/{_COMPONENT})*)" + r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?")


class RegistryError(GenRecipeError):
    """The registry refused or could not be reached."""


@dataclass(frozen=True)
class Ref:
    host: str
    repo: str
    tag: str | None
    digest: str | None

    def __str__(self) -> str:
        return f"{self.host}/{self.repo}" + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
                   r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def parse(ref: str) -> Ref:
    """HOST/REPO[:TAG][@sha256:…]; one line for anything else (a registry host is required)."""
    if ref.startswith(("/", "./", "../", "~")) or ref.endswith((".sif", ".tar.gz", ".tar", ".sqsh")):
        raise UsageError(f"{shown(ref)}: no such file (an exported image is a file that exists; a registry image is "
                         "HOST[:PORT]/REPOSITORY[:TAG][@sha256:…])")
    host = registry_host(ref)
    port = host.rsplit(":", 1)[1] if ":" in host and not host.endswith("]") else "0"
    if host == "docker.io" or "/" not in ref or any(c in ref for c in " \t\n\r\\") or not _HOST.fullmatch(host) \
            or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"image {shown(ref)}: give it as HOST[:PORT]/REPOSITORY[:TAG][@sha256:…] (a registry's image)")
    m = _REF.fullmatch(ref.split("/", 1)[1])
    if not m:
        raise UsageError(f"image {shown(ref)}: not a valid repository reference (lower-case path, :tag, @sha256:<64 hex>)")
    return Ref(host.lower(), m["name"], m["tag"], m["digest"])


def _auth_files(environ: Mapping[str, str]) -> list[Path]:
    """Where podman, skopeo and docker keep a login (containers-auth.json(5); docker's config.json)."""
    out = [environ.get("REGISTRY_AUTH_FILE", "")]
    out.append(f"{environ['XDG_RUNTIME_DIR']}/containers/auth.json" if environ.get("XDG_RUNTIME_DIR")
               else f"/run/containers/{os.getuid()}/auth.json")
    home = Path(environ.get("HOME", "~")).expanduser()
    out += [str(home / ".config/containers/auth.json"), str(home / ".docker/config.json")]
    return [Path(p) for p in out if p]


def credentials(host: str, repo: str = "", environ: Mapping[str, str] = os.environ) -> str | None:
    """The base64 user:password the container tools' login stored for `host` (or, the most specific first, a
    `host/namespace` entry that holds `repo`), or None. Credential helpers are not asked."""
    keys = [f"{host}/{repo}".rsplit("/", i)[0] for i in range(repo.count("/") + 1)] if repo else []
    keys.append(host)
    for path in _auth_files(environ):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue
        auths = data.get("auths") if isinstance(data, dict) else None
        for key in keys:
            entry = auths.get(key) if isinstance(auths, dict) else None
            if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
                return entry["auth"]
    return None


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an absolute URL, the scheme's port filled in: what credentials are bound to."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return "", url, -1                         # a malformed URL is no one's origin
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port if port is not None else {"http": 80, "https": 443}.get(scheme, -1)


def allowed(source: str, url: str) -> bool:
    """May a URL that a server at `source` named (a redirect, a `Link`, an upload's `Location`, a token service) be
    opened? http or https with a host, and https when `source` is: nothing that went over https goes in clear."""
    scheme, host, port = origin(url)
    return scheme in ("http", "https") and bool(host) and port > 0 and (scheme == "https" or origin(source)[0] != "https")


@dataclass(frozen=True)
class Deadline:
    """When one request must be over (`end`, on time.monotonic()), and how long one read may wait for a byte."""
    end: float
    per_read: float
    seconds: float                  # the request's whole time, for messages

    def left(self) -> float:
        """What the next connect, handshake, read or write may take; TimeoutError once the request's time is up."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer within {self.seconds:g} s")
        return min(self.per_read, left)


class _Timed:
    """A socket each of whose reads and writes waits at most its request's `Deadline.left()`: a per-read timeout
    that shrinks to what is left of the request (a server that sends a byte every second is cut off too)."""

    deadline: Deadline | None = None

    def _arm(self) -> None:
        if self.deadline is not None:
            self.settimeout(self.deadline.left())

    def recv(self, *args):
        self._arm()
        return super().recv(*args)

    def recv_into(self, *args):
        self._arm()
        return super().recv_into(*args)

    def send(self, *args):
        self._arm()
        return super().send(*args)

    def sendall(self, *args):
        self._arm()
        return super().sendall(*args)


class _TimedSocket(_Timed, socket.socket):
    pass


class _TimedTLSSocket(_Timed, ssl.SSLSocket):
    pass


def _connect(host: str, port: int, deadline: Deadline) -> _TimedSocket:
    """A TCP connection whose reads and writes keep `deadline` (the TLS handshake takes the timeout it has then as
    its whole time)."""
    plain = socket.create_connection((host, port), deadline.left())
    sock = _TimedSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.deadline = deadline
    sock.settimeout(deadline.left())
    return sock


class _Plain(http.client.HTTPConnection):
    def __init__(self, host, *, deadline: Deadline, **kw):
        super().__init__(host, **kw)
        self.deadline = deadline

    def connect(self):
        self.sock = _connect(self.host, self.port, self.deadline)


class _TLS(http.client.HTTPSConnection):
    def __init__(self, host, *, deadline: Deadline, tls: ssl.SSLContext, **kw):
        super().__init__(host, context=tls, **kw)
        self.deadline, self.tls = deadline, tls

    def connect(self):
        sock = self.tls.wrap_socket(_connect(self.host, self.port, self.deadline), server_hostname=self.host)
        sock.deadline = self.deadline
        self.sock = sock


class _HTTP(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(functools.partial(_Plain, deadline=req.deadline), req)


class _HTTPS(urllib.request.HTTPSHandler):
    """https with the system's CAs (or SSL_CERT_FILE's: a registry with a private CA) and timed sockets."""

    def __init__(self):
        self.tls = ssl.create_default_context()
        self.tls.sslsocket_class = _TimedTLSSocket
        super().__init__(context=self.tls)

    def https_open(self, req):
        return self.do_open(functools.partial(_TLS, deadline=req.deadline, tls=self.tls), req)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows a registry's redirect (blobs served from object storage) within the request's deadline, without its
    body (which may be endless); refuses one from https to anything but https; keeps the credentials only when the
    redirect stays on their scheme, host and port (a presigned URL carries its own)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not allowed(req.full_url, newurl):
            fp.close()
            raise RegistryError(f"{shown(origin(req.full_url)[1])[:100]}: redirects {shown(req.full_url)[:100]} to "
                                f"{shown(newurl)[:100]}: {REFUSED}")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)       # HTTPError for a PUT
        if new is not None:
            fp.close()
            new.deadline = req.deadline
            if origin(newurl) != origin(req.full_url):
                new.remove_header("Authorization")
                new.unredirected_hdrs.pop("Authorization", None)
        return new


def _opener() -> urllib.request.OpenerDirector:
    """http and https only (no file:, ftp: or data: for a URL a registry names), timed, redirects checked."""
    opener = urllib.request.OpenerDirector()
    for handler in (_HTTP(), _HTTPS(), _Redirects(), urllib.request.HTTPDefaultErrorHandler(),
                    urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


def _read(resp, limit: int, what: str) -> bytes:
    """At most `limit` bytes of a response (its socket keeps the request's deadline)."""
    chunks, size = [], 0
    while True:
        chunk = resp.read1(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise RegistryError(f"{what}: larger than {limit} bytes: refused")
        chunks.append(chunk)


class Client:
    """A few distribution API calls to one registry, with its token service's bearer tokens. `timeout`: seconds one
    read may wait; `deadline`: seconds one request may take; `total`: seconds all the client's requests may take."""

    def __init__(self, host: str, repo: str = "", environ: Mapping[str, str] = os.environ, *,
                 timeout: float = TIMEOUT, deadline: float = DEADLINE, total: float = TOTAL):
        self.host = host
        self.secure = not insecure(f"{host}/x")
        self.base = ("https" if self.secure else "http") + f"://{host}"
        self.origin = origin(self.base)
        self.basic = credentials(host, repo, environ)
        self.auth: str | None = None
        self.timeout, self.deadline, self.total = timeout, deadline, total
        self.until = time.monotonic() + total
        self.opener = _opener()

    def _deadline(self) -> Deadline:
        """A new request's: the sooner of its own deadline and the client's end."""
        end = min(time.monotonic() + self.deadline, self.until)
        return Deadline(end, self.timeout, self.deadline if end < self.until else self.total)

    def _open(self, req: urllib.request.Request, deadline: Deadline):
        req.deadline = deadline                 # the timed sockets and the redirects read it
        return self.opener.open(req, timeout=self.timeout)

    def _failed(self, what: str, exc: BaseException, deadline: Deadline) -> RegistryError:
        reason = getattr(exc, "reason", exc)            # urllib wraps a failed send in a URLError
        if time.monotonic() >= deadline.end:
            return RegistryError(f"{what}: the registry did not answer within {deadline.seconds:g} s")
        if isinstance(reason, TimeoutError):
            return RegistryError(f"{what}: the registry sent nothing for {self.timeout:g} s")
        return RegistryError(f"{what}: cannot reach the registry ({shown(exc)[:200]})")

    def _token(self, challenge: str, scope_hint: str) -> str | None:
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() == "basic":
            return f"Basic {self.basic}" if self.basic else None
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        if scheme.lower() != "bearer" or "realm" not in fields:
            return None
        realm = fields["realm"]
        if not allowed(self.base, realm):
            raise RegistryError(f"{self.host}: its token service {shown(realm)[:100]} is not an https URL: refused")
        query = {k: fields[k] for k in ("service", "scope") if k in fields}
        query.setdefault("scope", scope_hint)
        what, deadline = f"{self.host} token service", self._deadline()
        try:
            req = urllib.request.Request(f"{realm}{'&' if '?' in realm else '?'}{urllib.parse.urlencode(query)}")
            if self.basic:
                req.add_header("Authorization", f"Basic {self.basic}")
            with self._open(req, deadline) as resp:
                body = json.loads(_read(resp, 1 << 20, what))
        except urllib.error.HTTPError as exc:
            exc.close()
            raise RegistryError(f"{self.host}: its token service answered {exc.code}; log in with podman login "
                                f"{self.host}") from None
        except (OSError, ValueError, RecursionError, UnicodeError, http.client.HTTPException) as exc:
            raise self._failed(what, exc, deadline) from None
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        return f"Bearer {token}" if isinstance(token, str) and token else None

    def call(self, method: str, path: str, repo: str, *, data: bytes | None = None,
             headers: Mapping[str, str] | None = None, limit: int = MAX_MANIFEST, ok=(200,)):
        """(status, headers, body). A 404 to GET or HEAD is an answer (not there); any other status outside `ok`
        raises RegistryError, so a refused upload is never taken for a stored one. `path` is the registry's, or an
        absolute URL it named (a Link, a Location), refused when it leaves https."""
        url = path if path.startswith(("https://", "http://")) else self.base + path
        what = f"{self.host}: {method} {shown(path.removeprefix(self.base).split('?')[0])[:120]}"
        if not allowed(self.base, url):
            raise RegistryError(f"{what}: the registry names {shown(url)[:100]}: {REFUSED}")
        for attempt in (0, 1):
            deadline = self._deadline()
            try:
                req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
                if self.auth and origin(url) == self.origin:
                    req.add_header("Authorization", self.auth)      # dropped on a redirect that leaves the origin
                with self._open(req, deadline) as resp:
                    if resp.status not in ok:                # a 200 to an upload that answers 201 is not "stored"
                        raise RegistryError(f"{what} answered {resp.status}, not {' or '.join(map(str, ok))}")
                    return resp.status, resp.headers, _read(resp, limit, what)
            except urllib.error.HTTPError as exc:
                try:
                    if exc.code == 401 and attempt == 0 and origin(exc.geturl()) == self.origin:
                        push = "pull,push" if method in ("PUT", "POST") else "pull"
                        self.auth = self._token(exc.headers.get("WWW-Authenticate", ""), f"repository:{repo}:{push}")
                        if self.auth:
                            continue
                    if exc.code in ok or (exc.code == 404 and method in ("GET", "HEAD")):
                        return exc.code, exc.headers, b""
                    try:
                        detail = shown(exc.read(2000).decode(errors="replace").strip())
                    except (OSError, ValueError, http.client.HTTPException) as err:
                        raise self._failed(what, err, deadline) from None
                finally:
                    exc.close()
                raise RegistryError(f"{what} answered {exc.code} {shown(exc.reason)[:80]} {detail[:200]}"
                                    + ("; log in with podman login " + self.host if exc.code in (401, 403) else "")) \
                    from None
            except (OSError, UnicodeError, ValueError, http.client.HTTPException) as exc:
                raise self._failed(what, exc, deadline) from None
        raise RegistryError(f"{self.host}: not authorised for {repo}; log in with podman login {self.host}")

    def manifest(self, repo: str, reference: str) -> tuple[bytes, str] | None:
        status, headers, body = self.call("GET", f"/v2/{repo}/manifests/{reference}", repo, headers={"Accept": ACCEPT})
        if status == 404:
            return None
        return body, headers.get("Content-Type", "").split(";")[0]

    def blob(self, repo: str, digest: str, limit: int) -> bytes | None:
        status, _, body = self.call("GET", f"/v2/{repo}/blobs/{digest}", repo, limit=limit)
        return None if status == 404 else body

    def put_blob(self, repo: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        status, _, _ = self.call("HEAD", f"/v2/{repo}/blobs/{digest}", repo)
        if status == 200:
            return digest
        _, headers, _ = self.call("POST", f"/v2/{repo}/blobs/uploads/", repo, data=b"", ok=(202,))
        location = _joined(self.base + f"/v2/{repo}/blobs/uploads/", headers.get("Location"),
                           f"{self.host}: POST /v2/{repo}/blobs/uploads/: its Location header")
        sep = "&" if "?" in location else "?"
        self.call("PUT", f"{location}{sep}digest={urllib.parse.quote(digest)}", repo, data=data,
                  headers={"Content-Type": "application/octet-stream"}, ok=(201,))
        return digest

    def put_manifest(self, repo: str, reference: str, body: bytes, media_type: str):
        _, headers, _ = self.call("PUT", f"/v2/{repo}/manifests/{reference}", repo, data=body,
                                  headers={"Content-Type": media_type}, ok=(201,))
        return headers


def _joined(base: str, url, what: str) -> str:
    """The absolute URL of a Location or Link `url` given at `base`; one line for a missing or malformed one."""
    try:
        if not isinstance(url, str) or not url:
            raise ValueError("missing")
        return urllib.parse.urljoin(base, url)
    except ValueError:
        raise RegistryError(f"{what}: {shown(url)[:100]} is not a URL (the registry is not the distribution API's)") \
            from None


def fallback_tag(digest: str) -> str:
    """The referrers tag schema's tag for a subject: `sha256-<hex>`."""
    return digest.replace(":", "-")


def resolve(ref: str, client: Client | None = None) -> tuple[str, str, int]:
    """(digest, media type, size) of the manifest `ref` names, the digest computed from the bytes served;
    a ref @digest must be served as that digest."""
    r = parse(ref)
    client = client or Client(r.host, r.repo)
    got = client.manifest(r.repo, r.digest or r.tag or "latest")
    if got is None:
        raise Untrusted(f"{ref}: no such image in the registry")
    body, media = got
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if r.digest and digest != r.digest:
        raise Untrusted(f"{ref}: the registry serves manifest {digest} for it: not the image asked for")
    if not media:
        try:
            media = json.loads(body).get("mediaType") or MANIFEST
        except (ValueError, RecursionError, AttributeError):
            raise Untrusted(f"{ref}: the registry serves no manifest for it (not JSON)") from None
    return digest, media, len(body)


def attach(ref: str, envelope: bytes, predicate_type: str, created: str, client: Client | None = None) -> str:
    """Attach `envelope` to the image `ref` as a referrer; returns the referrer manifest's digest."""
    r = parse(ref)
    client = client or Client(r.host, r.repo)
    digest, media, size = resolve(ref, client)
    client.put_blob(r.repo, EMPTY)
    layer = client.put_blob(r.repo, envelope)
    annotations = {PREDICATE_ANNOTATION: predicate_type, "org.opencontainers.image.created": created}
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "artifactType": ENVELOPE_TYPE,
                "config": {"mediaType": EMPTY_TYPE, "digest": "sha256:" + hashlib.sha256(EMPTY).hexdigest(),
                           "size": len(EMPTY), "data": base64.b64encode(EMPTY).decode()},
                "layers": [{"mediaType": ENVELOPE_TYPE, "digest": layer, "size": len(envelope)}],
                "subject": {"mediaType": media, "digest": digest, "size": size},
                "annotations": annotations}
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    mine = "sha256:" + hashlib.sha256(body).hexdigest()
    headers = client.put_manifest(r.repo, mine, body, MANIFEST)
    if headers.get("OCI-Subject") != digest:           # no referrers API: the tag schema
        descriptor = {"mediaType": MANIFEST, "digest": mine, "size": len(body), "artifactType": ENVELOPE_TYPE,
                      "annotations": annotations}
        index = _fallback(client, r.repo, digest)
        where = f"{client.host}/{r.repo}:{fallback_tag(digest)}"
        for i, m in enumerate(index["manifests"]):
            if not isinstance(m, dict) or not isinstance(m.get("digest"), str):
                raise RegistryError(f"{where}: manifests[{i}]: {shown(json.dumps(m))[:80]} is not a descriptor (an "
                                    "object with a digest): the referrers tag was not written by a registry client; "
                                    f"delete the tag (skopeo delete docker://{where}) and certify again")
        kept = [m for m in index["manifests"] if m.get("digest") != mine]
        index["manifests"] = kept + [descriptor]
        data = json.dumps(index, sort_keys=True, separators=(",", ":")).encode()
        client.put_manifest(r.repo, fallback_tag(digest), data, INDEX)
    return mine


def _fallback(client: Client, repo: str, digest: str) -> dict:
    got = client.manifest(repo, fallback_tag(digest))
    if got is None:
        return {"schemaVersion": 2, "mediaType": INDEX, "manifests": []}
    try:
        index = json.loads(got[0])
    except (ValueError, RecursionError):
        index = None
    if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
        where = f"{client.host}/{repo}:{fallback_tag(digest)}"
        raise RegistryError(f"{where}: manifests: the referrers tag is not an image index (no manifests list); delete "
                            f"the tag (skopeo delete docker://{where}) and certify again")
    return index


def _next_page(headers, page: str, what: str) -> str | None:
    """The `Link: <url>; rel="next"` of a paged referrers list (distribution spec; RFC 8288: several links in one
    header, parameters in any order), absolute (relative to the page it is on), checked as a redirect is."""
    for header in (headers.get_all("Link") or []) if headers else []:
        for url, params in re.findall(r'<([^>]*)>((?:\s*;\s*[^;,]+)*)', header):
            rels = re.search(r'rel\s*=\s*"?([^";,]+)"?', params)
            if rels and "next" in rels.group(1).split():
                url = _joined(page, url, f"{what}: its Link header")
                if not allowed(page, url):
                    raise RegistryError(f"{what}: its Link header names {shown(url)[:100]} as the next page: {REFUSED}")
                return url
    return None


def listed(ref: str, digest: str, client: Client | None = None) -> tuple[list[dict], str]:
    """The DSSE referrers of `digest` (descriptors) and where they were found ("referrers API" or the tag);
    every page of the API's list, bounded."""
    r = parse(ref)
    client = client or Client(r.host, r.repo)
    found, where, url = {}, None, f"{client.base}/v2/{r.repo}/referrers/{digest}"
    for _ in range(MAX_PAGES):
        status, headers, body = client.call("GET", url, r.repo, headers={"Accept": INDEX})
        ctype = headers.get("Content-Type", "").split(";")[0] if headers else ""
        if status != 200 or ctype != INDEX:
            break
        what = f"{ref}: the registry's referrers list ({shown(url)[:100]})"
        try:
            index = json.loads(body)
        except (ValueError, RecursionError):
            raise RegistryError(f"{what}: not JSON (the registry is not the distribution API's)") from None
        if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
            raise RegistryError(f"{what}: manifests: not an image index (the registry is not the distribution API's)")
        _add(found, index["manifests"])
        where = "referrers API"
        url = _next_page(headers, url, what)
        if url is None or len(found) > MAX_REFERRERS:
            break
    else:
        raise Untrusted(f"{ref}: the referrers list has more than {MAX_PAGES} pages: refused (remove old certificates "
                        "from the registry)")
    if where is None:
        _add(found, _fallback(client, r.repo, digest)["manifests"])
        where = f"tag {fallback_tag(digest)}"
    if len(found) > MAX_REFERRERS:
        raise Untrusted(f"{ref}: more than {MAX_REFERRERS} certificates attached: refused (remove old ones from the "
                        "registry)")
    return list(found.values()), where


def _add(found: dict, manifests: list) -> None:
    """The DSSE referrers among `manifests` into `found` (digest → descriptor): one listed many times counts once."""
    for m in manifests:
        if isinstance(m, dict) and m.get("artifactType") == ENVELOPE_TYPE:
            found.setdefault(m["digest"] if isinstance(m.get("digest"), str) else len(found), m)


def fetch(ref: str, descriptor: Mapping, subject: str, client: Client | None = None) -> bytes:
    """The envelope a referrer descriptor names; Untrusted when a digest does not match, or when the
    referrer is about another manifest than `subject` (a referrer swapped in from another image)."""
    r = parse(ref)
    client = client or Client(r.host, r.repo)
    mine = str(descriptor.get("digest", ""))
    if not DIGEST.fullmatch(mine):
        raise RegistryError(f"{ref}: the referrers list: digest: {shown(mine)[:80]!r} is not sha256:<64 hex> (the "
                            "registry is not the distribution API's; remove the entry)")
    got = client.manifest(r.repo, mine)
    if got is None:
        raise Untrusted(f"{ref}: referrer {mine} is listed but not in the registry")
    if "sha256:" + hashlib.sha256(got[0]).hexdigest() != mine:
        raise Untrusted(f"{ref}: referrer {mine}: the registry serves other bytes for it: tampered")
    what = f"{ref}: referrer {mine}"
    try:
        manifest = json.loads(got[0])
        about = manifest["subject"]["digest"]
        i, layer = next((i, x) for i, x in enumerate(manifest["layers"]) if x.get("mediaType") == ENVELOPE_TYPE)
    except (ValueError, KeyError, TypeError, StopIteration, RecursionError, AttributeError):
        raise RegistryError(f"{what}: not a DSSE referrer manifest (subject.digest, a layer of {ENVELOPE_TYPE}); "
                            "remove it from the registry, or attach the certificate again") from None
    if not isinstance(layer.get("digest"), str) or not DIGEST.fullmatch(layer["digest"]):
        raise RegistryError(f"{what}: layers[{i}].digest: {shown(layer.get('digest'))[:80]!r} is not sha256:<64 hex>; "
                            "remove the referrer from the registry, or attach the certificate again")
    if about != subject:
        raise Untrusted(f"{ref}: referrer {mine} is about another manifest ({about}), not {subject}: a referrer "
                        "swapped in from another image")
    data = client.blob(r.repo, layer["digest"], MAX_ENVELOPE)
    if data is None:
        raise Untrusted(f"{ref}: referrer {mine}: its envelope {layer['digest']} is not in the registry")
    if "sha256:" + hashlib.sha256(data).hexdigest() != layer["digest"]:
        raise Untrusted(f"{ref}: referrer {mine}: the envelope's bytes do not match its digest: tampered")
    return data
