"""A DCGAN-style loop (pytorch/examples `dcgan`'s updates, written here, not copied) whose
discriminator is stepped N_CRITIC times for each generator step, as WGAN-style loops do: each
discriminator update sees a fresh real batch and a detached fake one, then the generator is
updated once through the discriminator. The discriminator is called first (the root), and its
optimizer steps twice before the generator's steps at all: the first iteration the agent watches
ends before the generator's optimizer is seen. Two models are trained. The one argument, if any,
is N_CRITIC (2 by default), or a comma-separated list of the discriminator steps of each
iteration in turn (a loop whose steps repeat with no period)."""

import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_num_threads(1)
B, Z, X, ITERS = 8, 6, 12, 4
ARG = sys.argv[1] if len(sys.argv) > 1 else "2"
SCHEDULE = [int(k) for k in ARG.split(",")] if "," in ARG else [int(ARG)] * ITERS
netG = nn.Sequential(nn.Linear(Z, 32), nn.ReLU(), nn.Linear(32, X), nn.Tanh())
netD = nn.Sequential(nn.Linear(X, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()
d_steps = g_steps = 0
for n_critic in SCHEDULE:
    for _k in range(n_critic):
        real = torch.randn(B, X)
        netD.zero_grad()
        errD_real = criterion(netD(real), torch.ones(B, 1))
        errD_real.backward()
        fake = netG(torch.randn(B, Z))
        errD_fake = criterion(netD(fake.detach()), torch.zeros(B, 1))
        errD_fake.backward()
        optimizerD.step()
        d_steps += 1
    netG.zero_grad()
    errG = criterion(netD(fake), torch.ones(B, 1))
    errG.backward()
    optimizerG.step()
    g_steps += 1
    print("LOSS", float((errD_real + errD_fake).detach()), float(errG.detach()))
n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
# a step of the agent's rule: each discriminator update begins one, the generator's joins it
print(f"TRUTH steps={d_steps} samples={B} netD={n(netD)} netG={n(netG)}")
