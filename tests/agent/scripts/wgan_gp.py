"""A WGAN-GP in the shape of eriklindernoren/PyTorch-GAN's `implementations/wgan_gp` (written
here, not copied): the generator is called first (so it is the root), on the same z for the
critic's update and, every second iteration, for its own; the critic runs on the real batch, the
fake one and a gradient penalty's interpolation of the two (a leaf that requires grad). One batch
of data a step (the noise), two models trained."""

import torch
import torch.autograd as autograd
import torch.nn as nn

torch.manual_seed(0)
torch.set_num_threads(1)
B, Z, X, ITERS, N_CRITIC = 8, 4, 12, 6, 2
generator = nn.Sequential(nn.Linear(Z, 16), nn.ReLU(), nn.Linear(16, X))
discriminator = nn.Sequential(nn.Linear(X, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
optimizer_G = torch.optim.Adam(generator.parameters(), lr=1e-4)
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=1e-4)


def compute_gradient_penalty(D, real_samples, fake_samples):
    alpha = torch.rand(real_samples.size(0), 1)
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = torch.ones(real_samples.shape[0], 1)
    gradients = autograd.grad(outputs=d_interpolates, inputs=interpolates, grad_outputs=fake,
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


dsteps = gsteps = 0
for i in range(ITERS):
    real_imgs = torch.randn(B, X)
    optimizer_D.zero_grad()
    z = torch.randn(B, Z)
    fake_imgs = generator(z)
    real_validity = discriminator(real_imgs)
    fake_validity = discriminator(fake_imgs)
    gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data, fake_imgs.data)
    d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + 10 * gradient_penalty
    d_loss.backward()
    optimizer_D.step()
    dsteps += 1
    optimizer_G.zero_grad()
    if i % N_CRITIC == 0:
        fake_imgs = generator(z)
        fake_validity = discriminator(fake_imgs)
        g_loss = -torch.mean(fake_validity)
        g_loss.backward()
        optimizer_G.step()
        gsteps += 1
    print("LOSS", float(d_loss.detach()))
n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
print(f"TRUTH steps={dsteps} samples={B} generator={n(generator)} discriminator={n(discriminator)}")
