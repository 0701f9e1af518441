"""gen-recipe keygen [PATH]: a new Ed25519 key pair for signing certificates (PATH, mode 600, and PATH.pub).

Give PATH.pub to whoever verifies (`gen-recipe verify IMAGE --key PATH.pub`); keep PATH private. An
existing key is never replaced.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from generator.certify.sign import DEFAULT_KEY, keygen
from generator.errors import UsageError, shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=None,
                        help=f"the private key's file (default: {DEFAULT_KEY}); the public key goes to PATH.pub")


def run(args: argparse.Namespace) -> int:
    if args.path is not None and args.path.endswith("/"):       # Path() would drop the slash: a folder meant
        raise UsageError(f"{shown(args.path)}: a folder, not a key file's name (e.g. {shown(args.path)}site.key)")
    path = Path(args.path) if args.path is not None else Path(DEFAULT_KEY).expanduser()
    private, public = keygen(path)
    print(f"private key: {shown(private)} (mode 600: keep it; sign with --key {shown(private)})")
    print(f"public key:  {shown(public)} (give it to verifiers: gen-recipe verify IMAGE --key {shown(public)})")
    return 0
