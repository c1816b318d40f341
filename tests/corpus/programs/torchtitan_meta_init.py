"""TorchTitan's shape: the model is built on the meta device, then `to_empty()` and
`init_weights()` give it real storage. Its `config` has `dim` and a *list* of per-layer configs
(no layer count), layers sit in an `nn.ModuleDict` keyed "0", "1", ...; attention is grouped
query (wq, wk, wv, wo, fewer kv heads) with complex rotary frequencies in a buffer, the feed
forward is w1/w2/w3, the head is tied to the token table. The loop fetches all micro-batches of
a step before any forward, calls `model(inputs, positions=...)`, sums the loss over tokens and
divides by the step's token count, steps an optimizers container and an LR schedulers
container, and clips with `foreach=True`."""

from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, MICRO, STEPS = 2, 8, 2, 3


@dataclass
class LayerConfig:
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden_dim: int = 32


@dataclass
class DecoderConfig:
    dim: int = 16
    vocab_size: int = 48
    max_seq_len: int = 32
    layers: list = field(default_factory=lambda: [LayerConfig() for _ in range(3)])


class Attention(nn.Module):
    def __init__(self, dim, c):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.n_kv_heads, dim // c.n_heads
        self.wq = nn.Linear(dim, c.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, c.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, c.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * self.head_dim, dim, bias=False)

    def forward(self, x, freqs_cis):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
        q, k = (rope(z, freqs_cis) for z in (q, k))
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        y = F.scaled_dot_product_attention(*(z.transpose(1, 2) for z in (q, k, v)), is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


def rope(x, freqs_cis):
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * freqs_cis[None, :, None, :]).flatten(3).type_as(x)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim, c):
        super().__init__()
        self.attention, self.feed_forward = Attention(dim, c), FeedForward(dim, c.hidden_dim)
        self.attention_norm, self.ffn_norm = nn.RMSNorm(dim), nn.RMSNorm(dim)

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class Decoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleDict()
        for i, layer in enumerate(config.layers):
            self.layers[str(i)] = TransformerBlock(config.dim, layer)
        self.norm = nn.RMSNorm(config.dim)
        self.lm_head = nn.Linear(config.dim, config.vocab_size, bias=False)
        self.tok_embeddings.weight = self.lm_head.weight
        self.register_buffer("freqs_cis", self._freqs(), persistent=False)

    def _freqs(self):
        head_dim = self.config.dim // self.config.layers[0].n_heads
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(self.config.max_seq_len).float(), inv)
        return torch.polar(torch.ones_like(angles), angles)

    def init_weights(self, buffer_device=None):
        with torch.device(buffer_device):
            self.freqs_cis = self._freqs()
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
            elif isinstance(module, nn.RMSNorm):
                module.reset_parameters()
        self.tok_embeddings.weight = self.lm_head.weight

    def forward(self, tokens, positions=None):
        h = self.tok_embeddings(tokens)
        freqs = self.freqs_cis[positions[0]] if positions is not None else self.freqs_cis
        for layer in self.layers.values():
            h = layer(h, freqs[: tokens.size(1)])
        return self.lm_head(self.norm(h))


class OptimizersContainer:
    """One optimizer per model part, stepped together."""

    def __init__(self, parts):
        self.optimizers = [torch.optim.AdamW(p.parameters(), lr=1e-3) for p in parts]

    def step(self):
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self):
        for opt in self.optimizers:
            opt.zero_grad()


class LRSchedulersContainer:
    def __init__(self, optimizers, warmup):
        self.schedulers = [
            torch.optim.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / warmup))
            for o in optimizers.optimizers
        ]

    def step(self):
        for s in self.schedulers:
            s.step()


config = DecoderConfig()
with torch.device("meta"):
    model = Decoder(config)
model.to_empty(device="cpu")
with torch.no_grad():
    model.init_weights(buffer_device="cpu")
model.train()
model_parts = [model]
optimizers = OptimizersContainer(model_parts)
lr_schedulers = LRSchedulersContainer(optimizers, warmup=2)


def batches():
    while True:
        ids = torch.randint(0, config.vocab_size, (B, T + 1))
        yield {"input": ids[:, :-1], "positions": torch.arange(T).expand(B, T)}, ids[:, 1:]


data = batches()
tokens = 0
for step in range(1, STEPS + 1):
    optimizers.zero_grad()
    microbatches = [next(data) for _ in range(MICRO)]  # fetched before any forward
    global_valid_tokens = sum(labels.numel() for _, labels in microbatches)
    accumulated = 0.0
    for input_dict, labels in microbatches:
        inputs = input_dict["input"]
        extra = {k: v for k, v in input_dict.items() if k != "input"}
        pred = model_parts[0](inputs, **extra)
        tokens += inputs.numel()
        loss = F.cross_entropy(pred.flatten(0, 1), labels.flatten(), reduction="sum")
        loss = loss / global_valid_tokens
        loss.backward()
        accumulated += loss.detach()
    torch.nn.utils.clip_grad_norm_(
        [p for m in model_parts for p in m.parameters()], 1.0, foreach=True
    )
    optimizers.step()
    lr_schedulers.step()
    truth.loss(step, accumulated)
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    samples_per_step=B * MICRO,
    N=truth.params(model),
    E=0,  # the token table is the head's weight
    L=len(config.layers),
    d=config.dim,
    T=T,
)
