"""gen-recipe certify RESULTS --image IMAGE|FILE --key KEY: the suite's verdicts as a signed statement
about the image they measured, attached to it in its registry (a referrer) or written beside the
exported file (FILE.verdict.dsse.json).

RESULTS is pytest-benchmark's JSON of a suite run (`pytest suites/ --site=X --benchmark-enable
--benchmark-json=RESULTS`); `pytest suites/ ... --certify KEY --image IMAGE` does the same at the end of the
run. The predicate's schema is in docs/certificate.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from generator.certify import certificate, referrers, verdict
from generator.certify.sign import load_signer
from generator.certify.statement import sha256
from generator.errors import shown
from generator.files import read_bytes
from generator.images.sif import file_sha256
from generator.suite.report import parse

MAX_RESULTS_FILE = 64 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="pytest-benchmark JSON of a suite run (--benchmark-json)")
    parser.add_argument("--image", required=True, metavar="IMAGE|FILE",
                        help="the image measured: a registry image, or an exported file")
    parser.add_argument("--key", required=True, type=Path, help="the private key to sign with (gen-recipe keygen)")


def certify(results: Path, target: str, key: Path, progress=print) -> list[str]:
    """Sign the verdicts of `results` about `target` and publish them; returns where they went."""
    signer = load_signer(key)
    data = read_bytes(results, "results file (--benchmark-json)", max_bytes=MAX_RESULTS_FILE)
    rows = parse(data.decode("utf-8", errors="replace"), shown(results))
    verdict.check_image(verdict.measured(rows), target, shown(results))
    predicate = verdict.predicate(rows, results.name, sha256(data), certificate.now())
    if certificate.is_file_target(target):
        digest = "sha256:" + file_sha256(Path(target))
    else:
        digest = referrers.resolve(target)[0]
    st = certificate.verdict_statement(certificate.subjects_of(target, digest), predicate)
    return certificate.publish(target, {"verdict": st}, signer, progress)


def run(args: argparse.Namespace) -> int:
    done = certify(args.results, args.image, args.key)
    print(f"certified {args.image}: " + "; ".join(done))
    return 0
