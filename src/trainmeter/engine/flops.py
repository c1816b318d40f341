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


#: Convention name -> (formula as text, whose function it follows).
CONVENTIONS: dict[str, tuple[str, str]] = {
    "titan": (
        "6(N_act-E) + 12·H·Q·Σ_l T_l",
        "TorchTitan get_dense/moe_model_nparams_and_flops (torchtitan/models/utils.py); "
        "nanochat GPT.estimate_flops: full attention square, MoE counts active experts",
    ),
    "megatron": (
        "6(N_act-E-R-V) + 6·H·Q·Σ_l T_l",
        "Megatron-LM num_floating_point_operations (megatron/training/training.py): GEMM "
        "weights only (no router, norm or bias), causal mask halves attention, packed "
        "documents by their real lengths",
    ),
    "hf": (
        "6(N-E_hf)",
        "HF Trainer.floating_point_ops: 6 x tokens x num_parameters(exclude_embeddings=True); "
        "no attention term, every nn.Embedding dropped, every expert counted",
    ),
    "all_params": (
        "6·N_act + 12·H·Q·Σ_l T_l",
        "PaLM appendix B (6N + 12·L·H·Q·T, N every parameter); nanoGPT's estimate_mfu is the "
        "same formula with position tables left out of N and T its block size",
    ),
}

#: Convention name -> the same formula over the symbols, with explicit operators (what an
#: explanation prints, so a person or a test can put the numbers in and redo it).
EXPRESSIONS: dict[str, str] = {
    "titan": "6 * (N_act - E) + 12 * HQ * sum_T",
    "megatron": "6 * (N_act - E - R - V) + 6 * HQ * sum_T",
    "hf": "6 * (N - E_hf)",
    "all_params": "6 * N_act + 12 * HQ * sum_T",
}

#: The executed-FLOPs convention, shown beside MFU and never in its place.
COUNTED = ("FLOPs executed in one real step / its tokens", "torch FlopCounterMode")


def flops_per_token(shape: ModelShape, convention: str) -> float:
    """Training FLOPs per token of `shape` under `convention` (a key of CONVENTIONS)."""
    if convention == "titan":
        return 6.0 * shape.dense + 12.0 * shape.attention
    if convention == "megatron":
        not_gemm = (shape.moe_router_params or 0) + (shape.n_vector_params or 0)
        return 6.0 * (shape.dense - not_gemm) + 6.0 * shape.attention_packed
    if convention == "hf":
        lookup = shape.n_lookup_params
        return 6.0 * (shape.n_params - (shape.n_embedding_params if lookup is None else lookup))
    if convention == "all_params":
        return 6.0 * shape.active + 12.0 * shape.attention
    raise KeyError(convention)


def all_conventions(shape: ModelShape) -> dict[str, float]:
    """FLOPs per token under every convention."""
    return {name: flops_per_token(shape, name) for name in CONVENTIONS}


def formulas() -> dict[str, str]:
    """Convention -> its formula, for a view to print beside the number."""
    return {name: text for name, (text, _used_by) in CONVENTIONS.items()}
