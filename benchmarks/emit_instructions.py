"""`emit()` per value counted in instructions: the deterministic twin of run_all.py's timed
`emit` row ("emit() alone, sender included").

    .venv/bin/python benchmarks/emit_instructions.py [--n 20000] [--kinds float,item,...] [--keep DIR]

One process under callgrind (`PYTHONHASHSEED=0`) calls `emit` n times with the agent's sender
live (its first value made the ring and started the thread), then ships every value on the
main thread (the sender's own flush); the same loop without `emit` is subtracted. The sender
thread is held on its lock for the counted part, so its ticks (which move with the machine's
load) are not in the count and the whole shipping is: the figures are the training thread's
loop (`loop`) and the shipping (`ship`, the flush that turns n values into datagrams), per
value, for these calls:

- `float`: `emit(train_loss=0.5)`, run_all's row;
- `item`: `emit(train_loss=t.item())`, a new float each call (the bare loop calls `.item()` too);
- `three`: `emit(loss=..., lr=..., grad_norm=...)`, three known keys in one call (per value);
- `int`: `emit(epoch=3)`, an int;
- `tensor`: `emit(train_loss=t)`, a 0-d CPU tensor (read by the agent);
- `new`: a key never seen before each call (per value; 2,000 keys at most);
- `floor`: a Python function `def f(**values): pass` in emit's place: what any call costs.

With `--keep DIR` the callgrind files stay there (per function: `callgrind_annotate`).
A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_all  # noqa: E402 - the shared callgrind driver and environment

LOOP = r"""
import sys, time
side, kind, n, ship = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "ship"
from trainmeter import emit
from trainmeter.agent import sender as sender_module
if kind in ("item", "tensor"):
    import torch
    t = torch.tensor(0.25)
keys = [f"k{i}" for i in range(n + 10)]
def floor(**values):
    pass
if side == "bare":
    f = None
elif side == "floor":
    f = floor
else:
    f = emit
    emit(train_loss=0.0, loss=0.0, lr=0.0, grad_norm=0.0, epoch=0)  # the first value: ring, thread
    time.sleep(0.2)
    emit(train_loss=0.0, loss=0.0, lr=0.0, grad_norm=0.0, epoch=0)  # wakes a backed-off thread
    time.sleep(0.01)
    sender = sender_module._sender
    sender.flush()
    sender._lock.acquire()  # the thread waits here from its next tick: none is counted
def run(first, count):
    if kind == "float":
        if f is None:
            for _ in range(count): pass
        else:
            for _ in range(count): f(train_loss=0.5)
    elif kind == "item":
        item = t.item
        if f is None:
            for _ in range(count): item()
        else:
            for _ in range(count): f(train_loss=item())
    elif kind == "three":
        if f is None:
            for _ in range(count): pass
        else:
            for _ in range(count): f(loss=0.5, lr=0.001, grad_norm=1.5)
    elif kind == "int":
        if f is None:
            for _ in range(count): pass
        else:
            for _ in range(count): f(epoch=3)
    elif kind == "tensor":
        if f is None:
            for _ in range(count): pass
        else:
            for _ in range(count): f(train_loss=t)
    elif kind == "new":
        if f is None:
            for i in range(first, first + count): {keys[i]: 0.5}
        else:
            for i in range(first, first + count): f(**{keys[i]: 0.5})
run(0, 10)  # past the first calls (a backed-off thread woken, hot set again)
print("READY", flush=True)
sys.stdin.readline()
run(10, n)
if f is emit and ship:
    sender._flush_locked()
print("END", flush=True)
sys.stdin.readline()
if f is emit:
    sender._lock.release()
"""

KINDS = ("float", "item", "three", "int", "tensor", "new")
PER_CALL = {"three": 3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--kinds", default=",".join(KINDS) + ",floor")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    if not run_all.have_callgrind():
        sys.exit("valgrind (callgrind) is not installed")
    with tempfile.TemporaryDirectory(prefix="tm-bench-emit-cg-") as tmp:
        cwd = Path(tmp)
        (cwd / "loop.py").write_text(LOOP)
        sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sink.bind(str(cwd / "sink"))
        sink.settimeout(0.2)
        stop = threading.Event()

        def drain() -> None:  # the receiver keeps up, as tm does: no datagram waits
            while not stop.is_set():
                try:
                    sink.recv(1 << 20)
                except OSError:
                    continue

        threading.Thread(target=drain, daemon=True).start()
        env = run_all.clean_env(PYTHONHASHSEED="0", TRAINMETER_SOCKET=str(cwd / "sink"))
        if "PYTHONPATH" in os.environ:  # a source tree given by hand (another checkout's src)
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        print("| call | loop, per value | ship, per value | whole process, per value |")
        print("| --- | --- | --- | --- |")
        for kind in args.kinds.split(","):
            n = min(args.n, 2000) if kind == "new" else args.n
            per = PER_CALL.get(kind, 1) * n
            base = "float" if kind == "floor" else kind
            runs = {}
            for who, ship in (("bare", "loop"), ("ours" if kind != "floor" else "floor", "loop"),
                              ("ours", "ship")):
                if kind == "floor" and ship == "ship":
                    continue
                runs[who, ship] = run_all.callgrind_instructions(
                    [sys.executable, "loop.py", who, base, str(n), ship], env, cwd,
                    cwd / f"cg.{kind}.{who}.{ship}", args.keep,
                )
            if None in runs.values():
                print(f"| {kind} | failed | | |")
                continue
            bare = runs["bare", "loop"]
            if kind == "floor":
                print(f"| floor | {(runs['floor', 'loop'][1] - bare[1]) / n:,.0f} | | |", flush=True)
                continue
            loop = (runs["ours", "loop"][1] - bare[1]) / per
            ship_v = (runs["ours", "ship"][1] - runs["ours", "loop"][1]) / per
            whole = (runs["ours", "ship"][0] - bare[0]) / per
            print(f"| {kind} | {loop:,.0f} | {ship_v:,.0f} | {whole:,.0f} |", flush=True)
        stop.set()
        sink.close()


if __name__ == "__main__":
    main()
