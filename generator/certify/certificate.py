"""The certificate of an image: its signed statements (SBOM, provenance, verdicts), made, published in the
registry as referrers or written beside an exported file, and verified.

    made = build_statements(...)              # {"sbom": statement, "provenance": statement}
    publish(target, statements, signer)       # a registry image: referrers; a file: FILE.<kind>.dsse.json beside
    cert = verify(target, keys)               # every check, Untrusted (exit 1) with the reason
    print(table(cert))
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from glob import escape as glob_escape
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.certify import provenance, referrers, sbom
from generator.certify.sign import MAX_ENVELOPE, Untrusted, canonical, read_envelope, sign, verify as verify_envelope
from generator.certify.statement import KINDS, PROVENANCE_TYPE, SBOM_TYPE, VERDICT_TYPE, digests, statement, subject
from generator.errors import shown
from generator.files import read_bytes, write_set
from generator.images.sif import file_sha256

MAX_CELL = 200          # characters of one table cell
MPI_WORDS = ("mpi", "mpich", "fabric", "ucx", "psm2", "opx", "cxi", "ofi", "nccl", "rccl", "xpmem", "gdrcopy")
KEY_PYTHON = ("torch", "mpi4py", "numpy", "transformers", "triton")


def utc(when: datetime.datetime) -> str:
    """ISO 8601 in UTC, to the second, with Z (as the statements write times)."""
    return when.astimezone(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def now() -> str:
    return utc(datetime.datetime.now(datetime.timezone.utc))


def is_file_target(target: str) -> bool:
    """An exported file (a path that exists) rather than a registry image."""
    return Path(target).is_file()


def beside(path: Path, kind: str, tag: str = "") -> Path:
    return path.with_name(f"{path.name}.{kind}{'.' + tag if tag else ''}.dsse.json")


def envelopes_beside(path: Path) -> list[tuple[str, Path]]:
    """(kind its name says, file) of every envelope beside the exported file `path`."""
    out = []
    for file in sorted(path.parent.glob(f"{glob_escape(path.name)}.*.dsse.json")):
        kind = file.name[len(path.name) + 1:].split(".", 1)[0]
        if kind in ("sbom", "provenance", "verdict") and file.is_file():
            out.append((kind, file))
    return out


def tool_version(tool: str) -> str:
    try:
        out = subprocess.run((tool, "--version"), capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0][:100] if out else "unknown"


def base_digests(builder: str, text: str) -> dict[str, str]:
    """The local digest of each base image the recipe's FROM lines name (what the build used)."""
    out = {}
    for ref in provenance.bases_of(text):
        if builder in ("podman", "docker") and "$" not in ref:
            fmt = "{{.Digest}}" if builder == "podman" else "{{index .RepoDigests 0}}"
            proc = subprocess.run((builder, "image", "inspect", "--format", fmt, ref), capture_output=True, text=True)
            digest = proc.stdout.strip().rsplit("@", 1)[-1]
            out[ref] = digest if proc.returncode == 0 and digest.startswith("sha256:") else ""
    return out


def build_statements(subjects: Sequence[dict], listing: sbom.Listing, inputs: provenance.BuildInputs,
                     image: str, digest: str, copied: Sequence[sbom.Built] = ()) -> dict[str, dict]:
    """The SBOM and the provenance of one build, about `subjects` (pure)."""
    built = (*sbom.built_from_source(inputs.text), *copied)
    bom = sbom.document(image, digest, listing, built, inputs.finished,
                        {"site": inputs.site, "recipe": inputs.recipe})
    return {"sbom": statement(subjects, SBOM_TYPE, bom),
            "provenance": statement(subjects, PROVENANCE_TYPE, provenance.predicate(inputs))}


def publish(target: str, statements: Mapping[str, dict], signer, progress=lambda s: None) -> list[str]:
    """Sign each statement and attach it to the registry image `target`, or write it beside the file
    `target`; returns where each went."""
    envelopes = {kind: canonical(sign(st, signer)) for kind, st in statements.items()}
    if is_file_target(target):
        path = Path(target)
        # a rebuild's SBOM and provenance replace the old ones; verdicts accumulate (one file per statement)
        files = {beside(path, kind, hashlib.sha256(env).hexdigest()[:12] if kind == "verdict" else ""): env + b"\n"
                 for kind, env in envelopes.items()}
        write_set(files)
        return [shown(p) for p in files]
    out = []
    for kind, env in envelopes.items():
        progress(f"attaching the {kind} to {target}")
        mine = referrers.attach(target, env, statements[kind]["predicateType"], now())
        out.append(f"{kind} {mine}")
    return out


def write_statements(folder: Path, statements: Mapping[str, dict], target: str) -> list[Path]:
    """The unsigned statements and their predicates, for a signer of its own (cosign attest --predicate), and
    `image`: the reference @digest (or file) they are about."""
    if not is_file_target(target):
        r = referrers.parse(target)
        target = f"{r.host}/{r.repo}@{r.digest}" if r.digest else target
    files = {folder / "image": target + "\n"}
    for kind, st in statements.items():
        files[folder / f"{kind}.statement.json"] = json.dumps(st, indent=2, sort_keys=True) + "\n"
        files[folder / f"{kind}.predicate.json"] = json.dumps(st["predicate"], indent=2, sort_keys=True) + "\n"
    write_set(files, root=folder, flag=None)
    return sorted(files)


@dataclass(frozen=True)
class Certificate:
    target: str
    digest: str
    where: str                              # referrers API, tag sha256-…, or files beside
    statements: tuple[tuple[str, dict, str], ...]    # (kind, statement, the key that signed it), verified
    others: int = 0                         # envelopes signed by none of the keys given: not checked, not shown


def _keyids(envelope) -> set[str]:
    sigs = envelope.get("signatures") if isinstance(envelope, dict) else None
    return {g["keyid"] for g in sigs if isinstance(g, dict) and isinstance(g.get("keyid"), str)} \
        if isinstance(sigs, list) else set()


def _checked(where: str, data: bytes, keys: Mapping[str, object], digest: str) -> tuple[str, dict, str] | None:
    """(kind, statement, signers' names) of the envelope `data` when it names one of `keys` (name → key) among its
    signers, None when it names none of them (signed by others, unsigned, not even JSON: anyone who can push or
    write beside the file may add one: it can neither break the certificate nor join it); Untrusted when a
    signature of a given key does not verify, or the statement is about another digest or not one."""
    try:
        envelope = json.loads(data)
    except (ValueError, RecursionError):
        return None
    ids = {k.keyid for k in keys.values()}
    if not ids & _keyids(envelope):
        return None
    st = verify_envelope(envelope, list(keys.values()), where)          # every given key's signature verifies
    mine = sorted(name for name, key in keys.items() if key.keyid in _keyids(envelope))
    if digest not in digests(st):
        about = ", ".join(sorted(digests(st))) or "nothing"
        raise Untrusted(f"{where}: a statement about another digest ({about[:160]}), not {digest}")
    kind = KINDS.get(st.get("predicateType")) if isinstance(st.get("predicateType"), str) else None
    if kind is None:
        raise Untrusted(f"{where}: unknown predicate type {shown(st.get('predicateType'))[:100]!r}")
    if not isinstance(st.get("predicate"), dict):
        raise Untrusted(f"{where}: the {kind} statement has no predicate")
    return kind, st, ", ".join(mine)


def stale_beside(path: Path, digest: str) -> list[Path]:
    """The envelopes beside `path` whose statement is about another file than the one of `digest` (an earlier
    export to the same path): read, not verified."""
    out = []
    for _, file in envelopes_beside(path):
        try:
            envelope = read_envelope(file)
            about = digests(json.loads(base64.b64decode(envelope["payload"])))
        except (Untrusted, KeyError, TypeError, ValueError, RecursionError, AttributeError):
            continue
        if about and digest not in about:
            out.append(file)
    return out


def _certificate(target: str, digest: str, where: str, checked: list) -> Certificate:
    verified = tuple(c for c in checked if c is not None)
    if not verified:
        raise Untrusted(f"{shown(target)}: its {len(checked)} statement(s) are signed by an unknown key; pass the "
                        "signer's public key with --key")
    return Certificate(target, digest, where, verified, len(checked) - len(verified))


def verify(target: str, keys: Mapping[str, object]) -> Certificate:
    """Every statement of `target` (a registry image, or an exported file with its envelopes beside it) that one
    of `keys` (name → public key) signed, each checked to be untampered and about `target`'s digest; Untrusted
    with the reason otherwise. Statements signed by no key given are counted, not checked (anyone who can push
    may add some); none at all signed by `keys` is Untrusted."""
    if is_file_target(target):
        path = Path(target)
        digest = "sha256:" + file_sha256(path)
        found = envelopes_beside(path)
        if not found:
            raise Untrusted(f"{shown(path)}: no certificate beside it (no {shown(path.name)}.sbom.dsse.json, "
                            ".provenance.dsse.json or .verdict.*.dsse.json)")
        checked, seen = [], set()
        for kind, file in found:
            data = read_bytes(file, "DSSE envelope", max_bytes=MAX_ENVELOPE)
            if _once(kind.encode() + b"\0" + data, seen):       # a copy under another kind's name is still checked
                got = _checked(shown(file), data, keys, digest)
                if got and got[0] != kind:
                    raise Untrusted(f"{shown(file)}: holds a {got[0]} statement, not the {kind} its name says")
                checked.append(got)
        return _certificate(target, digest, "files beside it", checked)
    r = referrers.parse(target)
    client = referrers.Client(r.host, r.repo)
    digest, _, _ = referrers.resolve(target, client)
    descriptors, where = referrers.listed(target, digest, client)
    if not descriptors:
        raise Untrusted(f"{shown(target)}: no certificate attached to {digest} (attach one with gen-recipe build --push "
                        "--key KEY, or gen-recipe certify RESULTS --image IMAGE --key KEY)")
    checked, seen = [], set()
    for d in descriptors:
        data = referrers.fetch(target, d, digest, client)
        if _once(data, seen):
            checked.append(_checked(f"{shown(target)}: referrer {shown(d.get('digest'))}", data, keys, digest))
    return _certificate(target, digest, where, checked)


def _once(data: bytes, seen: set[str]) -> bool:
    """Is this the first time `data` (an envelope) is met? The same envelope twice is one statement."""
    digest = hashlib.sha256(data).hexdigest()
    if digest in seen:
        return False
    seen.add(digest)
    return True


def _rows(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table; every cell as the terminal may show it (an image's package names are not ours)."""
    rows = [[shown(x)[:MAX_CELL] for x in r] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()    # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _sbom_section(bom: dict) -> list[str]:
    comps = [c for c in bom.get("components", []) if isinstance(c, dict)]
    props = lambda c: {p.get("name"): p.get("value") for p in c.get("properties", []) if isinstance(p, dict)}  # noqa: E731
    built = [c for c in comps if props(c).get("gen-recipe:built-from-source") == "true"]
    copied = [c for c in comps if props(c).get("gen-recipe:from-build-context") == "true"]
    pkgs = [c for c in comps if str(c.get("purl", "")).startswith(("pkg:deb/", "pkg:rpm/"))]
    py = [c for c in comps if str(c.get("purl", "")).startswith("pkg:pypi/")]
    out = [f"What is inside (SBOM, CycloneDX {shown(bom.get('specVersion', '?'))[:20]}): {len(pkgs)} distro packages, "
           f"{len(py)} Python distributions, {len(built)} built from source, {len(copied)} copied from the build context"]
    rows = []
    for c in built + copied:
        sha = next((h.get("content", "") for h in c.get("hashes", []) if h.get("alg") == "SHA-256"), "")
        url = next((r.get("url", "") for r in c.get("externalReferences", [])), "")
        rows.append(("source" if c in built else "context", c.get("name", ""), c.get("version", ""), f"sha256 {sha}" if sha else "no checksum", url))
    for c in pkgs:
        if any(w in c.get("name", "").lower() for w in MPI_WORDS):
            rows.append(("distro", c.get("name", ""), c.get("version", ""), "", str(c.get("purl", "")).split("?")[0]))
    for c in py:
        if c.get("name", "").lower() in KEY_PYTHON:
            rows.append(("python", c.get("name", ""), c.get("version", ""), "", str(c.get("purl", ""))))
    return out + ([_rows(("kind", "component", "version", "checksum", "from"), rows)] if rows else [])


def _provenance_section(p: dict) -> list[str]:
    d, r = p.get("buildDefinition", {}), p.get("runDetails", {})
    ext = d.get("externalParameters", {})
    rows = [("build", f"site {ext.get('site')}, recipe {ext.get('recipe')}, format {ext.get('format')}"
             + (f", target {ext['target']}" if ext.get("target") else "")),
            ("generator", str(d.get("internalParameters", {}).get("generator"))),
            ("builder", f"{r.get('builder', {}).get('id')} ({d.get('internalParameters', {}).get('builder')})"),
            ("finished", str(r.get("metadata", {}).get("finishedOn"))
             + (" (no build ran: the image existed under its content-hashed tag)"
                if d.get("internalParameters", {}).get("reused") else ""))]
    for dep in d.get("resolvedDependencies", []):
        if dep.get("name") in ("site file", "recipe", "base image"):
            sha = (dep.get("digest") or {}).get("sha256")
            rows.append((dep["name"], f"{dep.get('uri')} " + (f"sha256:{sha}" if sha else "(no digest)")))
    for b in r.get("byproducts", []):
        rows.append((b.get("name", ""), f"sha256:{(b.get('digest') or {}).get('sha256')}"))
    return ["How it was made (SLSA provenance v1)", _rows(("what", "value"), rows)]


def _verdict_section(v: dict) -> list[str]:
    rows = []
    for e in v.get("verdicts", []):
        lo, hi = (e.get("interval") or [0, 0])[:2]
        tol = e.get("tolerance") or {}
        rows.append((e.get("site"), str(e.get("nodes")), e.get("runtime"), e.get("mpiMode"),
                     f"{e.get('workload')} ({e.get('execution')})", f"{e.get('ratio', 0):.3f}", f"[{lo:.3f}, {hi:.3f}]",
                     str(e.get("pairs")), "[{:.3f}, {:.3f}]".format(*tol["allowed"]) if tol else "-",
                     shown(str(e.get("outcome", "")).upper())))
    return [f"Where it was measured (verdicts, {shown(v.get('tool'))[:80]}, {shown(v.get('date'))[:40]})",
            _rows(("site", "nodes", "runtime", "mpi", "workload", "ratio", "95% interval", "pairs", "allowed",
                   "verdict"), rows)]


def _at(obj, *keys):
    """obj[k1][k2]…, None where a level is not an object (a signer's predicate may have any shape)."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _when(kind: str, st: dict) -> str:
    """When a statement's content was made (ISO 8601 sorts as text): the SBOM's timestamp, the build's end."""
    got = _at(st, "predicate", "metadata", "timestamp") if kind == "sbom" else \
        _at(st, "predicate", "runDetails", "metadata", "finishedOn")
    return got if isinstance(got, str) else ""


def table(cert: Certificate) -> str:
    kinds = [k for k, _, _ in cert.statements]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in ("sbom", "provenance", "verdict") if k in kinds)
    out = [f"Certificate of {shown(cert.target)}", f"  digest {cert.digest}",
           f"  {len(cert.statements)} signed statement(s) ({counts}), found in the {cert.where}; every signature and "
           "digest checked" + (f"; {cert.others} more signed by no key given, not checked" if cert.others else ""), ""]
    shown_ones = []
    for kind in ("sbom", "provenance"):          # a rebuild's statements join the older ones: the newest is shown
        mine = [(st, who) for k, st, who in cert.statements if k == kind]
        if mine:
            shown_ones.append((kind, *max(mine, key=lambda x: _when(kind, x[0]))))
    shown_ones += [(k, st, who) for k, st, who in cert.statements if k == "verdict"]
    for kind, st, who in shown_ones:
        section = {"sbom": _sbom_section, "provenance": _provenance_section, "verdict": _verdict_section}[kind]
        try:
            lines = section(st["predicate"])
            out += [f"{lines[0]}, signed by {shown(who)}", *lines[1:], ""]
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError):
            out += [f"(the {kind} statement verifies, but its predicate is not in the shape gen-recipe writes: "
                    "see it with --json)", ""]
    return "\n".join(out).rstrip() + "\n"


def verdict_statement(target_subjects: Sequence[dict], predicate: dict) -> dict:
    return statement(target_subjects, VERDICT_TYPE, predicate)


def subjects_of(target: str, digest: str) -> list[dict]:
    """The subject of a statement about `target`: the repository (or file) name and its digest."""
    if is_file_target(target):
        return [subject(Path(target).name, digest)]
    r = referrers.parse(target)
    return [subject(f"{r.host}/{r.repo}", digest)]
