"""Word-language-model shape: an LSTM fed sequence-first (T, B) batches, no optimizer object,
the weights updated by hand (`p.data.add_(p.grad, alpha=-lr)`), truncated BPTT, an evaluation
pass under no_grad every few steps."""

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
    model, steps=STEPS, tokens=tokens, samples_per_step=B, T=T, N=truth.params(model), E=V * D
)
