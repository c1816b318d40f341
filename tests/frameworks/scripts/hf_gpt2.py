"""A tiny GPT-2 (from a config, nothing downloaded) trained for a few steps by HF `Trainer`.

Prints one JSON line with what the test compares against: the ground truth of the model shape
(computed here, independently of trainmeter), the loss history as float.hex, and a checksum of
the final weights as float.hex (any change to any step would change it).
"""

import json

import torch
import transformers

STEPS, BATCH, SEQ = 4, 4, 32
torch.manual_seed(0)
config = transformers.GPT2Config(
    n_layer=2,
    n_head=2,
    n_embd=64,
    vocab_size=256,
    n_positions=64,
    resid_pdrop=0.0,
    embd_pdrop=0.0,
    attn_pdrop=0.0,
)
model = transformers.GPT2LMHeadModel(config)
ids = torch.randint(0, 256, (STEPS * BATCH, SEQ), generator=torch.Generator().manual_seed(1))
data = [{"input_ids": row, "labels": row} for row in ids]
args = transformers.TrainingArguments(
    output_dir="hf_out",
    per_device_train_batch_size=BATCH,
    max_steps=STEPS,
    logging_steps=1,
    report_to="none",
    save_strategy="no",
    use_cpu=True,
    disable_tqdm=True,
    dataloader_num_workers=0,
    seed=0,
    learning_rate=1e-3,
)
trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
trainer.train()

unique = {id(p): p for p in model.parameters()}.values()  # the tied head counted once
n_params = sum(p.numel() for p in unique)
lookup_only = model.transformer.wpe.weight.numel()  # wte is the tied head: a matmul weight
history = [h for h in trainer.state.log_history if "loss" in h]
checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
print(
    json.dumps(
        {
            "n_params": n_params,
            "n_embedding_params": lookup_only,
            "n_layers": config.n_layer,
            "d_model": config.n_embd,
            "seq_len": SEQ,
            "tokens_per_step": BATCH * SEQ,
            "steps": trainer.state.global_step,
            "losses": [[h["step"], float(h["loss"]).hex()] for h in history],
            "weights": checksum.hex(),
            "total_flos": trainer.state.total_flos,  # HF's own count: floating_point_ops
        }
    )
)
