"""A GAN in the shape of Lightning's own example (`generative_adversarial_net.py`, written here,
not copied): one LightningModule holding a generator and a discriminator, manual optimization
(`automatic_optimization = False`), two optimizers, `toggle_optimizer` around each update (it
switches `requires_grad` off on every weight the other optimizer holds). The generator updates
first, as there; `--d-first`: the discriminator first, as WGAN-style modules do.

Prints one JSON line: the losses as float.hex, the steps taken and each model's parameters."""

import json
import sys

import lightning.pytorch as pl
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
B, Z, X, BATCHES = 8, 6, 12, 4
D_FIRST = "--d-first" in sys.argv
bce = nn.functional.binary_cross_entropy_with_logits


class GAN(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.generator = nn.Sequential(nn.Linear(Z, 32), nn.ReLU(), nn.Linear(32, X))
        self.discriminator = nn.Sequential(nn.Linear(X, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
        self.losses, self.steps = [], 0

    def forward(self, z):
        return self.generator(z)

    def training_step(self, batch, batch_idx):
        (real,) = batch
        opt_g, opt_d = self.optimizers()
        z = torch.randn(real.shape[0], Z)
        for update in ((self.d_update, self.g_update) if D_FIRST else (self.g_update, self.d_update)):
            update(real, z, opt_g if update == self.g_update else opt_d)
        self.steps += 1

    def g_update(self, real, z, opt):
        self.toggle_optimizer(opt)
        loss = bce(self.discriminator(self(z)), torch.ones(real.shape[0], 1))
        self.manual_backward(loss)
        opt.step()
        opt.zero_grad()
        self.untoggle_optimizer(opt)
        self.losses.append(float(loss.detach()).hex())

    def d_update(self, real, z, opt):
        self.toggle_optimizer(opt)
        loss = (bce(self.discriminator(real), torch.ones(real.shape[0], 1))
                + bce(self.discriminator(self(z).detach()), torch.zeros(real.shape[0], 1))) / 2
        self.manual_backward(loss)
        opt.step()
        opt.zero_grad()
        self.untoggle_optimizer(opt)
        self.losses.append(float(loss.detach()).hex())

    def configure_optimizers(self):
        return [torch.optim.Adam(self.generator.parameters(), lr=2e-4),
                torch.optim.Adam(self.discriminator.parameters(), lr=2e-4)]


gan = GAN()
pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
           enable_progress_bar=False, enable_model_summary=False).fit(
    gan, DataLoader(TensorDataset(torch.randn(B * BATCHES, X)), batch_size=B))
n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
print(json.dumps({"losses": gan.losses, "steps": gan.steps, "generator": n(gan.generator),
                  "discriminator": n(gan.discriminator)}))
