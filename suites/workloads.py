"""What the suite runs of each workload: sizes for a CPU of this kind, and the papers' sizes on GPUs."""

from __future__ import annotations

from suites.harness import Workload

# Small enough for a 2-vCPU machine: a chunk takes ~0.2-0.5 s on one thread.
CPU = {
    "mnist": Workload("mnist", ("--threads", "1", "--batch-size", "32", "--limit-samples", "2048", "--warmup", "1"),
                      chunks=4, steps=3),
    "cnn": Workload("cnn", ("--threads", "1", "--image-size", "64", "--batch-size", "2", "--limit-images", "128",
                            "--warmup", "1"), chunks=4, steps=1),
    "gan3d": Workload("gan3d", ("--threads", "1", "--batch-size", "1", "--warmup", "1"), chunks=4, steps=1),
    "llm": Workload("llm", ("--engine", "transformers", "--threads", "1", "--max-new-tokens", "16", "--gpus", "0",
                            "--warmup", "1"), chunks=4, steps=8),
    "resnet": Workload("resnet", ("--threads", "1", "--batch-size", "2", "--warmup", "1"), chunks=4, steps=1),
}
# The studies' sizes (CUG 2025 CNN at 192x192 batch 64; the IFCA ResNet-50 batch 256) on one GPU.
GPU = {
    "mnist": Workload("mnist", ("--device", "cuda", "--batch-size", "64", "--warmup", "2"), chunks=6, steps=20),
    "cnn": Workload("cnn", ("--device", "cuda", "--image-size", "192", "--batch-size", "64", "--warmup", "2"),
                    chunks=6, steps=5),
    "gan3d": Workload("gan3d", ("--device", "cuda", "--batch-size", "64", "--warmup", "2"), chunks=6, steps=5),
    "llm": Workload("llm", ("--engine", "transformers", "--gpus", "1", "--max-new-tokens", "64", "--hidden-size",
                            "1024", "--layers", "8", "--heads", "16", "--warmup", "1"), chunks=6, steps=2),
    "resnet": Workload("resnet", ("--device", "cuda", "--model", "resnet50", "--batch-size", "256", "--warmup", "2"),
                       chunks=6, steps=3),
}
DEFAULT_PAIRS = 12
