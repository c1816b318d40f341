"""The counting mode's formulas for the matmul-class operators torch's registry lacks, each
against a count worked out by hand, and the naming of those that ran with no formula.

2 FLOPs a multiply-add throughout, as torch counts.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from trainmeter.agent.probes import flop_formulas, flops


@pytest.fixture
def counter(monkeypatch):
    monkeypatch.setattr(flops, "_torch", torch)
    monkeypatch.setattr(flops, "_counter_cls", flops._counting_mode_class())
    monkeypatch.setattr(flops, "attention_missed", None)
    return flops.counter


def test_grouped_mm_forward_and_backward(counter):
    """12 rows of width 8 through 3 experts' (8 x 16) weights, offsets 4, 8, 12:
    forward 2 * 12 * 8 * 16 = 3,072; backward: the input's gradient (12 x 16) x (3, 16, 8) is
    3,072 again, the weights' (8 x 12) x (12 x 16) split into 3 groups is 2 * 8 * 12 * 16 =
    3,072: 9,216 in all (a Mixtral's experts, which FlopCounterMode left out)."""
    a = torch.randn(12, 8, requires_grad=True)
    b = torch.randn(3, 8, 16, requires_grad=True)
    offs = torch.tensor([4, 8, 12], dtype=torch.int32)
    with counter() as mode:
        y = torch._grouped_mm(a, b, offs=offs)
        forward = mode.get_total_flops()
        (y * y).sum().backward()
    assert forward == 3_072
    assert mode.get_total_flops() == 9_216
    assert mode.missing == {} and mode.failed == {}


def test_matrix_vector_and_vector_products(counter):
    """(4 x 8) @ (8,) is mv: 2 * 4 * 8 = 64; (8,) @ (8,) is dot: 16."""
    m, v = torch.randn(4, 8), torch.randn(8)
    with counter() as mode:
        m @ v
        v @ v
    assert mode.get_total_flops() == 64 + 16


def test_an_lstm_on_the_cpu(counter):
    """nn.LSTM(8, 16, 2) over 5 steps of a batch of 2 (10 rows): layer 1 multiplies by W_ih
    (64 x 8) and W_hh (64 x 16): 2 * 10 * (512 + 1,024) = 30,720; layer 2 by two 64 x 16:
    2 * 10 * 2,048 = 40,960. Forward 71,680, backward twice that: 215,040. Whether torch runs
    the fused oneDNN kernel (our formula) or per-step matmuls (torch's), the count is this."""
    torch.manual_seed(0)
    lstm = nn.LSTM(8, 16, 2)
    x = torch.randn(5, 2, 8, requires_grad=True)
    with counter() as mode:
        out, _ = lstm(x)
        forward = mode.get_total_flops()
        out.sum().backward()
    assert forward == 71_680
    assert mode.get_total_flops() == 215_040
    assert mode.missing == {}


def test_the_counted_step_is_bit_identical_with_the_new_formulas(counter):
    """Promise 1: the mode only reads shapes; an LSTM and grouped matmuls give the same bits."""
    torch.manual_seed(0)
    lstm = nn.LSTM(8, 16)
    x = torch.randn(5, 2, 8)
    w = torch.randn(3, 16, 8, requires_grad=True)
    offs = torch.tensor([4, 8, 10], dtype=torch.int32)

    def step():
        lstm.zero_grad()
        w.grad = None
        h = lstm(x)[0].reshape(10, 16)
        y = torch._grouped_mm(h, w, offs=offs)
        (y * y).sum().backward()
        return [p.grad.clone() for p in lstm.parameters()] + [w.grad.clone()]

    plain = step()
    with counter():
        ours = step()
    assert all(torch.equal(a, b) for a, b in zip(plain, ours, strict=True))


def test_an_operator_with_no_formula_is_named_not_dropped(counter):
    """A library's own matmul kernel (a custom op) runs as one operator the mode cannot see
    into: it is named with its calls, and elementwise custom ops are not."""
    lib = torch.library.Library("jobstest", "DEF")
    lib.define("fused_mm(Tensor a, Tensor b) -> Tensor")
    lib.define("scale(Tensor a) -> Tensor")
    lib.impl("fused_mm", lambda a, b: a @ b, "CompositeExplicitAutograd")
    lib.impl("scale", lambda a: a * 2, "CompositeExplicitAutograd")
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with counter() as mode:
        torch.ops.jobstest.fused_mm(a, b)
        torch.ops.jobstest.fused_mm(a, b)
        torch.ops.jobstest.scale(a)
    assert mode.missing == {"jobstest.fused_mm": 2}
    assert mode.get_total_flops() == 0
    assert "jobstest.fused_mm (2 calls)" in flops._missing_text(mode)


def test_a_formula_that_raises_counts_nothing_and_is_named(counter, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("odd shape")

    monkeypatch.setitem(flop_formulas.ATEN, "mv", broken)
    with counter() as mode:
        out = torch.randn(4, 8) @ torch.randn(8)  # the user's step goes on
    assert out.shape == (4,)
    assert mode.get_total_flops() == 0
    assert "aten.mv" in mode.failed and "odd shape" in mode.failed["aten.mv"]


def test_the_mode_does_not_import_dynamo_at_its_first_operator():
    """torch wraps a mode's __torch_dispatch__ in `_disable_dynamo` unless told not to, and that
    imports torch._dynamo at the first operator: 2 s inside the user's step 3."""
    cls = flops._counting_mode_class()
    assert not hasattr(cls.__dict__["__torch_dispatch__"], "__wrapped__")


def test_a_compiled_function_called_in_the_window_does_not_trace_the_mode(counter):
    """Without torch's wrapper, dynamo would trace and compile the mode's own method when a
    compiled function runs while the mode is on: the mode tells dynamo to skip it."""
    from torch._dynamo.utils import counters

    @torch.compile(backend="eager")
    def f(x):
        return (x @ x).sin()

    before = dict(counters["frames"])
    with counter() as mode:
        f(torch.randn(4, 4))
    assert dict(counters["frames"]) == before  # nothing traced: f ran eagerly, as with torch's
    assert mode.get_total_flops() == 2 * 4 * 4 * 4


@pytest.mark.parametrize(
    ("name", "matmul"),
    [
        ("aten.mkldnn_rnn_layer", True),
        ("aten._cudnn_rnn", True),
        ("transformers.grouped_mm_fallback", True),
        ("flash_attn._flash_attn_forward", True),
        ("aten._scaled_dot_product_fused_attention_overrideable", True),
        ("aten.cudnn_convolution_transpose", True),
        ("mylib.fused_linear_gelu", True),
        ("aten.add", False),
        ("aten.upsample_linear1d", False),
        ("aten.native_layer_norm", False),
        ("aten._softmax", False),
        ("aten.cumsum", False),
        ("symm_mem.fused_all_gather_matmul", True),
        ("_c10d_functional.all_reduce", False),
    ],
)
def test_which_operators_are_matmul_class(name, matmul):
    assert flop_formulas.matmul_class(name) is matmul
