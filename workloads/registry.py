"""The workload registry: every fact about a workload that code outside its module needs, in one table.

Pure data and the standard library only: the images import it (`python -m workloads` lists it, the
fork server checks names against it), and so do the generator (tolerance keys of site files, the
launch scripts' `--mode ddp`) and the suite (which image carries a workload, how it is measured, the
sizes for a CPU of the CI kind and the studies' sizes on one GPU).

Adding a workload: its module `workloads/<name>.py` (a `main(argv)` printing one JSON line, `--serve`
for the fork server), one entry here, and its tests (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Size:
    """How the suite runs a workload: arguments, chunks per process, steps per chunk."""

    args: tuple[str, ...]
    chunks: int = 6
    steps: int = 2


@dataclass(frozen=True, kw_only=True)
class Workload:
    name: str
    description: str
    recipe: str                       # the recipe whose image carries what it needs
    kind: str                         # steady: throughput in chunks (fork server); mpi: ranks under a launcher
    ddp: bool = False                 # takes --mode ddp when started as several ranks
    metrics: tuple[str, ...] = ()     # tolerance keys ([tolerances] of a site file); default: the name
    cpu: Size | None = None           # the suite's sizes on a CPU (a 2-vCPU machine: ~0.2-0.5 s a chunk)
    gpu: Size | None = None           # the studies' sizes on one GPU

    @property
    def tolerance_keys(self) -> tuple[str, ...]:
        return self.metrics or (self.name,)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload(name="cnn", description="CNN image classifier of the CUG 2025 Frontier container study (single/dp/ddp)",
             recipe="pytorch", kind="steady", ddp=True,
             cpu=Size(("--threads", "1", "--image-size", "64", "--batch-size", "2", "--limit-images", "128",
                       "--warmup", "1"), chunks=4, steps=1),
             gpu=Size(("--device", "cuda", "--image-size", "192", "--batch-size", "64", "--warmup", "2"),
                      chunks=6, steps=5)),
    Workload(name="gan3d", description="3D convolutional GAN on 25^3 calorimeter showers (PASC 2020 3DGAN; single/ddp)",
             recipe="pytorch", kind="steady", ddp=True,
             cpu=Size(("--threads", "1", "--batch-size", "1", "--warmup", "1"), chunks=4, steps=1),
             gpu=Size(("--device", "cuda", "--batch-size", "64", "--warmup", "2"), chunks=6, steps=5)),
    Workload(name="resnet", description="ResNet-50/101 and InceptionV3 synthetic training throughput (torchvision)",
             recipe="pytorch", kind="steady", ddp=True,
             cpu=Size(("--threads", "1", "--batch-size", "2", "--warmup", "1"), chunks=4, steps=1),
             gpu=Size(("--device", "cuda", "--model", "resnet50", "--batch-size", "256", "--warmup", "2"),
                      chunks=6, steps=3)),
    Workload(name="mnist", description="MNIST example CNN classifier of the MODAK study (CPU; single/ddp)",
             recipe="pytorch", kind="steady", ddp=True, metrics=("mnist", "startup"),
             cpu=Size(("--threads", "1", "--batch-size", "32", "--limit-samples", "2048", "--warmup", "1"),
                      chunks=4, steps=3),
             gpu=Size(("--device", "cuda", "--batch-size", "64", "--warmup", "2"), chunks=6, steps=20)),
    Workload(name="llm", description="LLM serving: time to answer a fixed prompt set on 0..N GPUs (ollama or transformers)",
             recipe="llm", kind="steady",
             cpu=Size(("--engine", "transformers", "--threads", "1", "--max-new-tokens", "16", "--gpus", "0",
                       "--warmup", "1"), chunks=4, steps=8),
             gpu=Size(("--engine", "transformers", "--gpus", "1", "--max-new-tokens", "64", "--hidden-size", "1024",
                       "--layers", "8", "--heads", "16", "--warmup", "1"), chunks=6, steps=2)),
    Workload(name="mpi", description="mpi4py ping-pong/allreduce latency and bandwidth, with the transport in use",
             recipe="pytorch", kind="mpi", metrics=("mpi_latency", "mpi_bandwidth", "mpi_allreduce")),
)}

NAMES: tuple[str, ...] = tuple(WORKLOADS)
STEADY: tuple[str, ...] = tuple(n for n, w in WORKLOADS.items() if w.kind == "steady")
DDP: tuple[str, ...] = tuple(n for n, w in WORKLOADS.items() if w.ddp)
TOLERANCE_KEYS: tuple[str, ...] = tuple(dict.fromkeys(k for w in WORKLOADS.values() for k in w.tolerance_keys))
