"""An LM trained with R-Drop (two forwards of the same batch, a KL between them) and gradient
accumulation over a preallocated token buffer refilled in place for each micro-batch: the same
tensor object each time, new data each micro-batch, the same data twice within one."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, B, T, ACCUM, STEPS = 32, 16, 2, 6, 3, 4


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.drop, self.head = nn.Embedding(V, D), nn.Dropout(0.1), nn.Linear(D, V)

    def forward(self, ids):
        return self.head(self.drop(self.emb(ids)))


model = LM()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
buf = torch.zeros(B, T, dtype=torch.long)
tokens = 0
for _step in range(STEPS):
    for _micro in range(ACCUM):
        buf.copy_(torch.randint(0, V, (B, T)))
        a, b = model(buf), model(buf)
        tokens += buf.numel()
        kl = F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean")
        loss = F.cross_entropy(a.view(-1, V), buf.view(-1)) + kl
        (loss / ACCUM).backward()
    opt.step()
    opt.zero_grad()
    print("LOSS", float(loss.detach()))
print(f"TRUTH steps={STEPS} tokens={tokens} samples={B * ACCUM}")
