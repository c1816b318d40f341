"""A tiny language model fed by a DataLoader whose dataset may sleep in `__getitem__`.

    python loader_lm.py --steps 30 --sleep-ms 3   # each sample takes 3 ms to "load"

With `num_workers=0` the sleep happens in the training process between steps: data wait.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from trainmeter import emit

VOCAB, SEQ, BATCH = 64, 32, 8


class Tokens(Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        gen = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, VOCAB, (n, SEQ + 1), generator=gen)
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.sleep_s:
            time.sleep(self.sleep_s)  # a slow disk or a slow decoder
        row = self.data[i]
        return row[:-1], row[1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    args = parser.parse_args()
    # One thread: a thread pool parked during the data sleep wakes up slowly on a busy machine,
    # which would show as compute time; this run is about the data wait alone.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(VOCAB, 64), nn.Linear(64, 256), nn.GELU(),
                          nn.Linear(256, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = DataLoader(Tokens(args.steps * BATCH, args.sleep_ms / 1000), batch_size=BATCH,
                        num_workers=0)
    for step, (x, y) in enumerate(loader, 1):
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        emit(train_loss=loss.item())
        if step >= args.steps:
            break


if __name__ == "__main__":
    main()
