"""The model's shape, read once at its first training forward: N, E, frozen, L, d, T, experts, dp.

Why here and not from the user: MFU needs FLOPs per token, and every convention needs N − E, and
most need L, d and T. The root module already holds all of it: parameters (tied weights once),
`nn.Embedding` tables, and, for Hugging Face style models, a `config` with the layer count and
width. Wrappers (DDP's `.module`, FSDP's `_fsdp_wrapped_module`, torch.compile's `_orig_mod`,
are looked through for the config and the process group; parameters are counted on the root
itself, which already yields the wrapped model's parameters. Reading shapes and counts touches no tensor value.
"""

from __future__ import annotations

from typing import Any

from ..sender import get_sender
from . import steps

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
#: `_forward_module`: Lightning's wrapper around the LightningModule under DDP/FSDP strategies.
WRAPPER_ATTRS = ("_orig_mod", "module", "_fsdp_wrapped_module", "_forward_module")
DP_WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel")

_torch: Any = None


def unwrap_chain(module: Any, limit: int = 8) -> list[Any]:
    """The module and the modules it wraps, outermost first."""
    chain = [module]
    nn_module = _torch.nn.Module
    while len(chain) < limit:
        inner = None
        for attr in WRAPPER_ATTRS:
            candidate = getattr(chain[-1], attr, None)
            if isinstance(candidate, nn_module) and candidate not in chain:
                inner = candidate
                break
        if inner is None:
            inner = _lightning_inner(chain[-1])
        if inner is None or inner in chain:
            break
        chain.append(inner)
    return chain


def _is_lightning(module: Any) -> bool:
    return any(cls.__name__ == "LightningModule" for cls in type(module).__mro__)


def _lightning_inner(module: Any) -> Any:
    """The model a LightningModule builds inside itself (`self.model = GPT(config)`): the child
    that carries a config, else the child holding the most parameters. Counting reads shapes."""
    if not _is_lightning(module):
        return None
    best, best_n = None, 0
    for child in module.children():
        if any(_get(child, attr) is not None for attr in CONFIG_ATTRS[:3]):
            return child
        n = sum(int(p.numel()) for p in child.parameters())
        if n > best_n:
            best, best_n = child, n
    return best


def _get(config: Any, key: str) -> Any:
    if isinstance(config, dict):
        return config.get(key)
    try:
        return getattr(config, key, None)
    except Exception:  # noqa: BLE001 - a config with a property that raises
        return None


def config_int(config: Any, keys: tuple[str, ...]) -> int | None:
    """The first key that holds a positive int (bool excluded); also looks in `text_config`."""
    for cfg in (config, _get(config, "text_config")):
        if cfg is None:
            continue
        for key in keys:
            value = _get(cfg, key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


#: Where models keep their hyper-parameters: HF and nanoGPT `config`, TorchTitan `model_args`,
#: Meta's reference Llama `params`; last, a LightningModule's saved `hparams`.
CONFIG_ATTRS = ("config", "model_args", "params", "hparams")


def find_config(chain: list[Any]) -> Any:
    nn_module = _torch.nn.Module
    for attr in CONFIG_ATTRS:
        for module in chain:
            config = getattr(module, attr, None)
            if config is not None and not isinstance(config, nn_module) and not callable(config):
                return config
    return None


def _numel(p: Any) -> int:
    full = getattr(p, "_unpadded_unsharded_size", None)  # FSDP1 flat parameter, sharded here
    if full is not None:
        n = 1
        for dim in full:
            n *= int(dim)
        return n
    return int(p.numel())


def _ptr(p: Any) -> int:
    try:
        return int(p.data_ptr())
    except Exception:  # noqa: BLE001 - fake or meta tensors: identity is enough
        return 0


def count_params(root: Any) -> tuple[int, int, int]:
    """(N, E, frozen): each weight once (by identity, and by storage when it has one); E holds
    embedding tables that no other module also registers (a table tied to the output head is
    a matmul weight, so it stays in N − E)."""
    seen_ids: set[int] = set()
    seen_ptrs: set[int] = set()
    total = frozen = 0
    for p in root.parameters():
        ptr = _ptr(p)
        if id(p) in seen_ids or (ptr and ptr in seen_ptrs):
            continue
        seen_ids.add(id(p))
        if ptr:
            seen_ptrs.add(ptr)
        n = _numel(p)
        total += n
        if not p.requires_grad:
            frozen += n
    lookup_types = (_torch.nn.Embedding, _torch.nn.EmbeddingBag)
    tables: dict[int, Any] = {}
    other_ids: set[int] = set()
    other_ptrs: set[int] = set()
    for module in root.modules():
        if isinstance(module, lookup_types):
            weight = getattr(module, "weight", None)
            if weight is not None:
                tables[id(weight)] = weight
            continue
        for p in module.parameters(recurse=False):
            other_ids.add(id(p))
            ptr = _ptr(p)
            if ptr:
                other_ptrs.add(ptr)
    embedding = 0
    counted_ptrs: set[int] = set()
    for key, weight in tables.items():
        ptr = _ptr(weight)
        if key in other_ids or (ptr and (ptr in other_ptrs or ptr in counted_ptrs)):
            continue
        if ptr:
            counted_ptrs.add(ptr)
        embedding += _numel(weight)
    return total, embedding, frozen


def data_parallel_degree(chain: list[Any]) -> tuple[int, str] | None:
    """Ranks in the DDP/FSDP process group (a local query, no collective), and the wrapper."""
    for module in chain:
        name = type(module).__name__
        group = getattr(module, "process_group", None)
        if name in DP_WRAPPERS and group is not None:
            return int(_torch.distributed.get_world_size(group)), name
    return None


def _fact(key: str, value: Any, note: str) -> None:
    sender = get_sender()
    if sender is not None:
        sender.send("fact", {"key": key, "value": value, "source": "detected", "note": note})


def on_first_forward(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    """Send what the model says about itself, once per root module."""
    chain = unwrap_chain(root)
    inner = chain[-1]
    total, embedding, frozen = count_params(root)
    _fact("n_params", total, f"parameters of {type(inner).__name__}, tied weights once")
    _fact("n_embedding_params", embedding, "nn.Embedding tables used only as lookups")
    _fact("n_frozen_params", frozen, "parameters with requires_grad=False")
    if tokens is not None:
        _fact("seq_len", int(tokens.shape[1]), "second dimension of the first training batch")
    config = find_config(chain)
    if config is not None:
        where = f"config of {type(inner).__name__}"
        for key, keys in (("n_layers", LAYER_KEYS), ("d_model", WIDTH_KEYS)):
            value = config_int(config, keys)
            if value is not None:
                _fact(key, value, where)
        experts = config_int(config, EXPERT_KEYS)
        if experts is not None and experts > 1:
            _fact("moe_experts", experts, where)
    dp = data_parallel_degree(chain)
    if dp is not None:
        _fact("dp", dp[0], f"size of the {dp[1]} process group")


on_first_forward.probe = "model"  # type: ignore[attr-defined]


def attach(torch: Any) -> list[str]:
    global _torch
    _torch = torch
    steps.first_forward.append(on_first_forward)
    return ["model"]
