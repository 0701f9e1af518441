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
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from generator.certify.sign import MAX_ENVELOPE, Untrusted
from generator.errors import GenRecipeError, UsageError
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
TIMEOUT = 60
MAX_REFERRERS = 200             # envelopes one verify reads (each a few MB at most)
_REF = re.compile(r"(?P<name>[a-z0-9]+(?:[._/-]+[a-z0-9]+)*)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?")


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


def parse(ref: str) -> Ref:
    """HOST/REPO[:TAG][@sha256:…]; one line for anything else (a registry host is required)."""
    host = registry_host(ref)
    if host == "docker.io" or "/" not in ref or any(c in ref for c in " \t\n\\"):
        raise UsageError(f"image {ref!r}: give it as HOST[:PORT]/REPOSITORY[:TAG][@sha256:…] (a registry's image)")
    m = _REF.fullmatch(ref.split("/", 1)[1])
    if not m:
        raise UsageError(f"image {ref!r}: not a valid repository reference (lower-case path, :tag, @sha256:<64 hex>)")
    return Ref(host, m["name"], m["tag"], m["digest"])


def _auth_files(environ: Mapping[str, str]) -> list[Path]:
    out = [environ.get("REGISTRY_AUTH_FILE", "")]
    if environ.get("XDG_RUNTIME_DIR"):
        out.append(f"{environ['XDG_RUNTIME_DIR']}/containers/auth.json")
    home = Path(environ.get("HOME", "~")).expanduser()
    out += [str(home / ".config/containers/auth.json"), str(home / ".docker/config.json")]
    return [Path(p) for p in out if p]


def credentials(host: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The base64 user:password the container tools' login stored for `host`, or None."""
    for path in _auth_files(environ):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue
        entry = (data.get("auths") or {}).get(host) if isinstance(data, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
            return entry["auth"]
    return None


class Client:
    """A few distribution API calls to one registry, with its token service's bearer tokens."""

    def __init__(self, host: str, environ: Mapping[str, str] = os.environ):
        self.host = host
        self.base = ("http" if insecure(f"{host}/x") else "https") + f"://{host}"
        self.basic = credentials(host, environ)
        self.auth: str | None = None

    def _token(self, challenge: str, scope_hint: str) -> str | None:
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() == "basic":
            return f"Basic {self.basic}" if self.basic else None
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        if scheme.lower() != "bearer" or "realm" not in fields:
            return None
        query = {k: fields[k] for k in ("service", "scope") if k in fields}
        query.setdefault("scope", scope_hint)
        req = urllib.request.Request(f"{fields['realm']}?{urllib.parse.urlencode(query)}")
        if self.basic:
            req.add_header("Authorization", f"Basic {self.basic}")
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                body = json.loads(resp.read(1 << 20))
        except (OSError, ValueError, RecursionError) as exc:
            raise RegistryError(f"{self.host}: its token service refused ({exc}); log in with podman login "
                                f"{self.host}") from None
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        return f"Bearer {token}" if token else None

    def call(self, method: str, path: str, repo: str, *, data: bytes | None = None,
             headers: Mapping[str, str] | None = None, limit: int = MAX_MANIFEST, ok=(200,)):
        """(status, headers, body); statuses outside `ok` and 404 raise RegistryError."""
        url = path if path.startswith("http") else self.base + path
        for attempt in (0, 1):
            req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
            if self.auth:
                req.add_header("Authorization", self.auth)
            try:
                with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                    body = resp.read(limit + 1)
                    if len(body) > limit:
                        raise RegistryError(f"{self.host}: {path} is larger than {limit} bytes: refused")
                    return resp.status, resp.headers, body
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and attempt == 0:
                    push = "pull,push" if method in ("PUT", "POST") else "pull"
                    self.auth = self._token(exc.headers.get("WWW-Authenticate", ""), f"repository:{repo}:{push}")
                    if self.auth:
                        continue
                if exc.code in ok or exc.code == 404:
                    return exc.code, exc.headers, b""
                detail = exc.read(2000).decode(errors="replace").strip().replace("\n", " ")
                raise RegistryError(f"{self.host}: {method} {path} answered {exc.code} {exc.reason} {detail[:200]}"
                                    + ("; log in with podman login " + self.host if exc.code in (401, 403) else "")) \
                    from None
            except OSError as exc:
                raise RegistryError(f"{self.host}: cannot reach the registry ({exc})") from None
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
        location = urllib.parse.urljoin(self.base + "/", headers["Location"])
        sep = "&" if "?" in location else "?"
        self.call("PUT", f"{location}{sep}digest={urllib.parse.quote(digest)}", repo, data=data,
                  headers={"Content-Type": "application/octet-stream"}, ok=(201,))
        return digest

    def put_manifest(self, repo: str, reference: str, body: bytes, media_type: str):
        _, headers, _ = self.call("PUT", f"/v2/{repo}/manifests/{reference}", repo, data=body,
                                  headers={"Content-Type": media_type}, ok=(201,))
        return headers


def fallback_tag(digest: str) -> str:
    """The referrers tag schema's tag for a subject: `sha256-<hex>`."""
    return digest.replace(":", "-")


def resolve(ref: str, client: Client | None = None) -> tuple[str, str, int]:
    """(digest, media type, size) of the manifest `ref` names, the digest computed from the bytes served;
    a ref @digest must be served as that digest."""
    r = parse(ref)
    client = client or Client(r.host)
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
    client = client or Client(r.host)
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
        raise Untrusted(f"{client.host}/{repo}:{fallback_tag(digest)}: the referrers tag is not an image index")
    return index


def listed(ref: str, digest: str, client: Client | None = None) -> tuple[list[dict], str]:
    """The DSSE referrers of `digest` (descriptors) and where they were found ("referrers API" or the tag)."""
    r = parse(ref)
    client = client or Client(r.host)
    status, headers, body = client.call("GET", f"/v2/{r.repo}/referrers/{digest}", r.repo, headers={"Accept": INDEX})
    ctype = headers.get("Content-Type", "").split(";")[0] if headers else ""
    index = None
    if status == 200 and ctype == INDEX:
        try:
            index, where = json.loads(body), "referrers API"
        except (ValueError, RecursionError):
            raise Untrusted(f"{ref}: the registry's referrers list is not JSON") from None
    if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
        index, where = _fallback(client, r.repo, digest), f"tag {fallback_tag(digest)}"
    found = [m for m in index["manifests"] if isinstance(m, dict) and m.get("artifactType") == ENVELOPE_TYPE]
    if len(found) > MAX_REFERRERS:
        raise Untrusted(f"{ref}: {len(found)} certificates attached: more than {MAX_REFERRERS}, refused (remove old ones "
                        "from the registry)")
    return found, where


def fetch(ref: str, descriptor: Mapping, subject: str, client: Client | None = None) -> bytes:
    """The envelope a referrer descriptor names; Untrusted when a digest does not match, or when the
    referrer is about another manifest than `subject` (a referrer swapped in from another image)."""
    r = parse(ref)
    client = client or Client(r.host)
    mine = str(descriptor.get("digest", ""))
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", mine):
        raise Untrusted(f"{ref}: a referrer without a sha256 digest ({mine[:80]!r})")
    got = client.manifest(r.repo, mine)
    if got is None:
        raise Untrusted(f"{ref}: referrer {mine} is listed but not in the registry")
    if "sha256:" + hashlib.sha256(got[0]).hexdigest() != mine:
        raise Untrusted(f"{ref}: referrer {mine}: the registry serves other bytes for it: tampered")
    try:
        manifest = json.loads(got[0])
        about = manifest["subject"]["digest"]
        layer = next(x for x in manifest["layers"] if x.get("mediaType") == ENVELOPE_TYPE)
    except (ValueError, KeyError, TypeError, StopIteration, RecursionError, AttributeError):
        raise Untrusted(f"{ref}: referrer {mine} is not a DSSE referrer manifest (subject, one envelope layer)") from None
    if about != subject:
        raise Untrusted(f"{ref}: referrer {mine} is about another manifest ({about}), not {subject}: a referrer "
                        "swapped in from another image")
    data = client.blob(r.repo, layer["digest"], MAX_ENVELOPE)
    if data is None:
        raise Untrusted(f"{ref}: referrer {mine}: its envelope {layer['digest']} is not in the registry")
    if "sha256:" + hashlib.sha256(data).hexdigest() != layer["digest"]:
        raise Untrusted(f"{ref}: referrer {mine}: the envelope's bytes do not match its digest: tampered")
    return data
