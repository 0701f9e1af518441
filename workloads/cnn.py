"""cnn: the image-classification CNN of "Evaluating the Performance of Containerized
Workloads on Frontier" (CUG 2025), trained on a synthetic two-class image set the size of
apple2orange (2418 images, 80:20 train/test), or on an image folder (--data DIR)."""

import math
import os

from workloads import common, train

NAME = "cnn"
APPLE2ORANGE_IMAGES = 2418
TRAIN_FRACTION = 0.8
DEFAULT_STEPS = 10


def build_model(torch, image_size=192, classes=2):
    """Blocks of (Conv2d 3x3 pad 1, ReLU, BatchNorm2d, MaxPool2d(2)): 3->64, 64->512, then one
    512->512 block applied four times (shared weights), Flatten, Linear(512*(size/64)^2 -> 2)."""
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, kernel_size=3, padding=1), nn.ReLU(),
                             nn.BatchNorm2d(cout), nn.MaxPool2d(2))

    class CNN(nn.Module):
        repeats = 4

        def __init__(self):
            super().__init__()
            self.block1 = block(3, 64)
            self.block2 = block(64, 512)
            self.block3 = block(512, 512)
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(512 * (image_size // 64) ** 2, classes)

        def forward(self, x):
            x = self.block2(self.block1(x))
            for _ in range(self.repeats):
                x = self.block3(x)
            return self.fc(self.flatten(x))

    return CNN()


class SyntheticImages:
    """Deterministic two-class RGB images: class 0 'apples' (red, smooth) and class 1
    'oranges' (orange, with a fine dimpled texture); per-image colour jitter and a smooth
    random shading. Stored as low-resolution tensors and expanded on the device."""

    MEANS = ((0.62, 0.22, 0.20), (0.90, 0.55, 0.12))

    def __init__(self, torch, n, image_size, seed, device):
        g = torch.Generator().manual_seed(seed)
        self.torch, self.size, self.n = torch, image_size, n
        labels = torch.randperm(n, generator=g) % 2
        colour = torch.tensor(self.MEANS)[labels] + 0.08 * torch.randn(n, 3, generator=g)
        shade = 0.1 * torch.randn(n, 3, image_size // 16, image_size // 16, generator=g)
        dimples = 0.15 * torch.randn(n, 1, image_size // 4, image_size // 4, generator=g)
        dimples *= labels.float()[:, None, None, None]
        self.labels, self.colour = labels.to(device), colour.to(device)
        self.shade, self.dimples = shade.to(device), dimples.to(device)

    def batch(self, idx):
        F = self.torch.nn.functional
        idx = self.torch.tensor(idx, device=self.labels.device)
        size = (self.size, self.size)
        x = (F.interpolate(self.shade[idx], size=size, mode="bilinear", align_corners=False)
             + F.interpolate(self.dimples[idx], size=size, mode="nearest")
             + self.colour[idx][:, :, None, None]).clamp_(0, 1)
        return (x - 0.5) / 0.25, self.labels[idx]


class FolderImages:
    """A real image folder, one subfolder per class, resized to image_size (needs PIL)."""

    EXT = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")

    def __init__(self, torch, root, image_size, limit, seed, device):
        try:
            from PIL import Image
        except ImportError:
            raise common.CannotRun("--data needs PIL (Pillow) to read images; it is not importable") from None
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        if len(classes) < 2:
            raise common.UsageError(f"--data {root}: need at least two class subfolders")
        files = [(os.path.join(root, c, f), k) for k, c in enumerate(classes)
                 for f in sorted(os.listdir(os.path.join(root, c))) if f.lower().endswith(self.EXT)]
        g = torch.Generator().manual_seed(seed)
        files = [files[i] for i in torch.randperm(len(files), generator=g).tolist()]
        if limit:
            files = files[:limit]
        if len(files) < 2:
            raise common.UsageError(f"--data {root}: fewer than two images found")
        data = torch.empty(len(files), 3, image_size, image_size, dtype=torch.uint8)
        for i, (path, _) in enumerate(files):
            img = Image.open(path).convert("RGB").resize((image_size, image_size))
            data[i] = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(
                image_size, image_size, 3).permute(2, 0, 1)
        self.torch, self.n, self.classes, self.data = torch, len(files), classes, data
        self.labels = torch.tensor([k for _, k in files])
        self.device = device

    def batch(self, idx):
        x = self.data[idx].to(self.device, non_blocking=True).float().div_(255)
        return (x - 0.5) / 0.25, self.labels[idx].to(self.device)


def make_parser():
    p = common.parser(NAME, steps=DEFAULT_STEPS, warmup=1, batch_size=32,
                      modes=("single", "dp", "ddp"))
    p.add_argument("--epochs", type=common.positive_int, default=None,
                   help="train for E epochs over the training split (instead of --steps)")
    p.add_argument("--image-size", type=common.positive_int, default=192,
                   help="image side in pixels, a multiple of 64 (default 192, as in the paper)")
    p.add_argument("--limit-images", type=common.positive_int, default=None,
                   help="use only the first N images of the data set")
    p.add_argument("--data", metavar="DIR", default=None,
                   help="image folder with one subfolder per class (default: synthetic)")
    p.add_argument("--lr", type=float, default=3e-4, help="Adam learning rate (default 3e-4)")
    p.add_argument("--eval", action="store_true",
                   help="report accuracy on the 20%% test split at the end")
    return train.add_compile_option(p)


def run(argv):
    args = make_parser().parse_args(argv)
    if args.image_size % 64:
        raise common.UsageError(f"--image-size must be a multiple of 64 (got {args.image_size})")
    out, torch, info, device = train.prepare(args, DEFAULT_STEPS)

    if args.data:
        data = FolderImages(torch, args.data, args.image_size, args.limit_images, args.seed, device)
    else:
        n = min(args.limit_images or APPLE2ORANGE_IMAGES, APPLE2ORANGE_IMAGES)
        if n < 2:
            raise common.UsageError("--limit-images must be >= 2")
        data = SyntheticImages(torch, n, args.image_size, args.seed, device)
    n_train = max(1, int(data.n * TRAIN_FRACTION))
    n_test = data.n - n_train
    steps_per_epoch = math.ceil(math.ceil(n_train / info.world_size) / args.batch_size)
    train.apply_epochs(args, steps_per_epoch)

    torch.manual_seed(args.seed)
    model = train.wrap_model(torch, build_model(torch, args.image_size), args.mode, device, args.compile)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    stream = train.index_stream(torch, n_train, args.seed, info.rank, info.world_size)
    runner = train.TrainRunner(
        torch, model, optimizer, torch.nn.functional.cross_entropy,
        lambda: data.batch(train.take(stream, args.batch_size)), device, info, args.batch_size)
    common.log(NAME, f"rank {info.rank}/{info.world_size} on {device}, mode {args.mode}, "
                     f"{data.n} images ({n_train} train), {args.image_size}px, batch {args.batch_size}")

    record = common.base_record(NAME, args, device=device.type, world_size=info.world_size,
                                rank=info.rank)
    record.update(train.parallel_keys(torch, args, info, device))
    record.update({"image_size": args.image_size, "images": data.n, "train_images": n_train,
                   "test_images": n_test, "steps_per_epoch": steps_per_epoch,
                   "data": args.data or "synthetic"})
    if args.eval:
        extra = runner.extra

        def extra_with_accuracy():
            keys = extra()
            keys["test_accuracy"] = evaluate(torch, model, data, n_train, args.batch_size)
            return keys
        runner.extra = extra_with_accuracy
    common.drive(NAME, args, runner, record, out)


def evaluate(torch, model, data, start, batch_size):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(start, data.n, batch_size):
            x, y = data.batch(list(range(i, min(i + batch_size, data.n))))
            correct += (model(x).argmax(1) == y).sum().item()
    model.train()
    return correct / max(1, data.n - start)


def main(argv=None):
    return common.main(NAME, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
