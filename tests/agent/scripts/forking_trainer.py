"""Values emitted in children: a multiprocessing pool (argv[1]: fork or spawn) and a DataLoader
with two workers. The parent emits 50 values the children must never send again."""

import multiprocessing as mp
import sys

import torch

from trainmeter import emit


def work(i: int) -> int:
    emit(worker_value=float(i))
    return i


class Numbers(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        emit(loader_value=float(i))
        return torch.tensor([i])


if __name__ == "__main__":
    method = sys.argv[1]
    for i in range(50):
        emit(parent_value=float(i))  # likely still unsent when the workers fork
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        assert sorted(pool.map(work, range(100))) == list(range(100))
    loader = torch.utils.data.DataLoader(
        Numbers(), batch_size=1, num_workers=2, multiprocessing_context=method
    )
    assert sorted(int(b) for b in loader) == list(range(64))
    print("DONE", flush=True)
