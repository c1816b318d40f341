"""A loop fed by DataLoader workers: one epoch with fork workers, one with spawn workers (a new
interpreter each, which imports torch and so runs an agent of its own). Workers load, never
train: the steps, tokens and values are the training process's alone, and so is the memory of
the rank (before, each spawned worker sent its own memory as the rank's).
"""

import torch
import torch.nn as nn
import truth
from torch.utils.data import DataLoader, Dataset

from trainmeter import emit

V, D, B, T, N = 40, 8, 8, 6, 48


class Windows(Dataset):
    def __len__(self):
        return N

    def __getitem__(self, i):
        return torch.randint(0, V, (T + 1,), generator=torch.Generator().manual_seed(i))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.head = nn.Linear(D, V)

    def forward(self, ids):
        return self.head(self.embed(ids))


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    for method in ("fork", "spawn"):
        loader = DataLoader(Windows(), batch_size=B, num_workers=2, multiprocessing_context=method)
        for batch in loader:
            logits = model(batch[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            emit(train_loss=loss.item())
            truth.loss(steps, loss)
            steps += 1
    truth.report(model, steps=steps, tokens=steps * B * T, values=steps, N=truth.params(model),
                 E=V * D)
