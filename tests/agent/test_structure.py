"""L, d and the sequence layout read from a model's own modules (`probes.structure`), on the
torch building blocks people make models from; hand-counted expectations."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

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
