"""gen-recipe verify IMAGE|FILE [--key PUB ...]: check an image's certificate and print it.

IMAGE is a registry image (HOST/REPO:TAG or @sha256:…): its referrers are found through the referrers
API, or the `sha256-<hex>` tag where the registry has none. FILE is an exported image with its
FILE.<kind>.dsse.json beside it. Every envelope must be signed by one of the keys and be about the
image's digest; exit 1 names the first that is not (tampered, another digest, an unknown key, a
swapped referrer, no certificate).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from generator.certify import certificate
from generator.certify.sign import DEFAULT_KEY, load_public
from generator.errors import UsageError, shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="IMAGE|FILE", help="registry image, or an exported file")
    parser.add_argument("--key", action="append", type=Path, default=None, metavar="PUB",
                        help=f"a signer's public key, repeatable (default: {DEFAULT_KEY}.pub)")
    parser.add_argument("--json", action="store_true", help="print the verified statements as JSON, not the table")


def run(args: argparse.Namespace) -> int:
    paths = args.key or [Path(DEFAULT_KEY + ".pub").expanduser()]
    if not args.key and not paths[0].exists():
        raise UsageError(f"no --key PUB given and no {DEFAULT_KEY}.pub: pass the signer's public key")
    keys = {shown(p): load_public(p) for p in paths}
    cert = certificate.verify(args.target, keys)
    if args.json:
        print(json.dumps({"target": cert.target, "digest": cert.digest, "found": cert.where,
                          "notChecked": cert.others, "signedBy": [who for _, _, who in cert.statements],
                          "statements": [st for _, st, _ in cert.statements]}, indent=2, sort_keys=True))
    else:
        print(certificate.table(cert), end="")
    return 0
