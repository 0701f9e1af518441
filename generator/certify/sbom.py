"""The SBOM of an image (CycloneDX 1.6 JSON, made with cyclonedx-python-lib): what a scanner reads
from the image's package databases, and what it cannot see — the components the recipe's blocks build
from source into /usr/local and /opt, each with its URL and the sha256 the build checked.

    listing = inventory(builder, ref)           # runs the image once: dpkg/rpm databases, Python distributions
    components = built_from_source(text)        # the checked downloads of the generated Dockerfile/definition
    bom = document(image, digest, listing, components, created)    # a dict, deterministic for equal inputs
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from generator import __version__
from generator.errors import GenRecipeError, shown
from generator.recipe import checksums

MAX_LISTING = 64 << 20      # bytes of the image's listing read back (a large dpkg status is a few MB)
PROPERTY = "gen-recipe:"    # prefix of our properties (CycloneDX: a namespace of the producer's)

# One run of the image prints its package databases and Python distributions between markers.
_PYTHON = ("import json, importlib.metadata as m\nseen = {}\nfor d in m.distributions():\n"
           "    n = d.metadata['Name']\n    if n and n.lower() not in seen:\n"
           "        seen[n.lower()] = [n, d.version, str(d.locate_file(''))]\n"
           "print(json.dumps(sorted(seen.values())))")
SCRIPT = ("echo @@os; cat /etc/os-release 2>/dev/null; echo @@dpkg; cat /var/lib/dpkg/status 2>/dev/null; "
          "echo @@rpm; if command -v rpm >/dev/null 2>&1; then "
          "rpm -qa --qf '%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\t%{ARCH}\\t%{SOURCERPM}\\n'; fi; "
          "echo @@python; if command -v python3 >/dev/null 2>&1; then python3 -c \"$0\"; fi")


_GIT_CLONE = re.compile(r"\bgit clone((?:[ \t]+[^\s&;|]+)+)")


class SbomFailed(GenRecipeError):
    """The image could not be read for its SBOM."""


@dataclass(frozen=True)
class Package:
    kind: str               # deb | rpm | pypi
    name: str
    version: str
    arch: str = ""
    source: str = ""        # the distro's source package
    location: str = ""      # a Python distribution's folder


@dataclass(frozen=True)
class Listing:
    os_id: str              # debian, ubuntu, rocky, ... (os-release ID)
    os_version: str
    packages: tuple[Package, ...]


@dataclass(frozen=True)
class Built:
    """A component the blocks build from source: the download the generated file checks."""
    name: str
    version: str
    url: str
    sha256: str | None      # None: its upstream publishes none (the reason in `note`)
    note: str = ""
    origin: str = "source"  # source: downloaded and built by a block; context: a file copied from the build context


def run_argv(builder: str, ref: str) -> tuple[str, ...]:
    """The command that runs the listing script in image `ref` (a SIF file for builder "apptainer"), offline."""
    if builder in ("apptainer", "singularity"):
        return (builder, "exec", "--containall", "--no-home", ref, "/bin/sh", "-c", SCRIPT, _PYTHON)
    tool = "docker" if builder == "docker" else "podman"
    return (tool, "run", "--rm", "--network=none", "--pull=never", "--entrypoint", "/bin/sh", ref, "-c", SCRIPT,
            _PYTHON)


def inventory(builder: str, ref: str) -> Listing:
    """Run the image once and read what it holds."""
    if builder not in ("podman", "docker", "buildah", "apptainer", "singularity"):
        raise SbomFailed(f"the SBOM reads the image by running it with podman, docker or apptainer (the builder is "
                         f"{builder}): build with --builder podman")
    with tempfile.TemporaryFile() as err:
        with subprocess.Popen(run_argv(builder, ref), stdout=subprocess.PIPE, stderr=err) as proc:
            out = proc.stdout.read(MAX_LISTING + 1)         # bounded: the image's own output
            if len(out) > MAX_LISTING:
                proc.kill()
            code = proc.wait()
        err.seek(0)
        tail = (err.read(1 << 16).decode(errors="replace").strip().splitlines() or ["no output"])[-1][:300]
    if len(out) > MAX_LISTING:
        raise SbomFailed(f"reading the packages of {ref}: more than {MAX_LISTING >> 20} MB of listing, refused")
    if code != 0:
        raise SbomFailed(f"reading the packages of {ref} failed (exit {code}): {shown(tail)}")
    return parse(out.decode("utf-8", errors="replace"))


def _sections(text: str) -> dict[str, str]:
    out, name, lines = {}, None, []
    for line in text.splitlines():
        if line in ("@@os", "@@dpkg", "@@rpm", "@@python"):
            if name:
                out[name] = "\n".join(lines)
            name, lines = line[2:], []
        else:
            lines.append(line)
    if name:
        out[name] = "\n".join(lines)
    return out


def _dpkg(status: str) -> list[Package]:
    out = []
    for para in re.split(r"\n\s*\n", status):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", para, re.M))
        if fields.get("Status", "").split()[-1:] != ["installed"] or "Package" not in fields:
            continue
        source = fields.get("Source", "").split(" ")[0] or fields["Package"]
        out.append(Package("deb", fields["Package"], fields.get("Version", ""), fields.get("Architecture", ""), source))
    return out


def _rpm(text: str) -> list[Package]:
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[0] and not parts[0].startswith("gpg-pubkey"):
            epoch, _, version = parts[1].partition(":")
            source = re.sub(r"-[^-]+-[^-]+\.src\.rpm$", "", parts[3])
            out.append(Package("rpm", parts[0], version if epoch in ("", "0") else parts[1], parts[2], source))
    return out


def _python(text: str) -> list[Package]:
    line = next((ln for ln in reversed(text.splitlines()) if ln.startswith("[")), "[]")
    try:
        rows = json.loads(line)
    except (ValueError, RecursionError):
        return []
    return [Package("pypi", str(r[0]), str(r[1]), location=str(r[2])) for r in rows
            if isinstance(r, list) and len(r) == 3] if isinstance(rows, list) else []


def parse(text: str) -> Listing:
    """The listing script's output → a Listing (pure)."""
    parts = _sections(text)
    release = dict(re.findall(r'^([A-Z_]+)="?([^"\n]*)"?$', parts.get("os", ""), re.M))
    packages = _dpkg(parts.get("dpkg", "")) + _rpm(parts.get("rpm", "")) + _python(parts.get("python", ""))
    return Listing(release.get("ID", "unknown"), release.get("VERSION_ID", ""),
                   tuple(sorted(set(packages), key=lambda p: (p.kind, p.name.lower(), p.version, p.arch))))


def built_from_source(text: str) -> tuple[Built, ...]:
    """The components a generated Dockerfile/definition downloads, from the project's checksum table: an
    entry counts when both its URL and its sha256 are in the text (the block wrote the download with its
    check); a download of the table's [unpublished] list, with the reason it has no checksum."""
    out = []
    for package, versions in checksums.table().items():
        for version, entry in versions.items():
            if entry.get("url") and entry["url"] in text and entry["sha256"] in text:
                out.append(Built(package, version, entry["url"], entry["sha256"], entry.get("source", "")))
    for url in sorted(set(re.findall(r"https?://[^\s\"'\\]+", text))):
        why = checksums.unpublished(url)
        if why:
            out.append(Built(url.rsplit("/", 1)[-1], "", url, None, f"no checksum published: {why}"))
    for args in _GIT_CLONE.findall(text):          # a block's git checkout (hpccm's knem): a ref, no archive
        url = next((a for a in args.split() if re.match(r"https?://", a)), None)
        ref = re.search(r"(?:--branch|-b)[ =](\S+)", args)
        if url:
            out.append(Built(url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"), ref.group(1) if ref else "", url,
                             None, f"git clone of {ref.group(1) if ref else 'the default branch'}: a git ref, no archive "
                             "checksum"))
    return tuple(sorted(set(out), key=lambda b: (b.name, b.version, b.url)))


def _purl(p: Package, listing: Listing) -> PackageURL:
    """purl-spec: pypi names lower-cased with `_` as `-`; rpm versions without the epoch, which is a qualifier."""
    if p.kind == "pypi":
        return PackageURL("pypi", None, p.name.lower().replace("_", "-"), p.version)
    distro = f"{listing.os_id}-{listing.os_version}" if listing.os_version else listing.os_id
    version, epoch = p.version, ""
    if p.kind == "rpm" and re.match(r"[0-9]+:", version):
        epoch, version = version.split(":", 1)
    qualifiers = {k: v for k, v in (("arch", p.arch), ("distro", distro), ("epoch", epoch)) if v}
    return PackageURL(p.kind, listing.os_id, p.name, version, qualifiers=qualifiers)


def document(image: str, digest: str, listing: Listing, built: Sequence[Built], created: str,
             extra: Mapping[str, str] | None = None) -> dict:
    """The CycloneDX 1.6 document (a dict). Deterministic: the serial number is derived from the digest,
    the timestamp is `created` (ISO 8601)."""
    import datetime

    meta = BomMetaData(timestamp=datetime.datetime.fromisoformat(created.replace("Z", "+00:00")))
    meta.component = Component(name=image, version=digest, type=ComponentType.CONTAINER, bom_ref=digest)
    meta.properties.add(Property(name=PROPERTY + "generator", value=f"gen-recipe {__version__}"))
    for k, v in sorted((extra or {}).items()):
        meta.properties.add(Property(name=PROPERTY + k, value=v))
    # one serial per BOM (CycloneDX: unique even when the content is not), the same for the same inputs
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"gen-recipe-sbom:{digest}:{created}"), metadata=meta)
    refs = set()
    for p in listing.packages:
        purl = _purl(p, listing)
        ref = purl.to_string()
        if ref in refs:
            continue
        refs.add(ref)
        props = [Property(name=PROPERTY + "source-package", value=p.source)] if p.source and p.source != p.name else []
        if p.location:
            props.append(Property(name=PROPERTY + "location", value=p.location))
        bom.components.add(Component(name=p.name, version=p.version, type=ComponentType.LIBRARY, purl=purl,
                                     bom_ref=ref, properties=props))
    for b in built:
        ref = f"{b.origin}:{b.name}@{b.version or b.url}"
        props = [Property(name=PROPERTY + ("built-from-source" if b.origin == "source" else "from-build-context"),
                          value="true")]
        if b.note:
            props.append(Property(name=PROPERTY + ("checksum-source" if b.origin == "source" else "note"), value=b.note))
        bom.components.add(Component(
            name=b.name, version=b.version or None, type=ComponentType.LIBRARY, bom_ref=ref,
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=b.sha256)] if b.sha256 else [],
            external_references=[ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(b.url))],
            properties=props))
    bom.register_dependency(meta.component, list(bom.components))
    doc = json.loads(JsonV1Dot6(bom).output_as_string(indent=None))
    # the image contains every component; what each one depends on is not known: no entry (an empty one would
    # say "depends on nothing")
    doc["dependencies"] = [d for d in doc.get("dependencies", []) if d.get("dependsOn")]
    return doc
