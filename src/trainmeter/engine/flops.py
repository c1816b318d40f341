"""FLOPs per token under named conventions (training: forward + backward).

Why several: the same run reads 36.8% or 42.2% MFU depending on what is counted, so a number
is only meaningful with its convention named. Each convention does what its source does (see
docs/flops.md for the file and function of each); where we think the source is wrong, the
convention still follows it and the notes say so.

Symbols: N every parameter, V one-dimensional weights (norms, biases), E lookup-only embedding tables (a table tied to the output head is
a matmul weight, so not in E), E_hf every `nn.Embedding` weight (tied or not), L layers, d
width, H·Q the attention width (heads x head size; d for most models, not for PaLM or Gemma),
T sequence length. Mixture of experts: N_act = N - routed x (1 - k / n_experts), the
parameters one token goes through; R the router. Attention with windows or packed documents:
Σ_l T_l, the sum over layers of the length each token attends over (min(window, T) on a layer
with a window; Σ L_i² / Σ L_i over packed segments, for the convention that counts them).
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs milliseconds of `tm`'s start-up (cli/args.py reads names())
if TYPE_CHECKING:
    from collections.abc import Callable

_REQUIRED = ("n_params", "n_embedding_params", "n_layers", "d_model", "seq_len")
_OPTIONAL = (
    "attn_width",
    "n_lookup_params",
    "moe_routed_params",
    "moe_experts",
    "moe_top_k",
    "moe_router_params",
    "n_vector_params",
    "windows",
    "segment_len",
)


class ModelShape:
    """What the conventions need to know about a model. Immutable, compared by its fields
    (a plain class: `dataclasses` is slow to import, see `section.py`).

    The five first fields are required; the rest refine the count and default to a dense,
    full-attention, unpacked model whose attention width is d:
    - attn_width: H x Q, the width of the attention scores (None: d)
    - n_lookup_params: every nn.Embedding weight, what HF's `exclude_embeddings` drops (None: E)
    - moe_routed_params, moe_experts, moe_top_k: routed expert weights (all experts, all
      layers), experts per layer, experts each token goes to; active only when all three are set
    - moe_router_params: the routers' weights (Megatron's formula has no router term)
    - n_vector_params: one-dimensional weights, norm gains and biases (Megatron counts GEMM
      weights only)
    - windows: one entry per layer, the window of a local-attention layer or None (full)
    - segment_len: Σ L_i² / Σ L_i over the packed documents of a batch (None: not packed)
    """

    __slots__ = _REQUIRED + _OPTIONAL
    n_params: int
    n_embedding_params: int
    n_layers: int
    d_model: int
    seq_len: int
    attn_width: int | None
    n_lookup_params: int | None
    moe_routed_params: int | None
    moe_experts: int | None
    moe_top_k: int | None
    moe_router_params: int | None
    n_vector_params: int | None
    windows: tuple[int | None, ...] | None
    segment_len: float | None

    def __init__(
        self,
        n_params: int,
        n_embedding_params: int,
        n_layers: int,
        d_model: int,
        seq_len: int,
        *,
        attn_width: int | None = None,
        n_lookup_params: int | None = None,
        moe_routed_params: int | None = None,
        moe_experts: int | None = None,
        moe_top_k: int | None = None,
        moe_router_params: int | None = None,
        n_vector_params: int | None = None,
        windows: tuple[int | None, ...] | None = None,
        segment_len: float | None = None,
    ) -> None:
        values = locals()
        for name in self.__slots__:
            value = values[name]
            if name == "windows" and value is not None:
                value = tuple(value)
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelShape):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in self.__slots__
            if name in _REQUIRED or getattr(self, name) is not None
        )
        return f"ModelShape({fields})"

    @property
    def width(self) -> int:
        """H x Q: the attention width the score and value matmuls run at."""
        return self.attn_width or self.d_model

    @property
    def is_moe(self) -> bool:
        """Whether the routed share is known: routed weights, experts and top-k all given."""
        return bool(self.moe_routed_params and self.moe_experts and self.moe_top_k)

    @property
    def inactive(self) -> float:
        """Routed expert weights a token does not go through: routed x (1 - k / n_experts)."""
        if not self.is_moe:
            return 0.0
        k, e = self.moe_top_k, self.moe_experts
        return self.moe_routed_params * (1.0 - min(k, e) / e)  # type: ignore[operator]

    @property
    def active(self) -> float:
        """N_act: the parameters one token goes through (N for a dense model)."""
        return self.n_params - self.inactive

    @property
    def dense(self) -> float:
        """Matmul weights a token goes through: N_act - E."""
        return self.active - self.n_embedding_params

    def layer_lengths(self, seq_len: float) -> float:
        """Σ over layers of the length a token attends over: min(window, T) on a layer with a
        window, T elsewhere (L x T with no windows)."""
        if not self.windows:
            return self.n_layers * seq_len
        return sum(seq_len if w is None else min(w, seq_len) for w in self.windows)

    @property
    def attention(self) -> float:
        """H·Q x Σ_l T_l: the attention score and value FLOPs per token are a multiple of this
        (L x d x T for a full-attention model whose attention width is d)."""
        return self.width * self.layer_lengths(self.seq_len)

    @property
    def attention_packed(self) -> float:
        """As `attention`, over the packed segments' lengths when they are known."""
        length = self.seq_len if self.segment_len is None else min(self.segment_len, self.seq_len)
        return self.width * self.layer_lengths(length)


# ---- the conventions: one registration each ------------------------------------------------
#
# A new convention is one `register(Convention(...))` in this file (or in a test): the CLI's
# `--convention` choices and its help, the snapshot's `conventions`, the range when none is
# chosen, `mfu.by_convention`, `counted.against_conventions`, the formulas the views print and
# the table in docs/flops.md (tests/engine/test_conventions.py checks it) all read the registry.


class Convention:
    """One way of counting training FLOPs per token, as its source counts them.

    - name: what `--convention` takes and the snapshot keys it under;
    - formula: the formula as a person reads it (`6(N_act-E) + 12·H·Q·Σ_l T_l`);
    - source: whose function it follows, file and function (an explanation's note);
    - counts: what it counts and leaves out, in a few words (the docs table);
    - per_token: shape -> training FLOPs per token;
    - expression: shape -> the formula over only the symbols that shape uses, with explicit
      operators (`6 * (N - E) + 12 * L * d * T`), so a person or a test can redo it;
    - real_lengths: attention over packed documents' real lengths (Σ L_i² / Σ L_i) rather
      than T.

    A plain class, not a dataclass (see `ModelShape`)."""

    __slots__ = ("name", "formula", "source", "counts", "per_token", "expression", "real_lengths")
    name: str
    formula: str
    source: str
    counts: str
    per_token: Callable[[ModelShape], float]
    expression: Callable[[ModelShape], str]
    real_lengths: bool

    def __init__(
        self,
        name: str,
        *,
        formula: str,
        source: str,
        counts: str,
        per_token: Callable[[ModelShape], float],
        expression: Callable[[ModelShape], str],
        real_lengths: bool = False,
    ) -> None:
        self.name = name
        self.formula = formula
        self.source = source
        self.counts = counts
        self.per_token = per_token
        self.expression = expression
        self.real_lengths = real_lengths

    def __repr__(self) -> str:
        return f"Convention({self.name!r}, formula={self.formula!r})"


#: Convention name -> its registration, in registration order (the order of every listing).
REGISTRY: dict[str, Convention] = {}
#: (REGISTRY's generation, the shape, its FLOPs per token under each convention): the last
#: answer of `all_conventions`, which a snapshot asks for several times and a replay thousands
#: (a shape is immutable; registering or removing a convention moves the generation)
_generation = 0
_last: tuple[int, ModelShape | None, dict[str, float]] = (-1, None, {})


def register(convention: Convention) -> Convention:
    """Add a convention; a name already taken is refused (ValueError), never replaced."""
    if not convention.name or not convention.name.isidentifier():
        raise ValueError(f"a convention's name is a plain word: {convention.name!r}")
    if convention.name in REGISTRY:
        raise ValueError(f"convention {convention.name!r} is already registered")
    REGISTRY[convention.name] = convention
    _moved()
    return convention


def _moved() -> None:
    global _generation
    _generation += 1


def generation() -> int:
    """Grows each time a convention is registered or removed: what is derived from the
    registry (FLOPs per token under each convention) is derived again after it moves."""
    return _generation


def unregister(name: str) -> None:
    """Take a convention out (tests that register one put things back with it)."""
    REGISTRY.pop(name, None)
    _moved()


def names() -> tuple[str, ...]:
    """Every convention's name, in registration order: `--convention`'s choices."""
    return tuple(REGISTRY)


def get(name: str) -> Convention:
    """The convention registered as `name` (KeyError when there is none)."""
    return REGISTRY[name]


def flops_per_token(shape: ModelShape, convention: str) -> float:
    """Training FLOPs per token of `shape` under `convention` (a registered name)."""
    return REGISTRY[convention].per_token(shape)


def all_conventions(shape: ModelShape) -> dict[str, float]:
    """FLOPs per token under every convention (a new dict each call: the caller's to keep)."""
    global _last
    generation, last, conventions = _last
    if last is not shape or generation != _generation:
        conventions = {name: conv.per_token(shape) for name, conv in REGISTRY.items()}
        _last = (_generation, shape, conventions)
    return dict(conventions)


def formulas() -> dict[str, str]:
    """Convention -> its formula, for a view to print beside the number."""
    return {name: conv.formula for name, conv in REGISTRY.items()}


# ---- the symbols an expression writes -------------------------------------------------------


def term_n(shape: ModelShape) -> str:
    """N, or N less the routed expert weights a token skips."""
    return "(N - routed * (1 - top_k / experts))" if shape.is_moe else "N"


def term_attention(shape: ModelShape, packed: bool) -> str:
    """L * d * T for a plain model; HQ for another attention width; sum_T for windows or
    packed segments (`packed`: the convention counts the segments' real lengths)."""
    width = "HQ" if shape.attn_width else "d"
    if shape.windows or (packed and shape.segment_len is not None):
        return f"{width} * sum_T"
    return f"L * {width} * T"


# ---- the four published conventions (docs/flops.md says what each source does) ------------


def _megatron(shape: ModelShape) -> float:
    not_gemm = (shape.moe_router_params or 0) + (shape.n_vector_params or 0)
    return 6.0 * (shape.dense - not_gemm) + 6.0 * shape.attention_packed


def _megatron_expression(shape: ModelShape) -> str:
    router = " - R" if shape.moe_router_params else ""
    vector = " - V" if shape.n_vector_params else ""
    return f"6 * ({term_n(shape)} - E{router}{vector}) + 6 * {term_attention(shape, True)}"


def _hf(shape: ModelShape) -> float:
    lookup = shape.n_lookup_params
    return 6.0 * (shape.n_params - (shape.n_embedding_params if lookup is None else lookup))


register(Convention(
    "titan",
    formula="6(N_act-E) + 12·H·Q·Σ_l T_l",
    source="TorchTitan get_dense/moe_model_nparams_and_flops (torchtitan/models/utils.py); "
    "nanochat GPT.estimate_flops: full attention square, MoE counts active experts",
    counts="the matmul weights a token goes through (a tied table is the head's) and "
    "attention as a full square",
    per_token=lambda s: 6.0 * s.dense + 12.0 * s.attention,
    expression=lambda s: f"6 * ({term_n(s)} - E) + 12 * {term_attention(s, False)}",
))
register(Convention(
    "megatron",
    formula="6(N_act-E-R-V) + 6·H·Q·Σ_l T_l",
    source="Megatron-LM num_floating_point_operations (megatron/training/training.py): GEMM "
    "weights only (no router, norm or bias), causal mask halves attention, packed "
    "documents by their real lengths",
    counts="GEMM weights only (no router, norm or bias); attention halved for the causal "
    "mask, over packed documents' real lengths",
    per_token=_megatron,
    expression=_megatron_expression,
    real_lengths=True,
))
register(Convention(
    "hf",
    formula="6(N-E_hf)",
    source="HF Trainer.floating_point_ops: 6 x tokens x num_parameters(exclude_embeddings=True); "
    "no attention term, every nn.Embedding dropped, every expert counted",
    counts="every parameter but the nn.Embedding weights (tied or not), every expert; "
    "no attention",
    per_token=_hf,
    expression=lambda s: "6 * (N - E_hf)" if s.n_lookup_params is not None else "6 * (N - E)",
))
register(Convention(
    "all_params",
    formula="6·N_act + 12·H·Q·Σ_l T_l",
    source="PaLM appendix B (6N + 12·L·H·Q·T, N every parameter); nanoGPT's estimate_mfu is the "
    "same formula with position tables left out of N and T its block size",
    counts="every parameter a token goes through, embeddings included, and attention as a "
    "full square",
    per_token=lambda s: 6.0 * s.active + 12.0 * s.attention,
    expression=lambda s: f"6 * {term_n(s)} + 12 * {term_attention(s, False)}",
))
