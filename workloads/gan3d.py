"""gan3d: a 3D convolutional GAN on 25x25x25 calorimeter-like volumes, after the 3DGAN of
Khattak et al. trained with containers on SuperMUC-NG ("Scaling Deep Learning Training on
SuperMUC-NG with containers", PASC 2020). The generator maps a latent vector scaled by the
primary-particle energy to a 25^3 energy-deposit volume (Linear, ConvTranspose3d, Conv3d);
the discriminator (Conv3d) outputs real/fake and regresses the primary energy. Data are
synthetic, deterministic electromagnetic-shower-like volumes."""

from workloads import common, train

NAME = "gan3d"
SIZE = 25


def build_models(torch, latent=200):
    nn = torch.nn

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(latent, 64 * 7 * 7 * 7)
            self.net = nn.Sequential(
                nn.ConvTranspose3d(64, 32, 3, stride=2, padding=1), nn.BatchNorm3d(32),
                nn.LeakyReLU(0.2),                                       # 7 -> 13
                nn.ConvTranspose3d(32, 16, 3, stride=2, padding=1), nn.BatchNorm3d(16),
                nn.LeakyReLU(0.2),                                       # 13 -> 25
                nn.Conv3d(16, 8, 3, padding=1), nn.LeakyReLU(0.2),
                nn.Conv3d(8, 1, 3, padding=1), nn.ReLU())                # deposits >= 0

        def forward(self, z, energy):
            h = self.fc(z * energy[:, None]).view(-1, 64, 7, 7, 7)
            return self.net(h)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv3d(1, 32, 5, padding=2), nn.LeakyReLU(0.2), nn.Dropout(0.2),
                nn.Conv3d(32, 8, 5, stride=2, padding=2), nn.BatchNorm3d(8),
                nn.LeakyReLU(0.2), nn.Dropout(0.2),                      # 25 -> 13
                nn.Conv3d(8, 8, 5, padding=2), nn.BatchNorm3d(8), nn.LeakyReLU(0.2),
                nn.AvgPool3d(2), nn.Flatten())                           # 13 -> 6
            self.fake = nn.Linear(8 * 6 * 6 * 6, 1)       # real/fake logit
            self.energy = nn.Linear(8 * 6 * 6 * 6, 1)     # primary energy regression

        def forward(self, x):
            h = self.net(x)
            return self.fake(h).squeeze(1), self.energy(h).squeeze(1)

    return Generator(), Discriminator()


def showers(torch, n, generator, device):
    """n synthetic showers (n,1,25,25,25) and their primary energies (in 100 GeV, 0.1..5):
    a longitudinal gamma-like profile along z, a Gaussian transverse core around a jittered
    impact point, total deposit proportional to the energy, plus a little noise."""
    g = generator
    energy = 0.1 + 4.9 * torch.rand(n, generator=g, device=device)
    axis = torch.arange(SIZE, device=device, dtype=torch.float32)
    tmax = 6 + 2 * torch.log1p(energy)[:, None]                       # shower maximum depth
    t = (axis[None, :] + 0.5) / tmax
    longi = t.pow(2) * torch.exp(-2 * t)                                # (n, z)
    longi = longi / longi.sum(1, keepdim=True)
    centre = 12 + torch.randn(n, 2, generator=g, device=device)
    width = 1.5 + 0.3 * torch.rand(n, 1, generator=g, device=device)
    dx = (axis[None, :] - centre[:, 0:1]) / width
    dy = (axis[None, :] - centre[:, 1:2]) / width
    trans = torch.exp(-0.5 * (dx[:, :, None] ** 2 + dy[:, None, :] ** 2))  # (n, x, y)
    trans = trans / trans.sum((1, 2), keepdim=True)
    vol = energy[:, None, None, None] * trans[:, :, :, None] * longi[:, None, None, :]
    vol = vol * (1 + 0.1 * torch.randn(vol.shape, generator=g, device=device))
    return vol.clamp_(min=0).unsqueeze(1) * 50, energy


class GanRunner(train.DeviceRunner):
    """One step = a discriminator update on a real and a generated batch, then a generator
    update; samples = real events processed (batch x world size)."""

    def __init__(self, torch, args, info, device):
        self.torch, self.args, self.info, self.device = torch, args, info, device
        self.rank, self.world_size = info.rank, info.world_size
        torch.manual_seed(args.seed)
        gen, disc = build_models(torch, args.latent)
        self.gen = train.wrap_model(torch, gen, args.mode, device)
        self.disc = train.wrap_model(torch, disc, args.mode, device)
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=args.lr, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.disc.parameters(), lr=args.lr, betas=(0.5, 0.999))
        # per-rank data stream: each rank generates different events from its own seed
        self.data_gen = torch.Generator(device=device).manual_seed(
            args.seed * 1000003 + info.rank)
        self.first = None
        self.last = None

    def step(self):
        torch, a = self.torch, self.args
        F = torch.nn.functional
        real, energy = showers(torch, a.batch_size, self.data_gen, self.device)
        z = torch.randn(a.batch_size, a.latent, generator=self.data_gen, device=self.device)
        ones = torch.ones(a.batch_size, device=self.device)
        zeros = torch.zeros(a.batch_size, device=self.device)

        fake = self.gen(z, energy)
        self.opt_d.zero_grad(set_to_none=True)
        # one forward on real+fake (a single forward per backward keeps DDP simple)
        logit, e_pred = self.disc(torch.cat([real, fake.detach()]))
        logit_r, logit_f = logit.chunk(2)
        e_r, e_f = e_pred.chunk(2)
        d_loss = (F.binary_cross_entropy_with_logits(logit_r, ones)
                  + F.binary_cross_entropy_with_logits(logit_f, zeros)
                  + a.aux_weight * (F.mse_loss(e_r, energy) + F.mse_loss(e_f, energy)))
        d_loss.backward()
        self.opt_d.step()

        self.opt_g.zero_grad(set_to_none=True)
        logit_g, e_g = self.disc(fake)
        g_loss = (F.binary_cross_entropy_with_logits(logit_g, ones)
                  + a.aux_weight * F.mse_loss(e_g, energy))
        g_loss.backward()
        self.opt_g.step()

        losses = torch.stack([d_loss.detach(), g_loss.detach(), F.mse_loss(e_r, energy).detach()])
        if self.first is None:
            self.first = losses.tolist()
        self.last = losses
        return a.batch_size * self.world_size

    def extra(self):
        last = [None] * 3 if self.last is None else self.last.tolist()
        first = self.first or [None] * 3
        return {"loss_first": first[0], "loss_last": last[0],
                "d_loss_first": first[0], "d_loss_last": last[0],
                "g_loss_first": first[1], "g_loss_last": last[1],
                "energy_mse_first": first[2], "energy_mse_last": last[2]}


def make_parser():
    p = common.parser(NAME, steps=10, warmup=1, batch_size=64,
                      modes=("single", "ddp"))
    p.add_argument("--latent", type=common.positive_int, default=200,
                   help="latent vector size (default 200, as in 3DGAN)")
    p.add_argument("--lr", type=float, default=2e-4, help="Adam learning rate (default 2e-4)")
    p.add_argument("--aux-weight", type=float, default=0.1,
                   help="weight of the energy-regression loss (default 0.1)")
    return p


def run(argv):
    args = make_parser().parse_args(argv)
    if args.lr <= 0:
        raise common.UsageError(f"--lr must be > 0 (got {args.lr})")
    if args.aux_weight < 0:
        raise common.UsageError(f"--aux-weight must be >= 0 (got {args.aux_weight})")
    out = common.Output()
    torch = common.setup_torch(args)
    info, device = train.setup_parallel(torch, args)
    runner = GanRunner(torch, args, info, device)
    common.log(NAME, f"rank {info.rank}/{info.world_size} on {device}, mode {args.mode}, "
                     f"batch {args.batch_size}, latent {args.latent}")
    record = common.base_record(NAME, args, device=device.type, world_size=info.world_size,
                                rank=info.rank)
    record.update(train.parallel_keys(torch, args, info, device))
    record.update({"volume": [SIZE, SIZE, SIZE], "latent": args.latent, "data": "synthetic"})
    common.drive(NAME, args, runner, record, out)


def main(argv=None):
    return common.main(NAME, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
