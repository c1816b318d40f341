"""DCGAN shape: a discriminator and a generator, two optimizers stepping once each per
iteration (the discriminator on a real and a detached fake batch, then the generator). One
batch of data a step (the fake batches are the generator's), two models trained."""

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
Z, X, B, ITERS = 8, 12, 6, 5

netG = nn.Sequential(nn.Linear(Z, 16), nn.ReLU(), nn.Linear(16, X), nn.Tanh())
netD = nn.Sequential(nn.Linear(X, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
for it in range(ITERS):
    real = torch.randn(B, X)
    netD.zero_grad()
    err_real = bce(netD(real), torch.ones(B, 1))
    err_real.backward()
    fake = netG(torch.randn(B, Z))
    err_fake = bce(netD(fake.detach()), torch.zeros(B, 1))
    err_fake.backward()
    optD.step()
    netG.zero_grad()
    err_g = bce(netD(fake), torch.ones(B, 1))
    err_g.backward()
    optG.step()
    truth.loss(it, err_real + err_fake)
    truth.loss(it, err_g)
truth.saved(netG)
models = [["netD", truth.params(netD)], ["netG", truth.params(netG)]]
truth.report(
    netD, steps=ITERS, samples_per_step=B, models=models, N=sum(n for _, n in models)
)
