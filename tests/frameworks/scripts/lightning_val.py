"""A LightningModule that builds its model inside (a config with layers and width), trains a few
steps and validates twice, logging `val_loss` per batch with `self.log` (Lightning averages it).

Prints one JSON line: the losses, and the validation means Lightning's own logger received.
"""

import json
from types import SimpleNamespace

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import Logger
from torch.utils.data import DataLoader, TensorDataset

STEPS, BATCH, SEQ, VOCAB = 4, 4, 8, 64


class Seen(Logger):
    """A logger that keeps what Lightning hands it."""

    name, version = "seen", 0
    logged: list = []

    def log_metrics(self, metrics, step=None):
        self.logged.append(dict(metrics))

    def log_hyperparams(self, params):
        pass


class Net(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.emb = torch.nn.Embedding(VOCAB, config.n_embd)
        self.blocks = torch.nn.Sequential(
            *[torch.nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer)]
        )
        self.head = torch.nn.Linear(config.n_embd, VOCAB)

    def forward(self, x):
        return self.head(self.blocks(self.emb(x)))


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = Net(SimpleNamespace(n_layer=3, n_embd=16))
        self.losses = []

    def forward(self, x):
        return self.net(x)

    def _loss(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x).reshape(-1, VOCAB), y.reshape(-1))

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.losses.append(loss.item())
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
ids = torch.randint(0, VOCAB, (STEPS * BATCH, SEQ + 1), generator=torch.Generator().manual_seed(1))
val = torch.randint(0, VOCAB, (3 * BATCH, SEQ + 1), generator=torch.Generator().manual_seed(2))
model = Module()
seen = Seen()
trainer = pl.Trainer(
    max_steps=STEPS,
    val_check_interval=2,
    num_sanity_val_steps=0,
    log_every_n_steps=1,
    accelerator="cpu",
    logger=seen,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=".",
)
trainer.fit(
    model,
    DataLoader(TensorDataset(ids[:, :-1], ids[:, 1:]), batch_size=BATCH),
    DataLoader(TensorDataset(val[:, :-1], val[:, 1:]), batch_size=BATCH),
)
val_means = [float(m["val_loss"]) for m in Seen.logged if "val_loss" in m]
print(json.dumps({"losses": [x.hex() for x in model.losses], "val_means": val_means}))
