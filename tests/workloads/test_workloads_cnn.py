"""cnn: the CUG 2025 architecture, a deterministic learnable run, and DDP (gloo) over mpirun."""

TINY = ["--image-size", "64", "--batch-size", "8", "--steps", "2", "--warmup", "1",
        "--threads", "2", "--seed", "3"]


def test_architecture_matches_paper():
    import torch
    from workloads.cnn import build_model
    model = build_model(torch, 192)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (3, 64, (3, 3), (1, 1)), (64, 512, (3, 3), (1, 1)), (512, 512, (3, 3), (1, 1))]
    for block in (model.block1, model.block2, model.block3):
        kinds = [type(m).__name__ for m in block]
        assert kinds == ["Conv2d", "ReLU", "BatchNorm2d", "MaxPool2d"]
        assert block[3].kernel_size == 2
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(512 * 3 * 3, 2)]

    calls, shapes = [], []

    def hook(module, inputs, output):
        calls.append(module)
        shapes.append(output.shape)
    model.block3.register_forward_hook(hook)
    model.eval()
    with torch.no_grad():
        out = model(torch.zeros(2, 3, 192, 192))
    assert out.shape == (2, 2)
    assert len(calls) == 4 and all(m is model.block3 for m in calls)  # one shared module, 4 times
    assert [s[-1] for s in shapes] == [24, 12, 6, 3]
    assert [m.in_features for m in build_model(torch, 64).modules()
            if isinstance(m, torch.nn.Linear)] == [512]


def test_cnn_runs_deterministic_and_learns(wl):
    a, b = wl.run("cnn", *TINY), wl.run("cnn", *TINY)
    assert a.rc == 0 and b.rc == 0, (a, b)
    assert len(a.lines) == 1  # exactly one JSON line on stdout
    rec = a.json
    wl.check(rec, "cnn")
    assert (rec["unit"], rec["metric"], rec["higher_is_better"]) == ("samples/s", "throughput", True)
    assert rec["steps"] == 2 and rec["batch_size"] == 8 and rec["image_size"] == 64
    assert rec["world_size"] == 1 and rec["device"] == "cpu" and rec["mode"] == "single"
    assert rec["images"] == 2418 and rec["train_images"] == 1934 and rec["test_images"] == 484
    assert rec["time_per_step_s"] > 0 and rec["samples"] == 16
    assert abs(rec["value"] - 16 / rec["measured_s"]) < 1e-6 * rec["value"]
    # same arguments, same losses
    assert (rec["loss_first"], rec["loss_last"]) == (b.json["loss_first"], b.json["loss_last"])
    # the synthetic apples/oranges are learnable
    assert rec["loss_last"] < 0.5 * rec["loss_first"], rec


def test_cnn_ddp_gloo_two_ranks(wl, need_mpirun):
    res = wl.run("cnn", "--mode", "ddp", "--image-size", "64", "--batch-size", "2", "--steps", "1",
                 "--warmup", "1", "--threads", "1", mpi_ranks=2)
    assert res.rc == 0, res
    assert len(res.lines) == 1  # rank 0 only
    rec = res.json
    wl.check(rec, "cnn")
    assert rec["world_size"] == 2 and rec["backend"] == "gloo" and rec["launcher"] == "openmpi"
    assert rec["global_batch_size"] == 4 and rec["samples"] == 4
    assert rec["steps_per_epoch"] == 1934 // 2 // 2 + 1  # 967 images per rank, batch 2
