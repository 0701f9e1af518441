"""gan3d, mnist and resnet runs, and the --serve protocol."""

import json
import subprocess


def test_gan3d_runs_and_discriminator_learns(wl):
    res = wl.run("gan3d", "--batch-size", "2", "--steps", "4", "--warmup", "1", "--threads", "2")
    assert res.rc == 0, res
    rec = res.json
    wl.check(rec, "gan3d")
    assert rec["unit"] == "samples/s" and rec["samples"] == 8 and rec["volume"] == [25, 25, 25]
    for key in ("d_loss_first", "d_loss_last", "g_loss_first", "g_loss_last",
                "energy_mse_first", "energy_mse_last", "loss_first", "loss_last"):
        assert isinstance(rec[key], float) and rec[key] == rec[key], key  # finite, not NaN
    # the discriminator's primary-energy regression learns on the synthetic showers
    assert rec["energy_mse_last"] < 0.5 * rec["energy_mse_first"], rec
    assert rec["d_loss_last"] < rec["d_loss_first"], rec


def test_gan3d_shower_data_is_shower_like():
    import torch
    from workloads.gan3d import SIZE, build_models, showers
    g = torch.Generator().manual_seed(0)
    vol, energy = showers(torch, 6, g, torch.device("cpu"))
    assert vol.shape == (6, 1, SIZE, SIZE, SIZE) and (vol >= 0).all()
    deposit = vol.sum((1, 2, 3, 4))
    assert torch.corrcoef(torch.stack([deposit, energy]))[0, 1] > 0.95  # deposit ~ energy
    again, _ = showers(torch, 6, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert torch.equal(vol, again)
    gen, disc = build_models(torch, latent=16)
    fake = gen(torch.randn(3, 16), torch.ones(3))
    assert fake.shape == (3, 1, SIZE, SIZE, SIZE)
    logit, e = disc(fake)
    assert logit.shape == (3,) and e.shape == (3,)
    kinds = {type(m).__name__ for m in gen.modules()} | {type(m).__name__ for m in disc.modules()}
    assert {"Conv3d", "ConvTranspose3d"} <= kinds


def test_mnist_learns(wl, tmp_path):
    out = tmp_path / "m.json"
    res = wl.run("mnist", "--batch-size", "32", "--steps", "15", "--warmup", "1", "--threads", "2",
                 "--json-out", out)
    assert res.rc == 0, res
    assert len(res.lines) == 1
    rec = res.json
    assert json.loads(out.read_text()) == rec  # --json-out writes the same line
    wl.check(rec, "mnist")
    assert rec["threads"] == 2
    assert rec["batch_size"] == 32 and rec["samples"] == 15 * 32 and rec["data"] == "synthetic"
    assert rec["loss_last"] < 0.8 * rec["loss_first"], rec


def test_mnist_reads_idx_files(wl, tmp_path):
    import gzip
    import random
    import struct
    rng = random.Random(0)
    n = 40
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">HBBIII", 0, 8, 3, n, 28, 28) + bytes(rng.randrange(256)
                                                                 for _ in range(n * 784)))
    with open(tmp_path / "train-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">HBBI", 0, 8, 1, n) + bytes(rng.randrange(10) for _ in range(n)))
    res = wl.run("mnist", "--data", tmp_path, "--batch-size", "8", "--steps", "2", "--threads", "1")
    assert res.rc == 0, res
    assert res.json["samples_in_set"] == n and res.json["data"] == str(tmp_path)
    assert res.json["steps_per_epoch"] == 5
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = wl.run("mnist", "--data", empty, "--steps", "1")
    assert bad.rc == 2 and "train-images-idx3-ubyte" in bad.stderr, bad


def test_mnist_model_is_the_example_cnn():
    import torch
    from workloads.mnist import build_model
    net = build_model(torch)
    layers = [(type(m).__name__, getattr(m, "out_channels", getattr(m, "out_features", None)))
              for m in net.children()]
    assert layers == [("Conv2d", 32), ("Conv2d", 64), ("Dropout", None), ("Dropout", None),
                      ("Linear", 128), ("Linear", 10)]
    assert net(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_resnet_without_torchvision_exits_77(wl):
    res = wl.run("resnet", "--steps", "1")
    assert res.rc == 77, res
    assert res.stdout == ""
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("resnet: cannot run here:") and "torchvision" in line


def test_resnet_code_path_with_stub_torchvision(wl):
    """With a stand-in torchvision (tiny models, same call signatures) the workload runs;
    inception_v3 also exercises the auxiliary-logits loss."""
    model = "inception_v3"
    env = wl.env(extra_path=[wl.stubs])
    res = wl.run("resnet", "--model", model, "--batch-size", "2", "--image-size", "75",
                 "--steps", "2", "--warmup", "1", env=env)
    assert res.rc == 0, res
    rec = res.json
    wl.check(rec, "resnet")
    assert rec["model"] == model and rec["torchvision"] == "0.0+stub" and rec["samples"] == 4
    assert rec["loss_first"] > 0


def test_serve_protocol(wl):
    proc = subprocess.Popen(wl.command("mnist", "--serve", "--batch-size", "8", "--threads", "1"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=wl.env(), cwd=wl.repo)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and ready["pid"] == proc.pid and ready["startup_s"] > 0
        chunks = []
        for command in ("run 2", "jump 3", "run 2"):
            proc.stdin.write(command + "\n")
            proc.stdin.flush()
            chunks.append(json.loads(proc.stdout.readline()))
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert chunks[1]["event"] == "error" and "jump" in chunks[1]["message"]
    for c in (chunks[0], chunks[2]):
        assert c["event"] == "chunk" and c["steps"] == 2 and c["samples"] == 16 and c["seconds"] > 0
    final = json.loads(out.strip().splitlines()[-1])
    assert len(out.strip().splitlines()) == 1
    wl.check(final, "mnist")
    assert final["event"] == "done" and final["steps"] == 4 and final["samples"] == 32
    assert abs(final["measured_s"] - chunks[0]["seconds"] - chunks[2]["seconds"]) < 1e-9
