"""resnet: synthetic-data training throughput of torchvision's ResNet-50, ResNet-101 and
InceptionV3, the image-classification benchmarks of the containers + Horovod study at IFCA
(default batch sizes 256/256/128). Needs torchvision; exits 77 where it does not import."""

from workloads import common, train

NAME = "resnet"
MODELS = {  # name: (default batch size, default image size)
    "resnet50": (256, 224),
    "resnet101": (256, 224),
    "inception_v3": (128, 299),
}
CLASSES = 1000


def import_torchvision():
    try:
        import torchvision
        import torchvision.models
    except Exception as e:  # ImportError, or a torchvision built for another torch
        raise common.CannotRun(f"torchvision is not importable ({type(e).__name__}: {e}); "
                               "resnet needs torchvision's models") from None
    return torchvision


def build_model(torchvision, name):
    factory = getattr(torchvision.models, name)
    if name == "inception_v3":
        return factory(weights=None, aux_logits=True, init_weights=True, num_classes=CLASSES)
    return factory(weights=None, num_classes=CLASSES)


def make_loss(torch):
    F = torch.nn.functional

    def loss(out, y):
        if hasattr(out, "logits"):  # InceptionV3 in training mode: (logits, aux_logits)
            aux = getattr(out, "aux_logits", None)
            main = F.cross_entropy(out.logits, y)
            return main if aux is None else main + 0.4 * F.cross_entropy(aux, y)
        return F.cross_entropy(out, y)
    return loss


def make_parser():
    p = common.parser(NAME, steps=10, warmup=2, batch_size=0,
                      batch_help="batch size per process (default 256; 128 for inception_v3)",
                      modes=("single", "dp", "ddp"))
    p.add_argument("--model", choices=tuple(MODELS), default="resnet50",
                   help="network (default resnet50)")
    p.add_argument("--image-size", type=common.positive_int, default=None,
                   help="input side in pixels (default 224; 299 for inception_v3)")
    p.add_argument("--lr", type=float, default=0.01, help="SGD learning rate (default 0.01)")
    return train.add_compile_option(p)


def run(argv):
    args = make_parser().parse_args(argv)
    default_batch, default_size = MODELS[args.model]
    args.batch_size = args.batch_size or default_batch
    args.image_size = args.image_size or default_size
    if args.model == "inception_v3" and args.image_size < 75:
        raise common.UsageError("--image-size must be >= 75 for inception_v3")
    if args.image_size < 32:
        raise common.UsageError(f"--image-size must be >= 32 (got {args.image_size})")
    if args.lr <= 0:
        raise common.UsageError(f"--lr must be > 0 (got {args.lr})")
    torch = common.import_torch()
    torchvision = import_torchvision()
    out = common.Output()
    common.setup_torch(args)
    info, device = train.setup_parallel(torch, args)
    torch.manual_seed(args.seed)
    model = train.wrap_model(torch, build_model(torchvision, args.model), args.mode, device, args.compile)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # one fixed synthetic batch resident on the device, as in the Horovod synthetic benchmark
    g = torch.Generator().manual_seed(args.seed + info.rank)
    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=g).to(device)
    y = torch.randint(0, CLASSES, (args.batch_size,), generator=g).to(device)
    runner = train.TrainRunner(torch, model, optimizer, make_loss(torch), lambda: (x, y),
                               device, info, args.batch_size)
    common.log(NAME, f"{args.model} rank {info.rank}/{info.world_size} on {device}, "
                     f"batch {args.batch_size}, {args.image_size}px")
    record = common.base_record(NAME, args, device=device.type, world_size=info.world_size,
                                rank=info.rank)
    record.update(train.parallel_keys(torch, args, info, device))
    record.update({"model": args.model, "image_size": args.image_size,
                   "torchvision": getattr(torchvision, "__version__", None), "data": "synthetic"})
    common.drive(NAME, args, runner, record, out)


def main(argv=None):
    return common.main(NAME, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
