"""Gradient accumulation (4 micro-batches), a DataLoader with workers, eval and checkpoints."""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STEPS, ACCUM, BATCH, SEQ = 6, 4, 2, 8


class SlowTokens(Dataset):
    """Each item takes a little while to make, so the loop really waits for data."""

    def __len__(self):
        return STEPS * ACCUM * BATCH

    def __getitem__(self, i):
        time.sleep(0.01)
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, 50, (SEQ,), generator=g)


def main(out_dir):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 32), nn.Linear(32, 50))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(SlowTokens(), batch_size=BATCH, num_workers=2)
    model.train()
    for i, x in enumerate(loader, start=1):
        loss = nn.functional.cross_entropy(model(x).view(-1, 50), x.view(-1)) / ACCUM
        loss.backward()
        if i % ACCUM == 0:
            opt.step()
            opt.zero_grad()
            step = i // ACCUM
            if step % 3 == 0:
                model.eval()
                with torch.no_grad():
                    for _ in range(3):
                        model(torch.randint(0, 50, (BATCH, SEQ)))
                        time.sleep(0.05)
                model.train()
                torch.save(model.state_dict(), f"{out_dir}/ckpt-{step}.pt")
    print("done")


if __name__ == "__main__":
    main(sys.argv[1])
