"""A vision transformer laid out as timm's `VisionTransformer` is (timm is not installed here):
`Attention` with a fused qkv Linear, `Block`s in an nn.Sequential, a patch embedding module, a
class token, mixed precision off, AdamW with weight decay groups as timm builds them."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
IMG, PATCH, D, L, HEADS, CLASSES, B, STEPS = 12, 3, 32, 3, 4, 7, 3, 4


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(3, D, PATCH, PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = Attention()
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        n = (IMG // PATCH) ** 2
        self.patch_embed = PatchEmbed()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, D) * 0.02)
        self.blocks = nn.Sequential(*[Block() for _ in range(L)])
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


model = VisionTransformer()
decay = [p for n, p in model.named_parameters() if p.ndim > 1]
no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
opt = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3
)
for step in range(STEPS):
    images, labels = torch.randn(B, 3, IMG, IMG), torch.randint(0, CLASSES, (B,))
    loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    truth.loss(step, loss)
truth.report(
    model,
    steps=STEPS,
    samples_per_step=B,
    L=L,
    d=D,
    T=(IMG // PATCH) ** 2 + 1,
    N=truth.params(model),
    E=0,
)
