"""Which children of the called module are part of the model (`probes.parts`): a frozen child
never run with gradients on in the first training forward (an EMA copy, a teacher under
no_grad) is left out; a frozen child that runs with gradients on (a LoRA base) stays.

Hand counts: a student `Net` is Linear(4, 8) + Linear(8, 3) = 40 + 27 = 67 parameters, with
one `Attention` module holding the first Linear (L = 1, d = 4).
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from trainmeter.agent.probes import model, parts, structure  # noqa: E402

model._torch = torch


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(4, 8)

    def forward(self, x):
        return self.q(x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn, self.head = Attention(), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.attn(x))


class EmaTask(nn.Module):
    """timm's shape: the model, a loss, and an EMA copy that never runs in training."""

    def __init__(self) -> None:
        super().__init__()
        self.model, self.loss = Net(), nn.MSELoss()
        self.ema = copy.deepcopy(self.model).requires_grad_(False)

    def forward(self, x, y):
        return self.loss(self.model(x), y)


class DistillTask(nn.Module):
    """A frozen teacher run under no_grad, ahead of the student."""

    def __init__(self) -> None:
        super().__init__()
        self.teacher = Net().requires_grad_(False)
        self.student = Net()

    def forward(self, x):
        with torch.no_grad():
            target = self.teacher(x)
        return (self.student(x) - target).pow(2).mean()


class Lora(nn.Module):
    """A frozen base run with gradients on, and a trainable adapter beside it."""

    def __init__(self) -> None:
        super().__init__()
        self.base = Net().requires_grad_(False)
        self.adapter = nn.Linear(4, 3, bias=False)

    def forward(self, x):
        return self.base(x) + self.adapter(x)


def _first_forward(module: nn.Module, *args) -> list[nn.Module]:
    parts.watch(module, torch.is_grad_enabled, lambda: False)
    module.train()
    module(*args)
    return parts.settle(module)


def test_an_ema_copy_is_left_out_and_the_model_is_its_one_kept_child() -> None:
    task = EmaTask()
    left = _first_forward(task, torch.randn(2, 4), torch.randn(2, 3))
    assert left == [task.ema]
    assert parts.inner_of(task) is task.model
    assert model.unwrap_chain(task)[-1] is task.model
    assert model.count_params(task, tuple(left)) == (67, 0, 0)
    assert model.count_params(task) == (134, 0, 67)  # what was counted before
    st = structure.read(task, torch, tuple(left))
    assert (st.layers, st.width) == (1, 4)
    assert structure.read(task, torch).layers == 2


def test_a_teacher_run_under_no_grad_is_left_out() -> None:
    task = DistillTask()
    assert _first_forward(task, torch.randn(2, 4)) == [task.teacher]
    assert parts.inner_of(task) is task.student


def test_a_frozen_base_run_with_gradients_on_stays() -> None:
    lora = Lora()
    assert _first_forward(lora, torch.randn(2, 4)) == []
    assert parts.inner_of(lora) is None
    assert model.count_params(lora, tuple(parts.left_out())) == (67 + 12, 0, 67)


def test_a_model_with_no_frozen_child_gets_no_hook() -> None:
    net = Net()
    parts.watch(net, torch.is_grad_enabled, lambda: False)
    assert not parts._hooks
    net(torch.randn(2, 4))
    assert parts.settle(net) == []
    parts.reset()
