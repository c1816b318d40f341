"""A tiny GPT-like training loop used by the agent tests; every option is a switch of a real loop.

It prints what the tests compare against: `LOSS <float.hex>` per micro-batch and `TRUTH k=v`
lines with counts worked out here, independently of trainmeter.
"""

from __future__ import annotations

import argparse
import os
import types

import torch
import torch.nn.functional as F
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=4)
p.add_argument("--accum", type=int, default=1)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--vary-batch", action="store_true", help="micro-batch sizes cycle 1, 2, 3, ...")
p.add_argument("--tied", action="store_true")
p.add_argument("--frozen", action="store_true", help="freeze the position table")
p.add_argument("--mask", action="store_true", help="pad with an attention_mask")
p.add_argument("--labels", action="store_true", help="labels with -100 on padding")
p.add_argument("--workers", type=int, default=0)
p.add_argument("--eval-every", type=int, default=0)
p.add_argument("--ckpt-every", type=int, default=0)
p.add_argument("--compile", default="", help="torch.compile backend")
p.add_argument("--compile-in-place", default="", help="model.compile(backend=...)")
p.add_argument("--fullgraph", action="store_true", help="compile with fullgraph=True")
p.add_argument("--dropout", type=float, default=0.0)
p.add_argument("--experts", type=int, default=0)
p.add_argument("--two-optimizers", action="store_true")
p.add_argument("--double-step", action="store_true", help="step the optimizer again, no forward")
args = p.parse_args()

V, T, D, L = 64, 8, 16, 2
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)
        self.drop = nn.Dropout(args.dropout)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln(x)))))


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.config = types.SimpleNamespace(n_layer=L, n_embd=D, vocab_size=V)
        if args.experts:
            self.config.num_local_experts = args.experts
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        if args.tied:
            self.head.weight = self.wte.weight

    def forward(self, input_ids, attention_mask=None, labels=None):
        pos = torch.arange(input_ids.shape[1])
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if labels is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)


class Data(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, V, (n, T), generator=g)
        self.lengths = torch.randint(2, T + 1, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        mask = (torch.arange(T) < self.lengths[i]).long()
        return self.ids[i], mask


model = TinyLM()
if args.frozen:
    model.wpe.weight.requires_grad_(False)
params = [q for q in model.parameters() if q.requires_grad]
if args.two_optimizers:
    optimizers = [torch.optim.AdamW(params[:2], lr=1e-3), torch.optim.AdamW(params[2:], lr=1e-3)]
else:
    optimizers = [torch.optim.AdamW(params, lr=1e-3)]
full = {"fullgraph": True} if args.fullgraph else {}
run = torch.compile(model, backend=args.compile, **full) if args.compile else model
if args.compile_in_place:
    model.compile(backend=args.compile_in_place, **full)

sizes = [args.batch] * (args.steps * args.accum)
if args.vary_batch:
    sizes = [1 + i % 3 for i in range(args.steps * args.accum)]
data = Data(sum(sizes) + 64)
batches = []
start = 0
for size in sizes:
    batches.append(list(range(start, start + size)))
    start += size
loader = torch.utils.data.DataLoader(data, batch_sampler=batches, num_workers=args.workers)
it = iter(loader)

tokens = real = 0
for step in range(args.steps):
    for _ in range(args.accum):
        ids, mask = next(it)
        tokens += ids.numel()
        kwargs = {}
        if args.mask or args.labels:
            real += int(mask.sum())
        if args.mask:
            kwargs["attention_mask"] = mask
        if args.labels:
            kwargs["labels"] = ids.masked_fill(mask == 0, -100)
            loss = run(input_ids=ids, **kwargs)
        else:
            logits = run(ids, **kwargs) if not args.mask else run(input_ids=ids, **kwargs)
            loss = F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))
        loss = loss / args.accum
        loss.backward()
        print("LOSS", loss.item().hex(), flush=True)
    for opt in optimizers:
        opt.step()
        opt.zero_grad()
        if args.double_step:
            opt.step()  # no gradients: changes nothing, but the hook sees a step
    if args.eval_every and (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad():
            for _ in range(3):
                run(torch.randint(0, V, (2, T)))
        model.train()
    if args.ckpt_every and (step + 1) % args.ckpt_every == 0:
        torch.save(model.state_dict(), os.path.join(os.getcwd(), f"ckpt{step}.pt"))
print(f"TRUTH tokens={tokens} real={real} steps={args.steps} micro={args.steps * args.accum}")
if args.compile or args.compile_in_place:
    from torch._dynamo.utils import counters

    print(f"TRUTH_GRAPHS unique_graphs={counters['stats']['unique_graphs']}")
