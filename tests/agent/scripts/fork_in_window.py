"""Epochs of two steps with a one-worker DataLoader: the worker of epoch 2 is forked while the
counted-FLOPs window (after step 2) is open; it says so if it finds a dispatch mode active."""

import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

torch.manual_seed(0)


class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if _get_current_dispatch_mode() is not None:
            print("MODE ACTIVE IN WORKER", os.getpid(), flush=True)
        return torch.randint(0, 10, (4,))


m = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _epoch in range(3):
    for ids in torch.utils.data.DataLoader(DS(), batch_size=2, num_workers=1):
        loss = F.cross_entropy(m(ids).reshape(-1, 10), ids.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        print("LOSS", loss.item().hex())
