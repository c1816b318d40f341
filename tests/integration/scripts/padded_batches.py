"""Variable-length sequences padded to the batch's longest, with an attention mask."""

import time

import torch
from torch import nn

PAD = 0


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.out = nn.Linear(16, 40)

    def forward(self, input_ids, attention_mask=None):
        h = self.emb(input_ids)
        if attention_mask is not None:
            h = h * attention_mask.unsqueeze(-1)
        return self.out(h)


torch.manual_seed(0)
model = Model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
real = padded = 0
for step in range(5):
    lengths = [3 + (step + i) % 5 for i in range(4)]  # 4 sequences of 3..7 tokens
    width = max(lengths)
    ids = torch.full((4, width), PAD)
    mask = torch.zeros(4, width, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(1, 40, (n,))
        mask[i, :n] = 1
    logits = model(input_ids=ids, attention_mask=mask)
    loss = nn.functional.cross_entropy(logits.view(-1, 40), ids.view(-1), reduction="none")
    loss = (loss * mask.view(-1)).sum() / mask.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    real += sum(lengths)
    padded += ids.numel()
    time.sleep(0.06)
print(f"REAL {real} PADDED {padded}")
