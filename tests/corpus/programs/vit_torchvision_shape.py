"""A vision transformer laid out as torchvision's `vit_b_16` is (torchvision itself does not
import beside this torch): a conv patch projection, a class token, an encoder of blocks holding
nn.MultiheadAttention(batch_first=True) inside an nn.Sequential of named layers, a head.
Images in, so no token ids: T is the patches plus the class token the attention is fed."""

from collections import OrderedDict

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
IMG, PATCH, D, L, CLASSES, B, STEPS = 16, 4, 24, 2, 5, 4, 4


class EncoderBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.self_attention = nn.MultiheadAttention(D, 2, batch_first=True)
        self.ln_2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.zeros(1, seq, D).normal_(std=0.02))
        self.layers = nn.Sequential(
            OrderedDict((f"encoder_layer_{i}", EncoderBlock()) for i in range(L))
        )
        self.ln = nn.LayerNorm(D)

    def forward(self, x):
        return self.ln(self.layers(x + self.pos_embedding))


class VisionTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, D, PATCH, PATCH)
        self.class_token = nn.Parameter(torch.zeros(1, 1, D))
        self.encoder = Encoder((IMG // PATCH) ** 2 + 1)
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(D, CLASSES)))

    def forward(self, x):
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])


model = VisionTransformer()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(STEPS):
    images, labels = torch.randn(B, 3, IMG, IMG), torch.randint(0, CLASSES, (B,))
    loss = nn.functional.cross_entropy(model(images), labels)
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
