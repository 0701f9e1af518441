"""The suite's verdicts as a predicate of gen-recipe's own (docs/certificate.md, "The verdict predicate"):
one entry per comparison of an image with bare metal, from pytest-benchmark's JSON of a suite run.

    predicate(results, results_name, results_digest, created) -> dict       # pure
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from generator import __version__
from generator.certify.sign import canonical
from generator.certify.statement import DIGEST
from generator.errors import UsageError
from generator.suite.result import Result

SCHEMA_VERSION = 2       # 2: the verdict rule of RULE (1: pass needed the whole interval inside allowed)
RULE = ("pass: the interval's low end >= allowed[0] and the ratio <= allowed[1]; fail: the interval wholly outside "
        "allowed; else inconclusive")


def fingerprint(environment) -> str | None:
    """The like-for-like fingerprint of one side: sha256 of its environment record (canonical JSON)."""
    if not isinstance(environment, dict) or not environment:
        return None
    return "sha256:" + hashlib.sha256(canonical(environment)).hexdigest()


MAX_ENVIRONMENT = 1 << 16       # bytes of one side's environment record (a few hundred in practice)


def _extra(r: Result, where: str) -> tuple[int, dict, str]:
    """The nodes, environment records and measured image of a record's extra, checked (one line each)."""
    nodes = r.extra.get("nodes", 1)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 1_000_000:
        raise UsageError(f"{where}: extra.nodes: expected a node count, got {str(nodes)[:40]!r}: not the suite's JSON")
    env = r.extra.get("environment") or {}
    if not isinstance(env, dict) or not all(isinstance(env.get(k, {}), dict) for k in ("bare", "container")):
        raise UsageError(f"{where}: extra.environment: expected {{bare: {{...}}, container: {{...}}}}: not the suite's JSON")
    for side in ("bare", "container"):
        if len(canonical(env.get(side) or {})) > MAX_ENVIRONMENT:
            raise UsageError(f"{where}: extra.environment.{side}: larger than {MAX_ENVIRONMENT} bytes: not the suite's JSON")
    image = r.extra.get("image") or ""
    if not isinstance(image, str) or len(image) > 4096:
        raise UsageError(f"{where}: extra.image: expected an image reference: not the suite's JSON")
    return nodes, env, image


def entry(r: Result, where: str = "RESULTS") -> dict:
    nodes, env, image = _extra(r, where)
    tol = r.tolerance
    return {
        "site": r.site, "nodes": nodes, "runtime": r.runtime, "mpiMode": r.mode,
        "workload": r.workload,
        "execution": "compiled" if r.extra.get("compiled") is True or r.metric == "throughput-compiled" else "eager",
        "metric": r.metric, "ratio": r.ratio, "interval": [r.low, r.high], "confidence": 0.95, "pairs": r.pairs,
        "tolerance": ({"reference": tol[0], "lower": tol[1], "upper": tol[2], "unit": tol[3],
                       "allowed": [tol[0] + tol[1], tol[0] + tol[2]], "rule": RULE} if tol else None),
        "outcome": r.verdict, "message": r.message,
        "likeForLike": {"bare": fingerprint(env.get("bare")), "container": fingerprint(env.get("container")),
                        "environment": env.get("container") or None},
        "measuredImage": image, "measuredDigests": _digests(r, where),
    }


def measured(results: Sequence[Result]) -> list[Result]:
    """The comparisons of an image with bare metal (controls and machine checks are not about the image)."""
    return [r for r in results if r.extra.get("image") and r.verdict in ("pass", "fail", "inconclusive")]


def _digests(r: Result, where: str) -> list[str]:
    got = r.extra.get("image_digests") or []
    if not isinstance(got, list) or len(got) > 1000 or not all(isinstance(d, str) and DIGEST.fullmatch(d) for d in got):
        raise UsageError(f"{where}: extra.image_digests: expected a list of sha256:<64 hex>: not the suite's JSON")
    return got


def is_about(r: Result, target: str, digest: str, where: str) -> bool:
    """Did comparison `r` measure the image `target` (manifest or file digest `digest`)? By the digests the suite
    recorded; without them, by the reference the suite ran (a digest in it, else the same reference or file name)."""
    known = _digests(r, where)
    if known:
        return digest in known
    image = str(r.extra.get("image") or "").removeprefix("docker://")
    if "@sha256:" in image:
        return image.rsplit("@", 1)[1] == digest
    if Path(target).is_file():
        return Path(image).name == Path(target).name
    return image == target.split("@", 1)[0]


def about(results: Sequence[Result], target: str, digest: str, where: str) -> tuple[list[Result], list[Result]]:
    """(the comparisons of `target`, the comparisons of other images)."""
    rows = measured(results)
    for r in rows:
        _extra(r, where)                # every record checked, not only the ones signed
    mine = [r for r in rows if is_about(r, target, digest, where)]
    return mine, [r for r in rows if r not in mine]


def predicate(rows: Sequence[Result], results_name: str, results_digest: str, created: str) -> dict:
    """The predicate of the comparisons `rows` (those `about` the image)."""
    if not rows:
        raise UsageError(f"{results_name}: no comparison of an image with bare metal in it (run pytest suites/ "
                         "with --benchmark-enable --benchmark-json=FILE)")
    entries = sorted((entry(r, results_name) for r in rows), key=lambda e: json.dumps(e, sort_keys=True))
    return {"schemaVersion": SCHEMA_VERSION, "tool": f"gen-recipe {__version__}", "date": created,
            "results": {"name": results_name, "digest": {"sha256": results_digest.split(":", 1)[-1]}},
            "verdicts": entries}
