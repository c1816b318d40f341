"""nanoGPT's train.py loop as written there, with the pieces its DDP path uses: the model in
DistributedDataParallel (one gloo rank here), gradient sync turned off for all but the last
micro-batch by setting `require_backward_grad_sync` (not `no_sync()`), autocast to bfloat16 on
the CPU, a GradScaler (`scaler.scale(loss).backward()`, `unscale_`, `scaler.step(optimizer)`),
the optimizer a ZeroRedundancyOptimizer around AdamW (its `step()` steps the inner optimizer
too), the learning rate set by hand each iteration, the loss estimated under
`@torch.no_grad()` in eval mode *before* the first training step and every 2 iterations, the
next batch fetched while the current one is in flight, and `while True` left at max_iters."""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import truth
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, ACCUM, MAX_ITERS, V, D, LAYERS = 2, 8, 2, 3, 40, 16, 2

store = tempfile.NamedTemporaryFile(delete=False).name
dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, 2, c // 2).transpose(1, 2) for z in self.c_attn(x).split(c, 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(D), CausalSelfAttention(), nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f, self.lm_head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits[:, [-1], :], None
        return logits, F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def get_batch():
    data = torch.randint(0, V, (B, T + 1))
    return data[:, :-1], data[:, 1:]


raw_model = GPT()
model = DDP(raw_model)
decay = [p for p in raw_model.parameters() if p.dim() >= 2]
no_decay = [p for p in raw_model.parameters() if p.dim() < 2]
optimizer = ZeroRedundancyOptimizer(
    decay + no_decay, optimizer_class=torch.optim.AdamW, lr=1e-3, weight_decay=0.1
)
scaler = torch.amp.GradScaler("cpu")
ctx = torch.autocast("cpu", dtype=torch.bfloat16)


@torch.no_grad()
def estimate_loss():
    model.eval()
    with ctx:
        _, loss = model(*get_batch())
    model.train()
    return loss


X, Y = get_batch()
iter_num = steps = tokens = 0
while True:
    for group in optimizer.param_groups:
        group["lr"] = 1e-3 * (iter_num + 1) / (MAX_ITERS + 1)
    if iter_num % 2 == 0:
        estimate_loss()
    for micro_step in range(ACCUM):
        model.require_backward_grad_sync = micro_step == ACCUM - 1
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / ACCUM
        tokens += X.numel()
        X, Y = get_batch()
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    steps += 1
    truth.loss(iter_num, loss)
    iter_num += 1
    if iter_num > MAX_ITERS:
        break
truth.report(
    raw_model,
    steps=steps,
    tokens=tokens,
    samples_per_step=B * ACCUM,
    N=truth.params(raw_model),
    E=T * D,
    L=LAYERS,
    d=D,
    T=T,
)
dist.barrier()
dist.destroy_process_group()
os.unlink(store)
