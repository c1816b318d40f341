"""A plain torch loop that logs its loss to one tracker: `python tracker_loop.py wandb|tensorboard|mlflow`.

Prints one JSON line: the per-step losses as float.hex and a checksum of the final weights.
Everything stays in the working directory (wandb offline, a local MLflow file store).
"""

import json
import os
import sys

import torch

which = sys.argv[1]
STEPS, BATCH, SEQ, VOCAB = 6, 4, 16, 64
torch.manual_seed(0)
emb = torch.nn.Embedding(VOCAB, 32)
head = torch.nn.Linear(32, VOCAB)
params = [*emb.parameters(), *head.parameters()]
opt = torch.optim.AdamW(params, lr=1e-2)
ids = torch.randint(0, VOCAB, (STEPS, BATCH, SEQ), generator=torch.Generator().manual_seed(1))

if which == "wandb":
    import wandb

    os.environ["WANDB_MODE"] = "offline"
    run = wandb.init(project="tm-frameworks", dir=".")
    log = lambda step, loss: run.log({"train/loss": loss}, step=step)  # noqa: E731
    close = run.finish
elif which == "tensorboard":
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter("tb")
    log = lambda step, loss: writer.add_scalar("train/loss", loss, step)  # noqa: E731
    close = writer.close
else:
    import mlflow

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    mlflow.set_tracking_uri("file://" + os.path.abspath("mlruns"))
    mlflow.start_run()
    log = lambda step, loss: mlflow.log_metric("train_loss", loss, step=step)  # noqa: E731
    close = mlflow.end_run

losses = []
for step in range(STEPS):
    batch = ids[step]
    logits = head(emb(batch[:, :-1]))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    log(step, losses[-1])
close()
checksum = float(sum(p.detach().double().sum() for p in params))
print(json.dumps({"losses": [x.hex() for x in losses], "weights": checksum.hex()}))
