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


if __name__ == "__main__":
    method = sys.argv[1]
    for i in range(50):
        emit(parent_value=float(i))  # likely still unsent when the workers fork
    with mp.get_context(method).Pool(2) as pool:
        assert sorted(pool.map(work, range(100))) == list(range(100))
    if method == "fork":
        loader_values()  # DataLoader workers fork, and leave by os._exit
    print("DONE", flush=True)
