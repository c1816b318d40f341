"""A tiny token-level LM trained for a few steps by Lightning, logging its loss with self.log.

Prints one JSON line: the per-step losses as float.hex and a checksum of the final weights.
"""

import json

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

STEPS, BATCH, SEQ, VOCAB = 5, 4, 16, 64


class TinyLM(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 32)
        self.head = torch.nn.Linear(32, VOCAB)
        self.losses = []

    def forward(self, x):
        return self.head(self.emb(x))

    def training_step(self, batch, batch_idx):
        x, y = batch  # inputs and next-token targets, SEQ tokens each
        logits = self(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        self.losses.append(loss.item())
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


torch.manual_seed(0)
ids = torch.randint(0, VOCAB, (STEPS * BATCH, SEQ + 1), generator=torch.Generator().manual_seed(1))
model = TinyLM()
trainer = pl.Trainer(
    max_steps=STEPS,
    log_every_n_steps=1,
    accelerator="cpu",
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=".",
)
trainer.fit(model, DataLoader(TensorDataset(ids[:, :-1], ids[:, 1:]), batch_size=BATCH))
checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
print(
    json.dumps(
        {
            "steps": trainer.global_step,
            "tokens_per_step": BATCH * SEQ,
            "losses": [x.hex() for x in model.losses],
            "weights": checksum.hex(),
        }
    )
)
