"""pytorch/examples `time_sequence_prediction/train.py` with its `generate_sine_wave.py`
(commit 77f55b9), run tiny, offline, on the CPU.

Adapted from https://github.com/pytorch/examples/tree/main/time_sequence_prediction,
Copyright (c) 2017, Pytorch contributors, BSD 3-Clause License (LICENSE.pytorch-examples beside
this file). What changed: the sine waves are made in memory, 12 points long instead of 1,000
(the file `traindata.pt` is not written and read back), 3 steps, a prediction of 10 points
instead of 1,000, no plots, one thread, and the `truth` lines. The model and the loop are the
original's: `optim.LBFGS.step(closure)`, the closure evaluating the whole batch of 97
sequences as often as LBFGS asks (up to 20 times a step).
"""
# ruff: noqa: B007, B023, UP008  (the original's code, kept as it is written there)
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import truth

torch.set_num_threads(1)

# generate_sine_wave.py
np.random.seed(2)
T = 20
L = 12
N = 100
x = np.empty((N, L), 'int64')
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype('float64')


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future = 0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):# if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


if __name__ == '__main__':
    steps = 3
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    # load data and make training set
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    # build the model
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    evaluations = []
    #begin to train
    for i in range(steps):
        print('STEP: ', i)
        evaluations.append(0)
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            truth.loss(i, loss)
            evaluations[-1] += 1
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            truth.loss(i, loss)
    print("closure evaluations per step:", evaluations)
    truth.report(
        seq, steps=steps, samples_per_step=input.size(0), N=truth.params(seq), E=0,
        counted=True,
    )
