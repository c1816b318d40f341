"""Word-language-model shape: an LSTM fed sequence-first (T, B) batches, no optimizer object,
the weights updated by hand (`p.data.add_(p.grad, alpha=-lr)`), truncated BPTT, an evaluation
pass under no_grad every few steps.

Counted FLOPs, per token (2 a multiply-add, backward twice the forward: the embedding's output
needs no gradient for FLOPs' sake but the LSTM computes its input's anyway):
  each LSTM layer multiplies by W_ih (4D x D) and W_hh (4D x D): 2 x 8 x D² forward;
  the decoder by (V x D): 2 x D x V forward; training is 3x: 3 x (2 x 2 x 8 x D² + 2 x D x V).
"""

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, T, B, STEPS, LR = 50, 16, 7, 3, 6, 0.5


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(V, D)
        self.rnn = nn.LSTM(D, D, 2)  # batch_first=False: (T, B, D)
        self.decoder = nn.Linear(D, V)

    def forward(self, ids, hidden):
        out, hidden = self.rnn(self.encoder(ids), hidden)
        return self.decoder(out), hidden


model = RNNModel()
data = torch.randint(0, V, (T * STEPS + 1, B))
criterion = nn.CrossEntropyLoss()
hidden = (torch.zeros(2, B, D), torch.zeros(2, B, D))
tokens = 0
for step in range(STEPS):
    model.train()
    x, y = data[step * T : (step + 1) * T], data[step * T + 1 : (step + 1) * T + 1]
    hidden = tuple(h.detach() for h in hidden)
    model.zero_grad()
    out, hidden = model(x, hidden)
    tokens += x.numel()
    loss = criterion(out.view(-1, V), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-LR)
    truth.loss(step, loss)
    if step % 3 == 2:
        model.eval()
        with torch.no_grad():
            model(data[:T], (torch.zeros(2, B, D), torch.zeros(2, B, D)))
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    samples_per_step=B,
    T=T,
    N=truth.params(model),
    E=V * D,
    counted_flops_per_token=3 * (2 * 2 * 8 * D * D + 2 * D * V),
)
