"""A tiny training loop that dies the way argv[1] says, after argv[2] steps (default 3).

oom       raises the error PyTorch raises when CUDA is out of memory, with its exact text
raise     raises a plain ValueError
thread    an uncaught error in a worker thread, then exit 0 from the main thread
segfault  reads address 0 through ctypes (a native crash)
sigkill   sends itself SIGKILL
wait      prints READY and sleeps (the test signals it from outside)
hang      stops stepping and sleeps (a hang the test ends with a timeout)
memhog    allocates until the memory cgroup's limit kills it
ok        ends well

Prints `LOSS <hex>` per step so a test can compare the losses with and without tm.
"""

import ctypes
import os
import signal
import sys
import threading
import time

import torch

how = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
pause = float(os.environ.get("DIES_STEP_PAUSE", "0"))
torch.manual_seed(0)
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
for _ in range(steps):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print("LOSS", loss.item().hex(), flush=True)
    time.sleep(pause)

OOM = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.14 GiB of "
    "which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in "
    "use. Of the allocated memory 75.20 GiB is allocated by PyTorch, and 1.50 GiB is reserved by "
    "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
    "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def worker() -> None:
    raise KeyError("lost in a thread")


if how == "oom":
    raise torch.OutOfMemoryError(OOM)
if how == "raise":
    raise ValueError("bad batch 7")
if how == "thread":
    t = threading.Thread(target=worker, name="loader-0")
    t.start()
    t.join()
    sys.exit(0)
if how == "segfault":
    ctypes.string_at(0)
if how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
if how in ("wait", "hang"):
    print("READY", flush=True)
    time.sleep(3600 if how == "hang" else 600)  # a hang waits out a whole suite (hung.py)
if how == "memhog":
    hog = []
    while True:
        hog.append(bytearray(64 << 20))
print("DONE", flush=True)
