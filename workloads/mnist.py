"""mnist: the classic Keras/PyTorch MNIST example CNN (Conv 32, Conv 64, MaxPool, Dropout,
Dense 128, Dropout, Dense 10), the CPU workload of the MODAK study. Synthetic, learnable,
MNIST-shaped data (1x28x28, 10 classes) by default; real MNIST idx files with --data DIR."""

import gzip
import math
import os
import struct

from workloads import common, train

NAME = "mnist"
TRAIN_SAMPLES = 60000
DEFAULT_STEPS = 20


def build_model(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            F = torch.nn.functional
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = self.dropout1(F.max_pool2d(x, 2))
            x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
            return F.log_softmax(self.fc2(x), dim=1)

    return Net()


class SyntheticDigits:
    """Ten fixed smooth 28x28 class templates; a sample is its class template with a random
    shift of up to 2 pixels, random contrast and pixel noise (seeded, generated on the fly)."""

    def __init__(self, torch, n, seed, device):
        g = torch.Generator().manual_seed(seed)
        low = torch.rand(10, 1, 7, 7, generator=g)
        templates = torch.nn.functional.interpolate(low, size=(28, 28), mode="bilinear",
                                                    align_corners=False)
        self.torch, self.n, self.device = torch, n, device
        self.templates = ((templates > 0.5).float() * 0.8).to(device)
        self.labels = (torch.randperm(n, generator=g) % 10).to(device)
        self.seed = seed

    def batch(self, idx):
        torch = self.torch
        idx_t = torch.tensor(idx, device=self.device)
        y = self.labels[idx_t]
        g = torch.Generator(device=self.device).manual_seed(self.seed * 7919 + idx[0])
        b = len(idx)
        shift = torch.randint(-2, 3, (2,), generator=g, device=self.device).tolist()
        x = torch.roll(self.templates[y], shifts=shift, dims=(2, 3))
        x = x * (0.7 + 0.6 * torch.rand(b, 1, 1, 1, generator=g, device=self.device))
        x = (x + 0.3 * torch.rand(b, 1, 28, 28, generator=g, device=self.device)).clamp_(0, 1)
        return (x - 0.1307) / 0.3081, y


def _read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise common.UsageError(f"{path}: not an unsigned-byte idx file")
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return shape, raw[4 + 4 * ndim:]


class IdxDigits:
    """Real MNIST from train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz]."""

    def __init__(self, torch, root, limit, device):
        def find(stem):
            for name in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
                if os.path.exists(os.path.join(root, name)):
                    return os.path.join(root, name)
            raise common.UsageError(f"--data {root}: {stem}[.gz] not found (no download is done)")
        shape, pixels = _read_idx(find("train-images-idx3-ubyte"))
        _, labels = _read_idx(find("train-labels-idx1-ubyte"))
        x = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).view(shape[0], 1, 28, 28)
        y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
        if limit:
            x, y = x[:limit], y[:limit]
        self.torch, self.n, self.device = torch, len(y), device
        self.x, self.labels = x, y

    def batch(self, idx):
        x = self.x[idx].to(self.device).float().div_(255)
        return (x - 0.1307) / 0.3081, self.labels[idx].to(self.device)


def make_parser():
    p = common.parser(NAME, steps=DEFAULT_STEPS, warmup=1, batch_size=64,
                      modes=("single", "ddp"))
    p.add_argument("--epochs", type=common.positive_int, default=None,
                   help="train for E epochs (instead of --steps)")
    p.add_argument("--limit-samples", type=common.positive_int, default=None,
                   help="use only the first N training samples")
    p.add_argument("--data", metavar="DIR", default=None,
                   help="directory with MNIST idx files (default: synthetic data)")
    p.add_argument("--lr", type=float, default=1.0,
                   help="Adadelta learning rate (default 1.0, as in the PyTorch example)")
    return train.add_compile_option(p)


def run(argv):
    args = make_parser().parse_args(argv)
    out, torch, info, device = train.prepare(args, DEFAULT_STEPS)
    if args.data:
        data = IdxDigits(torch, args.data, args.limit_samples, device)
    else:
        data = SyntheticDigits(torch, min(args.limit_samples or TRAIN_SAMPLES, TRAIN_SAMPLES),
                               args.seed, device)
    steps_per_epoch = math.ceil(math.ceil(data.n / info.world_size) / args.batch_size)
    train.apply_epochs(args, steps_per_epoch)

    torch.manual_seed(args.seed)
    model = train.wrap_model(torch, build_model(torch), args.mode, device, args.compile)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    stream = train.index_stream(torch, data.n, args.seed, info.rank, info.world_size)
    runner = train.TrainRunner(
        torch, model, optimizer, torch.nn.functional.nll_loss,
        lambda: data.batch(train.take(stream, args.batch_size)), device, info, args.batch_size)
    common.log(NAME, f"rank {info.rank}/{info.world_size} on {device}, {data.n} samples, "
                     f"batch {args.batch_size}")
    record = common.base_record(NAME, args, device=device.type, world_size=info.world_size,
                                rank=info.rank)
    record.update(train.parallel_keys(torch, args, info, device))
    record.update({"samples_in_set": data.n, "steps_per_epoch": steps_per_epoch,
                   "data": args.data or "synthetic"})
    common.drive(NAME, args, runner, record, out)


def main(argv=None):
    return common.main(NAME, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
