"""@NAME@: replace this with your application. It times a small torch computation and prints one JSON line
with its rate, the way the suite expects ([workload] json_key = "items_per_s")."""

from __future__ import annotations

import argparse
import json
import time

import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()
    a = torch.randn(args.size, args.size)
    start = time.perf_counter()
    for _ in range(args.steps):
        a = torch.tanh(a @ a.T / args.size)
    seconds = time.perf_counter() - start
    print(json.dumps({"items_per_s": round(args.steps / seconds, 2), "steps": args.steps}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
