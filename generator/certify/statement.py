"""in-toto Statements (v1) about an image: their subjects and the three predicates gen-recipe writes.

The predicate types are URIs. The SBOM and provenance use the public ones (CycloneDX, SLSA v1); the
verdict is gen-recipe's own, documented in docs/certificate.md. The project has no domain of its own, so its
URIs use the reserved `.invalid` top-level domain (RFC 2606: no one can register it, so the names cannot be
anyone else's); they change only with a new version suffix.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from generator.certify.sign import STATEMENT_TYPE

SBOM_TYPE = "https://cyclonedx.org/bom"
PROVENANCE_TYPE = "https://slsa.dev/provenance/v1"
VERDICT_TYPE = "https://gen-recipe.invalid/portability-verdict/v1"
BUILD_TYPE = "https://gen-recipe.invalid/build/v1"
LOCAL_BUILDER = "https://gen-recipe.invalid/builder/local/v1"

# predicate type → the short name the files, referrers and tables use
KINDS = {SBOM_TYPE: "sbom", PROVENANCE_TYPE: "provenance", VERDICT_TYPE: "verdict"}
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def subject(name: str, digest: str) -> dict:
    """One subject: `digest` is "sha256:<64 hex>"."""
    if not DIGEST.fullmatch(digest):
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return {"name": name, "digest": {"sha256": digest.split(":", 1)[1]}}


def statement(subjects: Iterable[dict], predicate_type: str, predicate: Mapping) -> dict:
    subjects = list(subjects)
    if not subjects:
        raise ValueError("a statement needs a subject")
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": predicate_type, "predicate": dict(predicate)}


def digests(statement: Mapping) -> set[str]:
    """The "sha256:…" digests a statement is about."""
    out = set()
    subjects = statement.get("subject")
    for s in subjects if isinstance(subjects, list) else ():
        digest = s.get("digest") if isinstance(s, Mapping) else None
        value = digest.get("sha256") if isinstance(digest, Mapping) else None
        if isinstance(value, str):
            out.add(f"sha256:{value}")
    return out


def sha256(data: bytes | str) -> str:
    return "sha256:" + hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()
