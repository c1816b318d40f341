"""Values emitted in children: a multiprocessing pool (argv[1]: fork or spawn) and, when
forking, a DataLoader with two workers. The parent emits 50 values first that the children must
never send again. torch is imported only for the DataLoader, so spawned workers start fast."""

import multiprocessing as mp
import sys

from trainmeter import emit


def work(i: int) -> int:
    emit(worker_value=float(i))
    return i


def loader_values() -> None:
    import torch

    class Numbers(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> torch.Tensor:
            emit(loader_value=float(i))
            return torch.tensor([i])

    loader = torch.utils.data.DataLoader(Numbers(), batch_size=1, num_workers=2)
    assert sorted(int(b) for b in loader) == list(range(64))


def forked_trainer() -> None:
    """5 steps here, 7 in a forked child that leaves by os._exit, 3 more here."""
    import os

    import torch

    model = torch.nn.Embedding(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 8, (1, 4))

    def step() -> None:
        model(ids).sum().backward()
        opt.step()
        opt.zero_grad()

    for _ in range(5):
        step()
    pid = os.fork()
    if pid == 0:
        for _ in range(7):
            step()
        os._exit(0)
    os.waitpid(pid, 0)
    for _ in range(3):
        step()


if __name__ == "__main__":
    method = sys.argv[1]
    for i in range(50):
        emit(parent_value=float(i))  # likely still unsent when the workers fork
    with mp.get_context(method).Pool(2) as pool:
        assert sorted(pool.map(work, range(100))) == list(range(100))
    if method == "fork":
        loader_values()  # DataLoader workers fork, and leave by os._exit
        forked_trainer()
    print("DONE", flush=True)
