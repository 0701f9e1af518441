"""Shared pieces of the training workloads (cnn, mnist, resnet): parallel set-up,
model wrapping, an endless seeded index stream, and a supervised training Runner."""

import os

from workloads import common, dist
from workloads.common import Runner, UsageError, device_name, resolve_device


def setup_parallel(torch, args):
    """-> (DistInfo, device) for args.mode in single|dp|ddp."""
    mode = getattr(args, "mode", "single")
    if mode == "ddp":
        return dist.init(torch, args.device)
    device = resolve_device(torch, args.device)
    return dist.DistInfo(), device


def add_compile_option(p):
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (Inductor; compiled in the warm-up steps, kernels cached "
                        "under TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR)")
    return p


def wrap_model(torch, model, mode, device, compile=False):
    """single: as is; dp: DataParallel over the visible GPUs; ddp: DistributedDataParallel; then, with
    `compile`, torch.compile of the wrapped model (for DDP after wrapping: Dynamo splits the graph at
    DDP's buckets, as PyTorch's DDP notes recommend)."""
    model = model.to(device)
    if mode == "dp" and device.type == "cuda" and torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)
    elif mode == "ddp":
        ids = [device.index] if device.type == "cuda" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return torch.compile(model) if compile else model


def gpus_used(torch, mode, device):
    if device.type != "cuda":
        return 0
    return torch.cuda.device_count() if mode == "dp" else 1


def index_stream(torch, n, seed, rank=0, world_size=1, offset=0):
    """Endless stream of sample indices: a fresh seeded permutation of range(n) per
    epoch, sharded by rank (every rank sees a disjoint part of each epoch)."""
    epoch = 0
    while True:
        g = torch.Generator().manual_seed(seed * 100003 + epoch)
        perm = torch.randperm(n, generator=g)[rank::world_size]
        for i in perm.tolist():
            yield offset + i
        epoch += 1


def take(stream, k):
    return [next(stream) for _ in range(k)]


def check_epochs_option(args, default_steps):
    """Before any heavy import: --epochs and an explicit --steps exclude each other."""
    if getattr(args, "epochs", None) is not None and args.steps != default_steps:
        raise UsageError("give --steps or --epochs, not both")


def apply_epochs(args, steps_per_epoch):
    """--epochs E sets the measured steps to E x steps_per_epoch."""
    if getattr(args, "epochs", None) is not None:
        args.steps = args.epochs * steps_per_epoch


def prepare(args, default_steps):
    """The common start of a training workload: check --data/--lr/--epochs, take over stdout, set up
    torch (seed, threads) and the parallel mode. Returns (out, torch, info, device)."""
    if getattr(args, "data", None) and not os.path.isdir(args.data):
        raise common.UsageError(f"--data {args.data}: not a directory")
    if args.lr <= 0:
        raise common.UsageError(f"--lr must be > 0 (got {args.lr})")
    check_epochs_option(args, default_steps)
    out = common.Output()
    torch = common.setup_torch(args)
    info, device = setup_parallel(torch, args)
    return out, torch, info, device


class DeviceRunner(Runner):
    """A runner on a torch device, possibly one of several DDP ranks (needs self.torch, self.device)."""

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def broadcast(self, obj):
        return dist.broadcast(self.torch, obj)

    def close(self):
        dist.finish(self.torch)


class TrainRunner(DeviceRunner):
    """One step = one optimizer step on one batch per rank (forward, loss, backward, update)."""

    def __init__(self, torch, model, optimizer, loss_fn, next_batch, device, info, batch_size):
        self.torch = torch
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.next_batch, self.device, self.info = next_batch, device, info
        self.rank, self.world_size = info.rank, info.world_size
        self.samples_per_step = batch_size * info.world_size
        self.loss_first = None
        self.loss_last = None

    def step(self):
        x, y = self.next_batch()
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(x)
        loss = self.loss_fn(out, y)
        loss.backward()
        self.optimizer.step()
        if self.loss_first is None:
            self.loss_first = loss.item()
        self.loss_last = loss.detach()
        return self.samples_per_step

    def extra(self):
        return {"loss_first": self.loss_first,
                "loss_last": None if self.loss_last is None else self.loss_last.item()}


def parallel_keys(torch, args, info, device):
    mode = getattr(args, "mode", "single")
    return {
        "mode": mode,
        "device_name": device_name(torch, device),
        "gpus": gpus_used(torch, mode, device),
        "launcher": info.launcher,
        "backend": info.backend or None,
        "collectives": dist.collectives(torch) if mode == "ddp" else None,
        "local_rank": info.local_rank,
        "global_batch_size": args.batch_size * info.world_size,
        "threads": torch.get_num_threads(),
        "compiled": bool(getattr(args, "compile", False)),
    }

