"""PyTorch's ImageNet example shape: a small ResNet (basic blocks, BatchNorm, no attention) in
`nn.DataParallel` (a pass-through on a machine without GPUs), SGD with momentum and Nesterov,
a StepLR stepped once per epoch, a DataLoader whose last batch is smaller (drop_last=False),
`model.train()` at each epoch's start and a validation under no_grad in eval mode after it.

A convolutional net has no layer count or width in the transformer sense and no token
sequence: L, d and T are absent with a reason, and no tokens are counted."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
B, SAMPLES, EPOCHS, CLASSES = 4, 10, 2, 5


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8)
        self.layer1, self.layer2 = BasicBlock(8, 8, 1), BasicBlock(8, 16, 2)
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(16, CLASSES)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


net = ResNet()
model = nn.DataParallel(net)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4, nesterov=True)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
train = TensorDataset(torch.randn(SAMPLES, 3, 8, 8), torch.randint(0, CLASSES, (SAMPLES,)))
val = TensorDataset(torch.randn(4, 3, 8, 8), torch.randint(0, CLASSES, (4,)))
train_loader = DataLoader(train, batch_size=B, shuffle=True, drop_last=False)
val_loader = DataLoader(val, batch_size=B)
steps = 0
for _epoch in range(EPOCHS):
    model.train()
    for images, target in train_loader:
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        truth.loss(steps, loss)
    model.eval()
    with torch.no_grad():
        for images, target in val_loader:
            criterion(model(images), target)
    scheduler.step()
truth.report(
    net,
    steps=steps,
    samples_per_step=B,
    N=truth.params(net),
    E=0,
    absent=["L", "d", "T"],
)
