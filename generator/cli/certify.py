"""gen-recipe certify RESULTS --image IMAGE|FILE --key KEY: the suite's verdicts as a signed statement
about the image they measured, attached to it in its registry (a referrer) or written beside the
exported file (FILE.verdict.<12 hex>.dsse.json).

RESULTS is pytest-benchmark's JSON of a suite run (`pytest suites/ --site=X --benchmark-enable
--benchmark-json=RESULTS`); `pytest suites/ ... --certify KEY --image IMAGE` does the same at the end of the
run. The predicate's schema is in docs/certificate.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from generator.certify import certificate, referrers, verdict
from generator.certify.sign import ALLOW_READABLE, load_signer
from generator.certify.statement import sha256
from generator.errors import UsageError, shown
from generator.files import read_bytes
from generator.images.sif import file_sha256
from generator.suite.report import MAX_RESULTS_FILE, parse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="pytest-benchmark JSON of a suite run (--benchmark-json)")
    parser.add_argument("--image", required=True, metavar="IMAGE|FILE",
                        help="the image measured: a registry image, or an exported file")
    parser.add_argument("--key", required=True, type=Path, help="the private key to sign with (gen-recipe keygen)")
    parser.add_argument(ALLOW_READABLE, action="store_true",
                        help="sign with a key file that group or others can read (refused otherwise, as ssh refuses one)")


def certify(results: Path, target: str, key: Path, progress=print, allow_readable: bool = False) -> list[str]:
    """Sign the verdicts of `results` about `target` and publish them; returns where they went. The image is
    resolved once: the statement and the referrer name the same digest, whatever the tag does meanwhile."""
    signer = load_signer(key, allow_readable)
    data = read_bytes(results, "results file (--benchmark-json)", max_bytes=MAX_RESULTS_FILE)
    rows = parse(data.decode("utf-8", errors="replace"), shown(results))
    if certificate.is_file_target(target):
        digest, pinned = "sha256:" + file_sha256(Path(target)), target
    else:
        r = referrers.parse(target)
        digest = referrers.resolve(target)[0]
        pinned = f"{r.host}/{r.repo}@{digest}"
    mine, others = verdict.about(rows, target, digest, shown(results))
    if not mine:
        seen = sorted({shown(str(r.extra.get("image")))[:120] for r in others})
        if not seen:
            verdict.predicate([], shown(results.name), "", "")          # the one message for "nothing measured"
        raise UsageError(f"{shown(results)}: none of its {len(others)} comparisons measured {shown(target)} ({digest}); "
                         f"they measured {', '.join(seen[:3])}: certify the image the suite ran (pytest suites/ --image REF)")
    if others:
        progress(f"{len(mine)} of {len(mine) + len(others)} comparisons measured {shown(target)}: only those are signed "
                 "(the others measured other images)")
    predicate = verdict.predicate(mine, results.name, sha256(data), certificate.now())
    st = certificate.verdict_statement(certificate.subjects_of(target, digest), predicate)
    return certificate.publish(pinned, {"verdict": st}, signer, progress)


def run(args: argparse.Namespace) -> int:
    done = certify(args.results, args.image, args.key, allow_readable=args.allow_readable_key)
    print(f"certified {args.image}: " + "; ".join(done))
    return 0
