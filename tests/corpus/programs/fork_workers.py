"""A job that trains in forked workers: the parent trains 10 steps, then a `multiprocessing`
pool of fork workers trains three models of its own, 40 steps each (a hyper-parameter sweep
done in one process tree), and a plain `Process` trains one more. The pool's workers are
stopped by the pool with SIGTERM when its `with` block ends (idle, after their last task); the
`Process` ends with `os._exit`, as every `multiprocessing` child does. Every step, token and
logged value of every process is the job's: 10 + 4 x 40 steps.

Each worker writes its own LOSS lines (named by worker, each line in one write), so the lines
interleave: the test compares them as a set.
"""

import multiprocessing as mp
import os

import torch
import torch.nn as nn
import truth

from trainmeter import emit

V, D, B, T = 40, 8, 4, 6
PARENT, WORKER, WORKERS = 10, 40, 4


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.head = nn.Linear(D, V)

    def forward(self, ids):
        return self.head(self.embed(ids))


def train(name, seed, steps):
    torch.manual_seed(seed)
    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randint(0, V, (64, T + 1))
    for step in range(steps):
        batch = data[(step * B) % 60 : (step * B) % 60 + B]
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        emit(train_loss=loss.item())
        os.write(1, f"LOSS {name}-{step} {loss.item()!r}\n".encode())  # one write: no interleaving
    return model


def worker(seed):
    train(f"w{seed}", seed, WORKER)
    return seed


if __name__ == "__main__":
    torch.set_num_threads(1)
    ctx = mp.get_context("fork")
    model = train("parent", 100, PARENT)
    with ctx.Pool(WORKERS - 1) as pool:
        assert pool.map(worker, range(WORKERS - 1)) == list(range(WORKERS - 1))
    alone = ctx.Process(target=worker, args=(WORKERS - 1,))
    alone.start()
    alone.join()
    assert alone.exitcode == 0
    steps = PARENT + WORKERS * WORKER
    truth.report(model, steps=steps, tokens=steps * B * T, values=steps, N=truth.params(model),
                 E=V * D)
