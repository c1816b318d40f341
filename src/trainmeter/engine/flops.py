"""FLOPs per token under named conventions (training: forward + backward).

Why several: the same run reads 36.8% or 42.2% MFU depending on what is counted, so a number
is only meaningful with its convention named. Symbols: N total parameters, E lookup-only
embedding parameters, L layers, d width, T sequence length.
"""

from __future__ import annotations


class ModelShape:
    """What the conventions need to know about a model. Immutable, compared by its fields
    (a plain class: `dataclasses` is slow to import, see `section.py`)."""

    __slots__ = ("n_params", "n_embedding_params", "n_layers", "d_model", "seq_len")
    n_params: int
    n_embedding_params: int
    n_layers: int
    d_model: int
    seq_len: int

    def __init__(
        self, n_params: int, n_embedding_params: int, n_layers: int, d_model: int, seq_len: int
    ) -> None:
        for name, value in zip(
            self.__slots__, (n_params, n_embedding_params, n_layers, d_model, seq_len), strict=True
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def _fields(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelShape):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"ModelShape({fields})"

    @property
    def dense(self) -> int:
        """Parameters that are matmul weights: N - E."""
        return self.n_params - self.n_embedding_params

    @property
    def attention(self) -> int:
        """L x d x T: the attention score and value FLOPs per token are a multiple of this."""
        return self.n_layers * self.d_model * self.seq_len


#: Convention name -> (formula as text, who uses it).
CONVENTIONS: dict[str, tuple[str, str]] = {
    "titan": ("6(N-E) + 12·L·d·T", "TorchTitan, nanochat (full attention square)"),
    "megatron": ("6(N-E) + 6·L·d·T", "Megatron-LM (causal mask halves attention)"),
    "hf": ("6(N-E)", "HF Trainer total_flos (no attention term)"),
    "all_params": ("6N + 12·L·d·T", "nanoGPT (embeddings counted as matmuls)"),
}

#: Convention name -> the same formula over the symbols N, E, L, d, T, with explicit operators
#: (what an explanation prints, so a person or a test can put the numbers in and redo it).
EXPRESSIONS: dict[str, str] = {
    "titan": "6 * (N - E) + 12 * L * d * T",
    "megatron": "6 * (N - E) + 6 * L * d * T",
    "hf": "6 * (N - E)",
    "all_params": "6 * N + 12 * L * d * T",
}

#: The executed-FLOPs convention, shown beside MFU and never in its place.
COUNTED = ("FLOPs executed in one real step / its tokens", "torch FlopCounterMode")


def flops_per_token(shape: ModelShape, convention: str) -> float:
    """Training FLOPs per token of `shape` under `convention` (a key of CONVENTIONS)."""
    if convention == "titan":
        return 6.0 * shape.dense + 12.0 * shape.attention
    if convention == "megatron":
        return 6.0 * shape.dense + 6.0 * shape.attention
    if convention == "hf":
        return 6.0 * shape.dense
    if convention == "all_params":
        return 6.0 * shape.n_params + 12.0 * shape.attention
    raise KeyError(convention)


def all_conventions(shape: ModelShape) -> dict[str, float]:
    """FLOPs per token under every convention."""
    return {name: flops_per_token(shape, name) for name in CONVENTIONS}


def formulas() -> dict[str, str]:
    """Convention -> its formula, for a view to print beside the number."""
    return {name: text for name, (text, _used_by) in CONVENTIONS.items()}
