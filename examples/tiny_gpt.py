"""A tiny GPT that trains on the CPU in seconds: the example `tm` is shown with.

    tm examples/tiny_gpt.py            # watched by trainmeter
    python examples/tiny_gpt.py        # the same run, unwatched

It is an ordinary training loop: a character-level model on a small text built into the file, a
DataLoader, AdamW, and one optional line, `emit(train_loss=...)`, that hands the loss to
trainmeter (a no-op outside `tm`). Nothing else in it knows about trainmeter.

`--report FILE` writes what the script itself knows (steps, tokens, parameter counts, losses) so
tests can compare trainmeter's numbers with the ground truth.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from trainmeter import emit

TEXT = (
    "It is a truth universally acknowledged, that a single model in possession of a good loss, "
    "must be in want of more tokens. However little known the feelings or views of such a model "
    "may be on its first entering a cluster, this truth is so well fixed in the minds of the "
    "surrounding engineers, that it is considered the rightful property of some one or other of "
    "their budgets. The gradient flows, the optimizer steps, and the loss goes down, while the "
    "meter counts every token, every second and every floating point operation on the way. "
) * 8


@dataclass
class GPTConfig:
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    block_size: int = 64


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = nn.MultiheadAttention(cfg.n_embd, cfg.n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """Token table tied to the output head (a matmul weight), a position table (a lookup)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.config = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = torch.triu(torch.full((t, t), float("-inf"), device=idx.device), diagonal=1)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))


def make_data(cfg: GPTConfig, n_samples: int, seed: int) -> TensorDataset:
    chars = sorted(set(TEXT))
    assert len(chars) <= cfg.vocab_size
    ids = torch.tensor([chars.index(c) for c in TEXT], dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(ids) - cfg.block_size - 1, (n_samples,), generator=gen)
    x = torch.stack([ids[s : s + cfg.block_size] for s in starts])
    y = torch.stack([ids[s + 1 : s + 1 + cfg.block_size] for s in starts])
    return TensorDataset(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", help="write the script's own counts and losses as JSON")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    cfg = GPTConfig()
    model = TinyGPT(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    data = make_data(cfg, args.steps * args.batch_size, args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=False)

    losses: list[float] = []
    tokens = 0
    model.train()
    for step, (x, y) in enumerate(loader, start=1):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, cfg.vocab_size), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        tokens += x.numel()
        value = loss.item()
        losses.append(value)
        emit(train_loss=value)
        if not args.quiet and (step % 50 == 0 or step == 1):
            print(f"step {step:4d}  loss {value:.4f}")

    unique = {id(p): p for p in model.parameters()}
    n_params = sum(p.numel() for p in unique.values())
    report = {
        "steps": len(losses),
        "tokens": tokens,
        "tokens_per_step": args.batch_size * cfg.block_size,
        "n_params": n_params,
        "n_embedding_params": model.pos.weight.numel(),  # the tied token table is a matmul weight
        "config": asdict(cfg),
        "seq_len": cfg.block_size,
        "losses": [v.hex() for v in losses],
        "final_loss": losses[-1] if losses else math.nan,
    }
    if args.report:
        with open(args.report, "w") as fh:
            json.dump(report, fh)
    if not args.quiet:
        print(f"done: {len(losses)} steps, final loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
