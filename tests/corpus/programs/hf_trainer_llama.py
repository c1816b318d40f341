"""Hugging Face's `Trainer` itself (not a hand-written loop) training a tiny Llama from a config:
a list of dict examples of varied length, a collator padding to a fixed length with an
attention mask and -100 labels, `model(**inputs)` inside the Trainer, gradient accumulation
over 2 micro-batches, a cosine schedule with warmup stepped per update, gradient clipping, an
evaluation every 2 updates (eval mode, no_grad) and at no point a save.

The program counts what it fed the model in training forwards with a forward pre-hook of its
own (training mode, gradients on): the Trainer decides the order of the batches."""

import tempfile

import torch
import truth
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, ACCUM, STEPS, V = 2, 12, 2, 3, 64

cfg = LlamaConfig(
    vocab_size=V,
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32,
)
model = LlamaForCausalLM(cfg)
lengths = torch.randint(4, T + 1, (B * ACCUM * STEPS,)).tolist()
train_set = [{"input_ids": torch.randint(3, V, (n,)).tolist()} for n in lengths]
eval_set = [{"input_ids": torch.randint(3, V, (T,)).tolist()} for _ in range(2)]


def collate(examples):
    ids = torch.zeros(len(examples), T, dtype=torch.long)
    mask = torch.zeros(len(examples), T, dtype=torch.long)
    for i, ex in enumerate(examples):
        n = len(ex["input_ids"])
        ids[i, :n], mask[i, :n] = torch.tensor(ex["input_ids"]), 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


fed = {"tokens": 0, "real": 0, "micro": 0}


def count(module, args, kwargs):
    if module.training and torch.is_grad_enabled():
        fed["tokens"] += kwargs["input_ids"].numel()
        fed["real"] += int(kwargs["attention_mask"].sum())
        fed["micro"] += 1


class PrintLoss(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            truth.loss(state.global_step, logs["loss"])


model.register_forward_pre_hook(count, with_kwargs=True)
out = tempfile.mkdtemp()
args = TrainingArguments(
    output_dir=out,
    per_device_train_batch_size=B,
    per_device_eval_batch_size=B,
    gradient_accumulation_steps=ACCUM,
    max_steps=STEPS,
    learning_rate=1e-3,
    lr_scheduler_type="cosine",
    warmup_steps=1,
    max_grad_norm=1.0,
    eval_strategy="steps",
    eval_steps=2,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    dataloader_num_workers=0,
    disable_tqdm=True,
    seed=0,
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=train_set,
    eval_dataset=eval_set,
    data_collator=collate,
    callbacks=[PrintLoss()],
)
trainer.train()
truth.loss("weights", sum(p.detach().double().sum() for p in model.parameters()))
truth.report(
    model,
    steps=trainer.state.global_step,
    tokens=fed["tokens"],
    real_tokens=fed["real"],
    samples_per_step=B * ACCUM,
    micro=fed["micro"],
    N=truth.params(model),
    E=V * 16,
    L=cfg.num_hidden_layers,
    d=cfg.hidden_size,
    T=T,
)
