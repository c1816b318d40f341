"""pytorch/examples `word_language_model` (`main.py`, `model.py`, `data.py`; commit 77f55b9),
run tiny, offline, on the CPU.

Adapted from https://github.com/pytorch/examples/tree/main/word_language_model, Copyright (c)
2017, Pytorch contributors, BSD 3-Clause License (LICENSE.pytorch-examples beside this file).
What changed: the text is a made-up one written to ./data at start (not WikiText-2), the model
is small (emsize = nhid = 16, 2 layers), 1 epoch of 6 batches of 20 x 4, no logging, no ONNX
export, no test pass at the end, one thread, and the `truth` lines. The model, the data
pipeline (`Corpus`, `batchify`, `get_batch`) and the training loop are the original's: an LSTM
fed (bptt, batch) sequence-first, no optimizer (the weights updated by hand with
`p.data.add_(p.grad, alpha=-lr)` after clipping), an evaluation under no_grad after the epoch,
and the whole model saved with `torch.save(model, f)`.

Counted FLOPs per token, worked out by hand (2 a multiply-add, backward twice the forward):
each LSTM layer multiplies by W_ih (4H x I) and W_hh (4H x H), the decoder by (V x H):
3 x (2 x 4H x (I + H) + 2 x 4H x (H + H) + 2 x H x V).
"""
# ruff: noqa: F841, UP004, UP008, UP020, UP029  (the original's code, kept as it is written there)
import math
import os
import random
from io import open

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth


# ---- data.py
class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))
        self.test = self.tokenize(os.path.join(path, 'test.txt'))

    def tokenize(self, path):
        """Tokenizes a text file."""
        assert os.path.exists(path)
        # Add words to the dictionary
        with open(path, 'r', encoding="utf8") as f:
            for line in f:
                words = line.split() + ['<eos>']
                for word in words:
                    self.dictionary.add_word(word)

        # Tokenize file content
        with open(path, 'r', encoding="utf8") as f:
            idss = []
            for line in f:
                words = line.split() + ['<eos>']
                ids = []
                for word in words:
                    ids.append(self.dictionary.word2idx[word])
                idss.append(torch.tensor(ids).type(torch.int64))
            ids = torch.cat(idss)

        return ids


# ---- model.py (the RNN model)
class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ['LSTM', 'GRU']:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            try:
                nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
            except KeyError as e:
                raise ValueError( """An invalid option for `--model` was supplied,
                                 options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']""") from e
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

        if tie_weights:
            if nhid != ninp:
                raise ValueError('When using the tied flag, nhid must be equal to emsize')
            self.decoder.weight = self.encoder.weight

        self.init_weights()

        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        else:
            return weight.new_zeros(self.nlayers, bsz, self.nhid)


# ---- main.py
class args:  # the original's flags, made small
    data, model, emsize, nhid, nlayers, lr, clip, epochs = './data', 'LSTM', 16, 16, 2, 20, 0.25, 1
    batch_size, bptt, dropout, tied, seed, log_interval, save = 4, 20, 0.2, False, 1111, 200, 'model.pt'


def write_text():
    """A made-up corpus of 40 words, in the layout Corpus reads."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(40)]
    os.makedirs(args.data, exist_ok=True)
    for name, lines in (("train.txt", 60), ("valid.txt", 10), ("test.txt", 10)):
        with open(os.path.join(args.data, name), "w", encoding="utf8") as f:
            for _ in range(lines):
                f.write(" ".join(rng.choice(words) for _ in range(7)) + "\n")


write_text()
torch.manual_seed(args.seed)
torch.set_num_threads(1)
device = torch.device("cpu")
corpus = Corpus(args.data)


def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


eval_batch_size = 10
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)

ntokens = len(corpus.dictionary)
model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""

    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i+seq_len]
    target = source[i+1:i+1+seq_len].view(-1)
    return data, target


def evaluate(data_source):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.
    ntokens = len(corpus.dictionary)
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


fed = {"steps": 0, "tokens": 0, "batches": []}


def train():
    # Turn on training mode which enables dropout.
    model.train()
    total_loss = 0.
    ntokens = len(corpus.dictionary)
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        # If we didn't, the model would try backpropagating all the way to start of the dataset.
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        fed["steps"] += 1
        fed["tokens"] += data.numel()
        fed["batches"].append(tuple(data.shape))
        loss = criterion(output, targets)
        loss.backward()

        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)

        total_loss += loss.item()
        truth.loss(batch, loss)


# Loop over epochs.
lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs+1):
    train()
    val_loss = evaluate(val_data)
    truth.loss(-epoch, val_loss)
    # Save the model if the validation loss is the best we've seen so far.
    if not best_val_loss or val_loss < best_val_loss:
        with open(args.save, 'wb') as f:
            torch.save(model, f)
        best_val_loss = val_loss
    else:
        # Anneal the learning rate if no improvement has been seen in the validation dataset.
        lr /= 4.0

print("batches (bptt, batch):", fed["batches"], "ppl", math.exp(best_val_loss))
H = W = args.nhid  # hidden width, input width (emsize)
V = ntokens
truth.report(
    model, steps=fed["steps"], tokens=fed["tokens"], samples_per_step=args.batch_size,
    T=args.bptt, N=truth.params(model), E=V * args.emsize,
    counted_flops_per_token=3 * (2 * 4 * H * (W + H) + 2 * 4 * H * (H + H) + 2 * H * V),
)
