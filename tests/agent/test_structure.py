"""L, d and the sequence layout read from a model's own modules (`probes.structure`), on the
torch building blocks people make models from; hand-counted expectations."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from trainmeter.agent.probes import structure  # noqa: E402


class MyEncoderLayer(nn.TransformerEncoderLayer):
    """A subclass, as people write to change the norm or the activation."""


class FusedAttention(nn.Module):
    """A hand-written attention that takes (T, B, C), and says so."""

    batch_first = False

    def __init__(self, d: int) -> None:
        super().__init__()
        self.in_proj = nn.Linear(d, 3 * d)


class AttentionBlock(nn.Module):
    """A block whose own name says Attention, kept in a ModuleList: the block is the layer."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.mlp = nn.Linear(d, d)


class FusedBlock(nn.Module):
    """A block with attention written inline: a fused projection and F.scaled_dot_product_attention
    on it, no module of its own for the attention."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.proj_in = nn.Linear(d, 3 * d)
        self.proj_out = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.proj_in(self.norm(x)).view(b, t, 3, 2, d // 2).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        x = x + self.proj_out(a.reshape(b, t, d))
        return x + self.ff(x)


class BlockBase(nn.Module):
    """OLMo's shape: the base class holds the attention computation as a method."""

    def attention(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class SequentialBlock(BlockBase):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.att_proj = nn.Linear(d, 3 * d)
        self.ff_proj = nn.Linear(d, 2 * d)

    def forward(self, x):
        q, k, v = self.att_proj(x).chunk(3, dim=-1)
        return x + self.attention(q, k, v)


class SoftmaxBlock(nn.Module):
    """Attention by hand: softmax of queries times transposed keys."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        att = (self.q(x) @ self.k(x).transpose(-2, -1)).softmax(dim=-1)
        return x + att @ self.v(x)


class Head(nn.Module):
    """One head of attention, as Karpathy's lectures write it: d in, d / heads out."""

    def __init__(self, d: int, size: int) -> None:
        super().__init__()
        self.key, self.query = nn.Linear(d, size, bias=False), nn.Linear(d, size, bias=False)

    def forward(self, x):
        w = self.query(x) @ self.key(x).transpose(-2, -1)
        return F.softmax(w, dim=-1) @ x


class Heads(nn.Module):
    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.heads = nn.ModuleList(Head(d, d // n) for _ in range(n))
        self.proj = nn.Linear(d, d)


class FrameworkBase(nn.Module):
    """A framework's base class (as Hugging Face's PreTrainedModel) that names attention in a
    method no forward calls."""

    def _attention_backends(self):
        return {"sdpa": F.scaled_dot_product_attention}


class StateSpaceMixer(FrameworkBase):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.in_proj = nn.Linear(d, 2 * d)

    def forward(self, x):
        return self._scan(self.in_proj(x))

    def _scan(self, x):
        return x.cumsum(dim=1)


class MHA(nn.Module):
    """flash-attn's name for its attention module."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.Wqkv = nn.Linear(d, 3 * d)


class ProbabilitiesHead(nn.Module):
    """A classifier's head: a softmax, but of one product with a weight, not attention."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(4, 3))

    def forward(self, x):
        return (x @ self.w).softmax(dim=-1)


def test_nn_transformer_counts_encoder_and_decoder_layers() -> None:
    model = nn.Transformer(d_model=24, nhead=2, num_encoder_layers=2, num_decoder_layers=3)
    st = structure.read(model, torch)
    # 2 encoder layers x 1 attention + 3 decoder layers x 2 (self, cross) = 8 modules, 5 blocks
    assert (st.layers, st.width, st.seq_first) == (5, 24, True)
    assert st.note.startswith("8 attention module(s) (MultiheadAttention) in 5 block(s)")


def test_encoder_of_a_subclassed_layer_batch_first() -> None:
    layer = MyEncoderLayer(16, 4, 32, batch_first=True)
    model = nn.Sequential(nn.Embedding(10, 16), nn.TransformerEncoder(layer, 3))
    st = structure.read(model, torch)
    assert (st.layers, st.width, st.seq_first) == (3, 16, False)


def test_hand_written_attention_named_so() -> None:
    model = nn.ModuleList(AttentionBlock(8) for _ in range(4))
    st = structure.read(nn.Sequential(model), torch)
    assert (st.layers, st.width, st.seq_first) == (4, 8, False)


def test_a_layout_the_module_declares() -> None:
    model = nn.Sequential(FusedAttention(12), FusedAttention(12))
    st = structure.read(model, torch)
    assert (st.layers, st.width, st.seq_first) == (2, 12, True)


def test_recurrent_and_convolutional_models_say_why() -> None:
    lstm = structure.read(nn.Sequential(nn.Embedding(5, 4), nn.LSTM(4, 4, 2)), torch)
    assert (lstm.layers, lstm.width, lstm.seq_first) == (None, None, True)
    assert "no attention module (its sequence layer is LSTM)" in lstm.reason
    conv = structure.read(nn.Sequential(nn.Conv2d(3, 4, 3)), torch)
    assert conv.layers is None and conv.seq_module is None and "no recurrent layer" in conv.reason


@pytest.mark.parametrize(
    ("shape", "seq_first", "expected"),
    [
        ((7, 3, 16), True, 7),
        ((3, 7, 16), False, 7),
        ((7, 16), True, 7),
        ((2, 3, 4, 5), False, None),
    ],
)
def test_seq_len_from_what_the_layer_is_fed(shape, seq_first, expected) -> None:
    x = torch.zeros(shape)
    assert structure.seq_len_fed(None, seq_first, (x,), {}) == expected
    assert structure.seq_len_fed(None, seq_first, (), {"hidden_states": x}) == expected


def test_attention_written_inline_in_a_block_is_found_by_its_code() -> None:
    net = nn.Module()
    net.tok = nn.Embedding(11, 16)
    net.stack = nn.ModuleDict({f"b{i}": FusedBlock(16) for i in range(3)})
    st = structure.read(net, torch)
    assert (st.layers, st.width, st.seq_first) == (3, 16, False)
    assert st.seq_module is net.stack["b0"]
    assert st.note == (
        "3 module(s) (FusedBlock) whose code computes attention (scaled_dot_product_attention) "
        "in 3 block(s) of Module"
    )


def test_attention_in_a_base_class_method_and_by_hand_softmax() -> None:
    olmo = structure.read(nn.Sequential(*(SequentialBlock(8) for _ in range(2))), torch)
    assert (olmo.layers, olmo.width) == (2, 8)
    by_hand = structure.read(
        nn.Sequential(nn.ModuleList(SoftmaxBlock(12) for _ in range(5))), torch
    )
    assert (by_hand.layers, by_hand.width) == (5, 12)
    assert "softmax with transpose(-2,-1)" in by_hand.note


def test_abbreviated_names_and_what_is_not_attention() -> None:
    block = nn.Module()
    block.attn = MHA(20)  # named so: found by the name pass, its parent is the block
    block.mlp = nn.Linear(20, 20)
    st = structure.read(nn.Sequential(block), torch)
    assert (st.layers, st.width) == (1, 20) and st.note.startswith("1 attention module(s) (MHA)")
    head = structure.read(nn.Sequential(nn.Conv2d(3, 4, 3), ProbabilitiesHead()), torch)
    assert head.layers is None and "none whose code computes attention" in head.reason


def test_per_head_modules_in_a_container_are_one_layer() -> None:
    layers = nn.Sequential(*(nn.Sequential(Heads(32, 4), nn.Linear(32, 32)) for _ in range(3)))
    st = structure.read(layers, torch)
    assert (st.layers, st.width) == (3, 32)
    assert st.note.startswith("12 module(s) (Head) whose code computes attention")
    # a stack whose layers keep their width is a stack, one layer each
    stack = structure.read(nn.Sequential(nn.ModuleList(SoftmaxBlock(8) for _ in range(4))), torch)
    assert stack.layers == 4


def test_only_the_code_forward_reaches_is_read() -> None:
    mixer = structure.read(nn.Sequential(*(StateSpaceMixer(8) for _ in range(3))), torch)
    assert mixer.layers is None and "none whose code computes attention" in mixer.reason


class EagerBlock(nn.Module):
    """Hugging Face's eager attention (and T5's): the key's dims spelt 2, 3, on the product's line."""

    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h, self.q, self.k, self.o = h, nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k = (m(x).view(b, t, self.h, d // self.h).transpose(1, 2) for m in (self.q, self.k))
        w = torch.matmul(q, k.transpose(2, 3))
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32)
        return x + self.o(torch.matmul(w, k).transpose(1, 2).reshape(b, t, d))


class PermutedKeyBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        return x + torch.softmax(q @ k.permute(0, 2, 1), -1) @ v


class CTCHead(nn.Module):
    """A speech model's output: log_softmax of a time-first transposed projection, no product."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return F.log_softmax(self.fc(x).transpose(0, 1), dim=-1)


def test_a_transposed_key_however_its_dims_are_spelt() -> None:
    eager = structure.read(nn.Sequential(*(EagerBlock(16, 2) for _ in range(3))), torch)
    assert (eager.layers, eager.width) == (3, 16)
    assert "softmax with a product with a transposed operand" in eager.note
    permuted = structure.read(nn.Sequential(*(PermutedKeyBlock(8) for _ in range(2))), torch)
    assert (permuted.layers, permuted.width) == (2, 8)
    # a transpose and a softmax with no product between them is not attention
    ctc = structure.read(nn.Sequential(nn.Conv1d(4, 4, 3), CTCHead(4)), torch)
    assert ctc.layers is None and "none whose code computes attention" in ctc.reason
