"""An encoder-decoder built from nn.Transformer (batch_first=True): source and target token
ids, a causal target mask; L counts encoder and decoder layers, tokens are the source's."""

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, ENC, DEC, T, B, STEPS = 27, 16, 2, 3, 8, 3, 4


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(V, D), nn.Embedding(V, D)
        self.transformer = nn.Transformer(D, 2, ENC, DEC, 32, dropout=0.0, batch_first=True)
        self.generator = nn.Linear(D, V)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        out = self.transformer(self.src_emb(src), self.tgt_emb(tgt), tgt_mask=mask)
        return self.generator(out)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
tokens = 0
for step in range(STEPS):
    src = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T + 1))
    logits = model(src, tgt[:, :-1])
    tokens += src.numel()
    loss = nn.functional.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    truth.loss(step, loss)
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    samples_per_step=B,
    L=ENC + DEC,
    d=D,
    T=T,
    N=truth.params(model),
    E=2 * V * D,
)
