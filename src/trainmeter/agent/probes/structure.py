"""L, d and the layout of the sequence from the model's own modules, when no config says them.

A model built from `nn.Transformer`, `nn.TransformerEncoder`/`Decoder` (or subclasses),
`nn.MultiheadAttention`, a vision transformer or hand-written blocks carries its shape in its
structure: it has attention modules, one (or two, self and cross) per block.

- *Attention modules*: `nn.MultiheadAttention`, and any module with parameters whose class name
  contains "Attention", "Attn", "MHA" or "MHSA" (nanoGPT's `CausalSelfAttention`, timm's
  `Attention`, Hugging Face's `*Attention`, flash-attn's `MHA`), outermost only (an attention
  inside another is part of it).
- When no module is named so, the modules whose code computes attention: the `forward` of the
  class, or a method or module-level function it calls (transitively, torch's own code
  excepted), calls `scaled_dot_product_attention`, flash-attn or xformers' attention, or takes
  a softmax beside a product with a transposed key (`transpose(-2, -1)`, `.mT`, `einsum`,
  `bmm`, or `@`/`matmul` on the line that transposes or permutes an operand). That finds attention written inline in a block (OLMo's blocks, a block with a fused
  projection calling `F.scaled_dot_product_attention`) and per-head modules. At most 16
  functions a class are read, once; code without source (built at run time) is not read.
- *L*: the blocks holding them. An attention module's block is its parent module, unless the
  parent is a container (`ModuleList`, `Sequential`, `ModuleDict`): then the attention module is
  the block itself, or, when the n modules of that container each project d to d/n, they are
  the heads of one layer. A decoder layer's self- and cross-attention share one block, so
  `nn.Transformer(num_encoder_layers=2, num_decoder_layers=3)` has L = 5.
- *d*: `embed_dim` of `nn.MultiheadAttention`, else the input width of the first `nn.Linear`
  inside the attention module (its query or fused qkv projection); the most common value.
- *T* is read from what the first sequence module is actually fed, during a real forward (a
  one-shot forward pre-hook, removed at its first call): the query of `nn.MultiheadAttention`
  is `(T, B, E)` unless `batch_first=True`; a recurrent layer (`nn.LSTM`, `nn.GRU`, `nn.RNN`)
  likewise; any other attention module's input is taken as `(B, T, C)` unless it has
  `batch_first=False`.

Only module types, attributes, shapes and the source of their code are read; no tensor value.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
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


_NAMES = ("Attention", "Attn", "MHA", "MHSA")
#: Calls that are attention whatever surrounds them (spaces removed before matching).
_ATTENTION_CALLS = ("scaled_dot_product_attention", "flash_attn", "memory_efficient_attention")
#: With a softmax, a product with a transposed key makes it attention: a product of the last
#: two dims (`transpose(-2,-1)`, `.mT`), an einsum or a batched product anywhere in the code...
_KEY_PRODUCTS = (
    ("transpose(-2,-1)", "transpose(-2,-1)"),
    ("transpose(-1,-2)", "transpose(-1,-2)"),
    (".mT", ".mT"),
    ("einsum(", "einsum"),
    ("bmm(", "bmm"),
)
#: ... or a product (`@`, `matmul`) on the line that transposes or permutes an operand, however
#: its dims are spelt: `matmul(q, k.transpose(2, 3))` (Hugging Face's eager attention, T5),
#: `q @ k.permute(0, 2, 1)`.
_PRODUCT_LINE = re.compile(r"^(?=.*(?:@|matmul\())(?=.*\.(?:transpose|permute)\().*$", re.M)


def _has_parameters(module: Any) -> bool:
    return next(iter(module.parameters()), None) is not None


def is_attention(module: Any, torch: Any) -> bool:
    """Named as attention: `nn.MultiheadAttention`, or a class whose name says so."""
    if isinstance(module, torch.nn.MultiheadAttention):
        return True
    name = type(module).__name__
    return any(part in name for part in _NAMES) and _has_parameters(module)


_computed: dict[type, str | None] = {}
#: Functions read per class at most: its forward and what that calls, transitively.
_MAX_FUNCTIONS = 16


def _code_says_attention(code: str) -> str | None:
    """What in `code` (spaces removed) computes attention, or None."""
    found = next((c for c in _ATTENTION_CALLS if c in code), None)
    if found is None and "softmax" in code:
        product = next((label for text, label in _KEY_PRODUCTS if text in code), None)
        if product is None and _PRODUCT_LINE.search(code):
            product = "a product with a transposed operand"
        found = f"softmax with {product}" if product else None
    return found


def attention_in_code(cls: type) -> str | None:
    """What computes attention in the code a module of class `cls` runs: its `forward`, the
    methods it calls on `self` and the module-level functions it calls, transitively (torch's
    own code excepted), or None. Cached by class. Only the functions forward reaches are read, not
    whole classes: a framework base class (Hugging Face's `PreTrainedModel`) mentions attention
    in methods no forward calls."""
    if cls in _computed:
        return _computed[cls]
    import inspect

    calls = re.compile(r"(?<![\w.])(self\.)?(\w+)\(")
    found = None
    todo = [getattr(cls, "forward", None)]
    seen: set[int] = set()
    while todo and found is None and len(seen) < _MAX_FUNCTIONS:
        fn = todo.pop(0)
        if not inspect.isfunction(fn) or id(fn) in seen:
            continue
        seen.add(id(fn))
        fn = inspect.unwrap(fn)
        if (fn.__module__ or "").split(".")[0] == "torch":
            continue
        try:
            source = inspect.getsource(fn)
        except Exception:  # noqa: BLE001 - no source, or a file changed since import: not read
            continue
        found = _code_says_attention(source.replace(" ", ""))
        for on_self, name in calls.findall(source):
            target = (
                inspect.getattr_static(cls, name, None) if on_self else fn.__globals__.get(name)
            )
            if isinstance(target, (staticmethod, classmethod)):
                target = target.__func__
            if inspect.isfunction(target):
                todo.append(target)
    _computed[cls] = found
    return found


def _outermost(root: Any, skip: set[int], test: Callable[[Any], bool]) -> list[tuple[Any, Any]]:
    """(module passing `test`, its parent) in module order, none nested in another, none inside
    a module of `skip` (ids)."""
    found: list[tuple[Any, Any]] = []

    def walk(module: Any) -> None:
        for child in module.children():
            if id(child) in skip:
                continue
            if test(child):
                found.append((child, module))
            else:
                walk(child)

    walk(root)
    return found


def _first_linear(attention: Any, torch: Any) -> Any:
    return next((m for m in attention.modules() if isinstance(m, torch.nn.Linear)), None)


def _width(attention: Any, torch: Any) -> int | None:
    if isinstance(attention, torch.nn.MultiheadAttention):
        return int(attention.embed_dim)
    linear = _first_linear(attention, torch)
    return None if linear is None else int(linear.in_features)


def _are_heads(members: list[Any], torch: Any) -> bool:
    """n > 1 modules that each project d to d/n: the heads of one layer."""
    n = len(members)
    linears = [_first_linear(m, torch) for m in members]
    return n > 1 and all(
        lin is not None and lin.out_features * n == lin.in_features for lin in linears
    )


def _blocks(attention: list[tuple[Any, Any]], torch: Any) -> int:
    """How many blocks hold the attention modules. A module's block is its parent, unless the
    parent is a container: then a container of per-head modules (as in Karpathy's lectures) is
    one layer, any other container a stack of layers, each module a block of its own."""
    groups: dict[int, tuple[Any, list[Any]]] = {}
    for att, parent in attention:
        groups.setdefault(id(parent), (parent, []))[1].append(att)
    return sum(
        len(members)
        if type(parent).__name__ in _CONTAINERS and not _are_heads(members, torch)
        else 1
        for parent, members in groups.values()
    )


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
    attention = _outermost(root, skipped, lambda m: is_attention(m, torch))
    label, how = "attention module(s)", ""
    if not attention:
        attention = _outermost(
            root, skipped, lambda m: _has_parameters(m) and bool(attention_in_code(type(m)))
        )
        seen = sorted({str(attention_in_code(type(att))) for att, _ in attention})
        label, how = "module(s)", f" whose code computes attention ({', '.join(seen)})"
    if attention:
        out.layers = _blocks(attention, torch)
        widths = Counter(w for w in (_width(att, torch) for att, _ in attention) if w)
        if widths:
            out.width = widths.most_common(1)[0][0]
        kinds = sorted({type(att).__name__ for att, _ in attention})
        out.note = (
            f"{len(attention)} {label} ({', '.join(kinds)}){how} in {out.layers} "
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
        "named *Attention*, *Attn* or *MHA*, none whose code computes attention) and no "
        "recurrent layer"
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
