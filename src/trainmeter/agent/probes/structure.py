"""L, d and the layout of the sequence from the model's own modules, when no config says them.

A model built from `nn.Transformer`, `nn.TransformerEncoder`/`Decoder` (or subclasses),
`nn.MultiheadAttention`, a vision transformer or hand-written blocks carries its shape in its
structure: it has attention modules, one (or two, self and cross) per block.

- *Attention modules*: `nn.MultiheadAttention`, and any module with parameters whose class name
  contains "Attention" (nanoGPT's `CausalSelfAttention`, timm's `Attention`, Hugging Face's
  `*Attention`), outermost only (an attention inside another is part of it).
- *L*: the blocks holding them. An attention module's block is its parent module, unless the
  parent is a container (`ModuleList`, `Sequential`, `ModuleDict`): then the attention module is
  the block itself. A decoder layer's self- and cross-attention share one block, so
  `nn.Transformer(num_encoder_layers=2, num_decoder_layers=3)` has L = 5.
- *d*: `embed_dim` of `nn.MultiheadAttention`, else the input width of the first `nn.Linear`
  inside the attention module (its query or fused qkv projection); the most common value.
- *T* is read from what the first sequence module is actually fed, during a real forward (a
  one-shot forward pre-hook, removed at its first call): the query of `nn.MultiheadAttention`
  is `(T, B, E)` unless `batch_first=True`; a recurrent layer (`nn.LSTM`, `nn.GRU`, `nn.RNN`)
  likewise; any other attention module's input is taken as `(B, T, C)` unless it has
  `batch_first=False`.

Only module types, attributes and shapes are read; no tensor value.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict")


class Structure:
    """What the modules say: layers and width (None when not found), with how they were found;
    the module to read T from and whether it takes the sequence first; or the reason."""

    def __init__(self) -> None:
        self.layers: int | None = None
        self.width: int | None = None
        self.note = ""
        self.seq_module: Any = None
        self.seq_first: bool | None = None  # None: read the layout from the module at call time
        self.reason = ""


def is_attention(module: Any, torch: Any) -> bool:
    if isinstance(module, torch.nn.MultiheadAttention):
        return True
    if "Attention" not in type(module).__name__:
        return False
    return next(iter(module.parameters()), None) is not None


def _outermost_attention(root: Any, torch: Any, skip: set[int]) -> list[tuple[Any, Any]]:
    """(attention module, its parent) in module order, none nested in another, none inside a
    module of `skip` (ids)."""
    found: list[tuple[Any, Any]] = []

    def walk(module: Any) -> None:
        for child in module.children():
            if id(child) in skip:
                continue
            if is_attention(child, torch):
                found.append((child, module))
            else:
                walk(child)

    walk(root)
    return found


def _width(attention: Any, torch: Any) -> int | None:
    if isinstance(attention, torch.nn.MultiheadAttention):
        return int(attention.embed_dim)
    for module in attention.modules():
        if isinstance(module, torch.nn.Linear):
            return int(module.in_features)
    return None


def _rnn(root: Any, torch: Any, skip: set[int]) -> Any:
    inside = {id(m) for s in root.modules() if id(s) in skip for m in s.modules()}
    for module in root.modules():
        if isinstance(module, torch.nn.RNNBase) and id(module) not in inside:
            return module
    return None


def read(root: Any, torch: Any, skip: tuple[Any, ...] = ()) -> Structure:
    """The structure of `root` (the innermost model, wrappers already looked through), leaving
    out the modules in `skip` (children found not to be part of the model: `parts`)."""
    out = Structure()
    skipped = {id(m) for m in skip}
    attention = _outermost_attention(root, torch, skipped)
    if attention:
        blocks = {
            id(att if type(parent).__name__ in _CONTAINERS else parent): None
            for att, parent in attention
        }
        out.layers = len(blocks)
        widths = Counter(w for w in (_width(att, torch) for att, _ in attention) if w)
        if widths:
            out.width = widths.most_common(1)[0][0]
        kinds = sorted({type(att).__name__ for att, _ in attention})
        out.note = (
            f"{len(attention)} attention module(s) ({', '.join(kinds)}) in {out.layers} "
            f"block(s) of {type(root).__name__}"
        )
        first = attention[0][0]
        out.seq_module = first
        if isinstance(first, torch.nn.MultiheadAttention):
            out.seq_first = not first.batch_first
        else:
            out.seq_first = getattr(first, "batch_first", True) is False
        return out
    rnn = _rnn(root, torch, skipped)
    if rnn is not None:
        out.seq_module = rnn
        out.seq_first = not rnn.batch_first
        out.reason = (
            f"{type(root).__name__} has no attention module (its sequence layer is "
            f"{type(rnn).__name__})"
        )
        return out
    out.reason = (
        f"{type(root).__name__} has no attention module (no nn.MultiheadAttention, no module "
        "named *Attention*) and no recurrent layer"
    )
    return out


def seq_len_fed(module: Any, seq_first: bool, args: tuple[Any, ...], kwargs: dict) -> int | None:
    """T from the first tensor a sequence module was called with (its query / input)."""
    x = args[0] if args else None
    if x is None:
        for name in ("query", "hidden_states", "x", "input"):
            x = kwargs.get(name)
            if x is not None:
                break
    shape = getattr(x, "shape", None)
    if shape is None:  # a PackedSequence, or nothing we can read
        return None
    if len(shape) == 3:
        return int(shape[0] if seq_first else shape[1])
    if len(shape) == 2:  # unbatched (T, E)
        return int(shape[0])
    return None
