"""The Transformer language model that Lightning ships in its wheel
(`lightning.pytorch.demos.transformer.LightningTransformer`: nn.Transformer, batch_first=True,
SGD from `configure_optimizers`), trained by Lightning's own Trainer as installed. Only the data
is ours (in memory: the demo would download WikiText-2)."""

import torch
import truth
from lightning.pytorch import Callback, Trainer
from lightning.pytorch.demos.transformer import LightningTransformer
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
V, T, B, STEPS = 64, 8, 2, 3
data = torch.randint(0, V, (B * STEPS, T + 1))
tokens = []


class InMemory(LightningTransformer):
    def prepare_data(self):
        pass

    def train_dataloader(self):
        return DataLoader(TensorDataset(data[:, :-1], data[:, 1:]), batch_size=B)

    def training_step(self, batch, batch_idx):
        tokens.append(batch[0].numel())
        return super().training_step(batch, batch_idx)


class Losses(Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        truth.loss(batch_idx, outputs["loss"])


model = InMemory(vocab_size=V)
trainer = Trainer(
    max_steps=STEPS,
    accelerator="cpu",
    devices=1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    callbacks=[Losses()],
)
trainer.fit(model)
inner = model.model
truth.report(
    model,
    steps=trainer.global_step,
    tokens=sum(tokens),
    samples_per_step=B,
    L=len(inner.transformer.encoder.layers) + len(inner.transformer.decoder.layers),
    d=inner.ninp,
    T=T,
    N=truth.params(model),
    E=V * inner.ninp,
)
