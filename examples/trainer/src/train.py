"""Train a small MLP classifier on a synthetic two-spirals dataset and report its training throughput.

    python3 train.py [--steps 60] [--batch-size 256] [--hidden 128] [--threads 1] [--seed 0]

The last line on standard output is one JSON record, for example
    {"samples_per_s": 51234.5, "loss": 0.41, "accuracy": 0.83, "steps": 60, "batch_size": 256}
which is what gen-recipe's suite reads (app.toml: [workload] json_key = "samples_per_s").
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
from torch import nn
from tqdm import tqdm


def spirals(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaved spirals with a little noise: n points, labels 0 and 1."""
    label = torch.randint(0, 2, (n,), generator=generator)
    t = torch.rand(n, generator=generator) * 3 * math.pi
    r = t / (3 * math.pi)
    angle = t + label * math.pi
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], dim=1)
    return x + 0.02 * torch.randn(n, 2, generator=generator), label


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(2, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> float:
        x, y = spirals(args.batch_size, g)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    loss = 0.0
    for _ in tqdm(range(args.steps), desc="training", disable=None):   # a bar on a terminal only
        loss = step()
    seconds = time.perf_counter() - start
    with torch.no_grad():
        x, y = spirals(4096, g)
        accuracy = float((model(x).argmax(dim=1) == y).float().mean())
    print(json.dumps({"samples_per_s": round(args.steps * args.batch_size / seconds, 1), "loss": round(loss, 4),
                      "accuracy": round(accuracy, 4), "steps": args.steps, "batch_size": args.batch_size}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
