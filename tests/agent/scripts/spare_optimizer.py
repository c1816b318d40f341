"""A token model trained by one optimizer while a second one, made over the same weights for a
later phase of the script, never steps in this run (22 steps). Every step is alike: the counted
FLOPs are one step's, whatever the spare optimizer does not do."""

import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_num_threads(1)
V, T, B, STEPS = 64, 16, 4, 22
model = nn.Sequential(nn.Embedding(V, 32), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, V))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
finetune = torch.optim.SGD(model.parameters(), lr=0.1)  # the later phase's: not run here
for _step in range(STEPS):
    x = torch.randint(0, V, (B, T))
    loss = nn.functional.cross_entropy(model(x).view(-1, V), x.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("TRUTH", STEPS, B * T)
