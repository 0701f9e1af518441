"""SLSA v1 provenance of a gen-recipe build: what went in (site file, recipe, build-context files, base
images, each by digest), the generated recipe text by digest, the builder and the time.

    predicate(inputs) -> dict        # pure: the same inputs, the same predicate
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from generator import __version__
from generator.certify.statement import BUILD_TYPE, LOCAL_BUILDER, sha256

REUSED = ("no build ran: the image existed under its content-hashed tag, which the Dockerfile text and the build "
          "context determine; finishedOn is the image's creation, the inputs are read at signing and generate the same")
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.I | re.M)
_BOOTSTRAP_FROM = re.compile(r"^From:\s*(\S+)", re.M)


@dataclass(frozen=True)
class BuildInputs:
    site: str
    site_file: Path
    recipe: str
    recipe_file: Path | None          # None: a recipe given as module:function
    fmt: str                          # docker | apptainer
    text: str                         # the generated Dockerfile or definition
    builder: str
    builder_version: str
    started: str                      # ISO 8601, UTC
    finished: str
    target: str | None = None
    platform: str | None = None
    context: Sequence[tuple[str, str]] = ()          # (path in the build context, content id)
    bases: Mapping[str, str] = field(default_factory=dict)     # base image reference → digest
    environ: Mapping[str, str] = field(default_factory=dict)   # GITHUB_* of a workflow run
    reused: bool = False              # the image existed (its content-hashed tag): no build ran now


def bases_of(text: str) -> list[str]:
    """The images a Dockerfile's FROM lines (or a definition's From:) name, stages left out, in order."""
    stages = set(re.findall(r"^\s*FROM\s+\S+(?:\s+\S+)?\s+AS\s+(\S+)", text, re.I | re.M))
    names = _FROM.findall(text) + _BOOTSTRAP_FROM.findall(text)
    return list(dict.fromkeys(n for n in names if n.lower() not in {s.lower() for s in stages}))


def _file(name: str, path: Path | None) -> dict | None:
    if path is None or not path.is_file():
        return None
    return {"name": name, "uri": f"file:{path.name}", "digest": {"sha256": sha256(path.read_bytes())[7:]}}


def builder_id(environ: Mapping[str, str]) -> str:
    """The workflow that built (a GitHub Actions run), else the local builder of gen-recipe."""
    if environ.get("GITHUB_ACTIONS") == "true" and environ.get("GITHUB_WORKFLOW_REF"):
        return f"{environ.get('GITHUB_SERVER_URL', 'https://github.com')}/{environ['GITHUB_WORKFLOW_REF']}"
    return LOCAL_BUILDER


def predicate(b: BuildInputs) -> dict:
    deps = [d for d in (_file("site file", b.site_file), _file("recipe", b.recipe_file)) if d]
    for path, content in b.context:
        digest = {"sha256": content} if re.fullmatch(r"[0-9a-f]{64}", content) else {}
        deps.append({"name": "build context", "uri": f"context:{path}", **({"digest": digest} if digest else
                                                                           {"annotations": {"id": content}})})
    for ref, digest in sorted(b.bases.items()):
        deps.append({"name": "base image", "uri": f"oci:{ref}",
                     **({"digest": {"sha256": digest.split(":", 1)[1]}} if digest.startswith("sha256:") else {})})
    external = {"site": b.site, "recipe": b.recipe, "format": b.fmt}
    external.update({k: v for k, v in (("target", b.target), ("platform", b.platform)) if v})
    run_id = b.environ.get("GITHUB_RUN_ID")
    metadata = {"finishedOn": b.finished} if b.reused else {"startedOn": b.started, "finishedOn": b.finished}
    if run_id:
        metadata["invocationId"] = f"{b.environ.get('GITHUB_SERVER_URL', 'https://github.com')}/" \
                                   f"{b.environ.get('GITHUB_REPOSITORY', '')}/actions/runs/{run_id}"
    name = "Dockerfile" if b.fmt == "docker" else "definition"
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": external,
            "internalParameters": {"generator": f"gen-recipe {__version__}", "builder": b.builder,
                                   **({"reused": REUSED} if b.reused else {})},
            "resolvedDependencies": deps,
        },
        "runDetails": {
            "builder": {"id": builder_id(b.environ),
                        "version": {"gen-recipe": __version__, b.builder: b.builder_version,
                                    "host": f"{platform.system()} {platform.machine()}"}},
            "metadata": metadata,
            "byproducts": [{"name": name, "digest": {"sha256": sha256(b.text)[7:]}}],
        },
    }


def github_environ(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k in ("GITHUB_ACTIONS", "GITHUB_WORKFLOW_REF", "GITHUB_SERVER_URL",
                                                     "GITHUB_REPOSITORY", "GITHUB_RUN_ID")}
