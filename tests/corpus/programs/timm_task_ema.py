"""timm's train.py shape (its newer one): the loop never calls the model. It calls a *task*, an
`nn.Module` that holds the model, the loss and an EMA copy of the model, as `task(input,
target)` and gets a dict back. Mixup turns the targets into soft labels, a `loss_scaler` object
does backward, clipping and the optimizer step when an update is due, gradients accumulate over
2 batches of a DataLoader, the scheduler steps once per update (`step_update(num_updates)`),
the EMA copy is updated after each update and validated under no_grad in eval mode.

The model trained is a small ViT laid out as timm's (`PatchEmbed`, `Block`, `Attention` with a
fused `qkv`). Its EMA copy is never called in a training forward and is no part of the model:
N, L and d are the model's alone."""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
B, ACCUM, BATCHES, IMG, PATCH, DIM, DEPTH, CLASSES = 2, 2, 6, 8, 4, 16, 2, 5


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(3, DIM, PATCH, PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(DIM), Attention()
        self.norm2, self.mlp = nn.LayerNorm(DIM), Mlp()

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = PatchEmbed()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos_embed = nn.Parameter(torch.zeros(1, (IMG // PATCH) ** 2 + 1, DIM))
        self.blocks = nn.Sequential(*[Block() for _ in range(DEPTH)])
        self.norm, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


class ModelEma(nn.Module):
    """An exponential moving average of the weights, kept in a module of its own."""

    def __init__(self, model, decay=0.9):
        super().__init__()
        self.module = copy.deepcopy(model).eval().requires_grad_(False)
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for e, m in zip(self.module.parameters(), model.parameters(), strict=True):
            e.lerp_(m, 1 - self.decay)


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


class ClassificationTask(nn.Module):
    """The loop's one callable: model, loss and EMA copy in one module."""

    def __init__(self, model, criterion):
        super().__init__()
        self.trainable_module, self.criterion = model, criterion

    def setup_ema(self, decay):
        self.trainable_module_ema = ModelEma(self.trainable_module, decay)

    def update_ema(self):
        self.trainable_module_ema.update(self.trainable_module)

    def forward(self, input, target):
        output = self.trainable_module(input)
        return {"loss": self.criterion(output, target), "output": output}


class NativeScaler:
    """Backward, then clip and step only when the update is due."""

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, need_update=True):
        loss.backward()
        if need_update:
            if clip_grad is not None:
                torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            optimizer.step()


def mixup(x, y, lam=0.7):
    soft = F.one_hot(y, CLASSES).float()
    return lam * x + (1 - lam) * x.flip(0), lam * soft + (1 - lam) * soft.flip(0)


model = VisionTransformer()
task = ClassificationTask(model, SoftTargetCrossEntropy())
task.setup_ema(0.9)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: min(1.0, (u + 1) / 2))
loss_scaler = NativeScaler()
data = TensorDataset(
    torch.randn(B * BATCHES, 3, IMG, IMG), torch.randint(0, CLASSES, (B * BATCHES,))
)
loader = DataLoader(data, batch_size=B, shuffle=True, drop_last=True)
updates = 0
for _epoch in range(1):
    task.trainable_module.train()
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(loader):
        need_update = (batch_idx + 1) % ACCUM == 0 or batch_idx == len(loader) - 1
        input, target = mixup(input, target)
        input = input.contiguous(memory_format=torch.channels_last)
        result = task(input, target)
        loss = result["loss"] / ACCUM
        loss_scaler(
            loss, optimizer, clip_grad=1.0, parameters=model.parameters(), need_update=need_update
        )
        if not need_update:
            continue
        updates += 1
        optimizer.zero_grad()
        task.update_ema()
        sched.step()  # timm: lr_scheduler.step_update(num_updates=...)
        truth.loss(updates, result["loss"])
    ema = task.trainable_module_ema.module
    with torch.no_grad():
        for input, target in loader:
            F.cross_entropy(ema(input), target)
truth.report(
    model,
    steps=updates,
    samples_per_step=B * ACCUM,
    N=truth.params(model),
    E=0,
    L=DEPTH,
    d=DIM,
    T=(IMG // PATCH) ** 2 + 1,
)
