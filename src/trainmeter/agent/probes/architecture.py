"""What the model's structure changes in its FLOPs, read once at its first training forward:
experts (mixture of experts), attention width, local-attention windows, packed documents, and
the embedding tables Hugging Face's count drops.

Why here: a mixture of experts counted from all its parameters, or a sliding-window model
counted with full attention, gets an MFU several times too high (above 100% on long context).
The model already says how it is built: a Hugging Face config names its experts, top-k and
windows, and the modules are named `experts`, `gate`/`router`, `shared_experts` in Hugging
Face, TorchTitan and most code that follows them. Only shapes, config values and CPU tensors
are read: nothing is copied to or from a GPU, nothing is gathered.
"""

from __future__ import annotations

from typing import Any

from ...payloads import FACT
from ..sender import get_sender
from . import model, parts, steps

EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_router_topk", "moe_topk", "top_k")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
#: Module names (the last part of a parameter's path) for routed experts, routers, shared ones.
ROUTED = ("experts", "routed_experts")
ROUTER = ("gate", "router")
SHARED = ("shared_experts", "shared_expert")
#: Keyword arguments that carry packed documents' boundaries (flash-attention varlen style).
CU_SEQLENS = ("cu_seqlens", "cu_seq_lens_q", "cu_seqlens_q")

_torch: Any = None


def _fact(key: str, value: Any, note: str) -> None:
    sender = get_sender()
    if sender is not None:
        sender.send(FACT.name, FACT.build(key=key, value=value, source="detected", note=note))


def lookup_params(root: Any) -> int:
    """Every `nn.Embedding` weight, each once, tied or not: what Hugging Face's
    `num_parameters(exclude_embeddings=True)` leaves out (a tied token table included)."""
    seen: set[int] = set()
    total = 0
    for module in root.modules():
        if isinstance(module, _torch.nn.Embedding):
            weight = getattr(module, "weight", None)
            if weight is not None and id(weight) not in seen:
                seen.add(id(weight))
                total += int(weight.numel())
    return total


def vector_params(root: Any) -> int | None:
    """Weights of one dimension (norm gains, biases), each once: no GEMM runs over them, so
    Megatron-LM's count leaves them out. None under FSDP1, whose flat parameters are all
    one-dimensional whatever they hold."""
    seen: set[int] = set()
    total = 0
    for p in root.parameters():
        if hasattr(p, "_unpadded_unsharded_size"):
            return None
        if p.dim() == 1 and id(p) not in seen:
            seen.add(id(p))
            total += int(p.numel())
    return total


def experts_of(root: Any) -> dict[str, int]:
    """Routed, router and shared parameters, by module name; with the experts per layer and
    top-k the modules say (`num_experts`, `top_k` attributes, a ModuleList's length)."""
    out = {"routed": 0, "router": 0, "shared": 0}
    seen: set[int] = set()
    for path, module in root.named_modules():
        name = path.rpartition(".")[2]
        kind = "routed" if name in ROUTED else "shared" if name in SHARED else None
        if kind is None and name in ROUTER and _has_experts_sibling(root, path):
            kind = "router"
        if kind is None:
            continue
        if kind == "routed":
            n = getattr(module, "num_experts", None)
            if not isinstance(n, int) and isinstance(module, _torch.nn.ModuleList):
                n = len(module)
            if isinstance(n, int) and n > 1:
                out.setdefault("experts", n)
        k = getattr(module, "top_k", None)
        if kind == "router" and isinstance(k, int) and k > 0:
            out.setdefault("top_k", k)
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out[kind] += int(p.numel())
    return out


def _has_experts_sibling(root: Any, path: str) -> bool:
    parent_path, _, _ = path.rpartition(".")
    parent = root.get_submodule(parent_path) if parent_path else root
    return any(getattr(parent, name, None) is not None for name in ROUTED)


def attn_width(config: Any) -> tuple[int, str] | None:
    """H x Q when it is not d: heads x head_dim, or for multi-head latent attention (DeepSeek)
    heads x (QK head + V head) / 2, the mean width of its score and value matmuls."""
    d = model.config_int(config, model.WIDTH_KEYS)
    heads = model.config_int(config, HEAD_KEYS)
    if not d or not heads:
        return None
    qk = model.config_int(config, ("qk_nope_head_dim",))
    rope = model.config_int(config, ("qk_rope_head_dim",))
    v = model.config_int(config, ("v_head_dim",))
    if qk and rope and v:
        width, how = heads * (qk + rope + v) / 2, "heads x (qk_nope + qk_rope + v head dims) / 2"
    else:
        head_dim = model.config_int(config, ("head_dim",))
        if not head_dim:
            return None
        width, how = heads * head_dim, "heads x head_dim"
    if width == d or not float(width).is_integer():
        return None
    return int(width), how


def windows_of(config: Any, n_layers: int) -> list[int | None] | None:
    """One entry a layer: the window of a sliding-window or chunked-attention layer, None for
    full attention; None when no layer has a window. From `layer_types` when the config has
    it, else a `sliding_window` on every layer (unless `use_sliding_window` is False)."""
    get = model._get
    sliding = get(config, "sliding_window")
    chunk = get(config, "attention_chunk_size")
    kinds = get(config, "layer_types")
    if isinstance(kinds, (list, tuple)) and len(kinds) == n_layers:
        out: list[int | None] = []
        for kind in kinds:
            text = str(kind)
            if "sliding" in text and _positive(sliding):
                out.append(sliding)
            elif "chunk" in text and _positive(chunk):
                out.append(chunk)
            else:
                out.append(None)
        return out if any(w is not None for w in out) else None
    if _positive(sliding) and get(config, "use_sliding_window") is not False:
        return [sliding] * n_layers
    return None


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def segment_len(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[float, str] | None:
    """Σ L_i² / Σ L_i over the packed documents of this batch, and where it was read: from
    `cu_seqlens` (cumulative lengths) or from `position_ids` restarting at 0 inside a row.
    None when the batch is not packed or the tensor is not on the CPU (reading a GPU tensor
    would make the step wait for it)."""
    for key in CU_SEQLENS:
        cu = kwargs.get(key)
        values = _cpu_list(cu, 1)
        if values and len(values) > 2:
            lengths = [b - a for a, b in zip(values, values[1:], strict=False) if b > a]
            return _ratio(lengths), f"{key} of the first training batch"
    rows = _cpu_list(kwargs.get("position_ids"), 2)
    if not rows:
        return None
    lengths = []
    for row in rows:
        start = 0
        for i in range(1, len(row)):
            if row[i] == 0:
                lengths.append(i - start)
                start = i
        lengths.append(len(row) - start)
    if len(lengths) == len(rows):
        return None  # no restart: one document a row
    return _ratio(lengths), "position_ids restarting at 0 in the first training batch"


def _cpu_list(tensor: Any, ndim: int) -> list[Any] | None:
    if not isinstance(tensor, _torch.Tensor) or tensor.dim() != ndim:
        return None
    if tensor.device.type != "cpu" or tensor.dtype.is_floating_point:
        return None
    return tensor.tolist()


def _ratio(lengths: list[int]) -> float:
    total = sum(lengths)
    return sum(n * n for n in lengths) / total if total else 0.0


def on_first_forward(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    """Send the facts that refine the FLOPs count, once per root module."""
    chain = model.unwrap_chain(root)
    inner = chain[-1]
    if parts.left_out():
        root = inner  # the model a task module holds, without its EMA copy or teacher
    _fact("n_lookup_params", lookup_params(root), "every nn.Embedding weight, tied ones too")
    vectors = vector_params(root)
    if vectors is not None:
        _fact("n_vector_params", vectors, "one-dimensional weights: norms and biases")
    config = model.find_config(chain)
    where = f"config of {type(inner).__name__}"
    found = experts_of(root)
    if found["routed"]:
        modules = f"modules of {type(inner).__name__} named experts/gate/router/shared_experts"
        _fact("moe_routed_params", found["routed"], f"routed expert weights ({modules})")
        if found["router"]:
            _fact("moe_router_params", found["router"], f"router weights ({modules})")
        if found["shared"]:
            _fact("moe_shared_params", found["shared"], f"shared expert weights ({modules})")
        experts = model.config_int(config, EXPERT_KEYS) if config is not None else None
        top_k = model.config_int(config, TOP_K_KEYS) if config is not None else None
        if experts is None and "experts" in found:
            experts, where_e = found["experts"], modules
        else:
            where_e = where
        if top_k is None and "top_k" in found:
            top_k, where_k = found["top_k"], modules
        else:
            where_k = where
        if experts:
            _fact("moe_experts", experts, where_e)
        if top_k:
            _fact("moe_top_k", top_k, where_k)
    if config is not None:
        width = attn_width(config)
        if width is not None:
            _fact("attn_width", width[0], f"{width[1]}, {where}")
        n_layers = model.config_int(config, model.LAYER_KEYS)
        windows = windows_of(config, n_layers) if n_layers else None
        if windows is not None:
            _fact("attn_windows", windows, f"sliding_window / layer_types, {where}")
    packed = segment_len(tuple(args or ()), dict(kwargs or {}))
    if packed is not None:
        _fact("segment_len", packed[0], packed[1])


on_first_forward.probe = "architecture"  # type: ignore[attr-defined]


def attach(torch: Any) -> list[str]:
    global _torch
    _torch = torch
    steps.first_forward.append(on_first_forward)
    return ["architecture"]
