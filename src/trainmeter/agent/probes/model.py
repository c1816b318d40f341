"""The model's shape, read once at its first training forward: N, E, frozen, L, d, T, experts, dp.

Why here and not from the user: MFU needs FLOPs per token, and every convention needs N − E, and
most need L, d and T. The root module already holds all of it: parameters (tied weights once),
`nn.Embedding` tables, and, for Hugging Face style models, a `config` with the layer count and
width. Wrappers (DDP's `.module`, FSDP's `_fsdp_wrapped_module`, torch.compile's `_orig_mod`,
Lightning's `_forward_module`) and a LightningModule's inner model are looked through for the
config and the process group; parameters are counted on the root itself, which already yields
the wrapped model's parameters, at their full (unsharded) size under FSDP1, FSDP2 and tensor
parallelism. Reading shapes and counts touches no tensor value and gathers nothing.
"""

from __future__ import annotations

from typing import Any

from ...payloads import FACT
from ..sender import get_sender
from . import first_iteration, parts, steps, structure
from . import tokens as tok

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
#: An encoder-decoder's layers: T5 (`num_layers` + `num_decoder_layers`), BART, Marian and
#: Whisper (`encoder_layers` + `decoder_layers`).
ENCODER_LAYER_KEYS = ("encoder_layers", "num_encoder_layers", *LAYER_KEYS)
DECODER_LAYER_KEYS = ("decoder_layers", "num_decoder_layers")
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
        if inner is None:
            inner = parts.inner_of(chain[-1])  # a task module's model (see `parts`)
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


def config_layers(config: Any) -> tuple[int | None, str]:
    """L from a config, and how: an encoder-decoder (`is_encoder_decoder`, which Hugging Face
    clears for an encoder or a decoder built alone) counts both stacks, as the structure rule
    counts `nn.Transformer`'s; any other model its one layer count."""
    if _get(config, "is_encoder_decoder") is True:
        encoder = config_int(config, ENCODER_LAYER_KEYS)
        decoder = config_int(config, DECODER_LAYER_KEYS)
        if encoder is not None and decoder is not None:
            return encoder + decoder, f" (encoder {encoder} + decoder {decoder} layers)"
    return config_int(config, LAYER_KEYS), ""


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


def _numel(p: Any, full: dict[int, int]) -> int:
    """Elements of the whole (unsharded) parameter. A DTensor (`fully_shard`, tensor
    parallel) answers `numel()` with its global shape already; an FSDP1 FlatParameter carries
    its unsharded size; an original parameter under FSDP1 `use_orig_params=True` is a local
    slice whose full size `full` holds (from `_fsdp1_full_sizes`). Only shapes are read."""
    size = full.get(id(p))
    if size is not None:
        return size
    flat = getattr(p, "_unpadded_unsharded_size", None)  # FSDP1 flat parameter, sharded here
    if flat is not None:
        n = 1
        for dim in flat:
            n *= int(dim)
        return n
    return int(p.numel())


def _ptr(p: Any) -> tuple[int, tuple[int, ...]] | None:
    """Storage identity of a weight: its data pointer with its shape (a FlatParameter and the
    first view into it share a pointer but are not tied); None when there is none to read
    (an empty local shard, a DTensor, a meta or fake tensor: identity by object is enough)."""
    try:
        if p.numel() == 0:
            return None
        ptr = int(p.data_ptr())
        return (ptr, tuple(p.shape)) if ptr else None
    except Exception:  # noqa: BLE001 - fake, meta or wrapper tensors
        return None


def _fsdp1_full_sizes(root: Any) -> tuple[dict[int, int], set[int]]:
    """id(original parameter) -> its full size, for every FSDP1 FlatParameter under `root`;
    and the ids of the weights FSDP1 recorded as shared (tied), since without
    `use_orig_params` a tied head's weight is no longer a parameter of its module.

    With `use_orig_params=True` each rank's original parameters are views of its local shard
    (some empty), so their `numel()` undercounts N; the FlatParameter records every original
    parameter's shape (`_shapes`, one per `_param_infos` entry, and shared ones in
    `_shared_param_infos`). Shapes only: nothing is gathered.
    """
    sizes: dict[int, int] = {}
    tied: set[int] = set()
    for module in root.modules():
        flat = getattr(getattr(module, "_handle", None), "flat_param", None)
        infos = getattr(flat, "_param_infos", None)
        shapes = getattr(flat, "_shapes", None)
        if not infos or not shapes:
            continue
        for info, shape in zip(infos, shapes, strict=False):
            n = 1
            for dim in shape:
                n *= int(dim)
            param = getattr(info.module, info.param_name, None)
            if param is not None:
                sizes[id(param)] = n
        for shared in getattr(flat, "_shared_param_infos", None) or ():
            param = getattr(shared.module, shared.param_name, None)
            prim = getattr(shared.prim_module, shared.prim_param_name, None)
            if param is not None and id(prim) in sizes:
                sizes[id(param)] = sizes[id(prim)]
            tied.update((id(param), id(prim)))
    return sizes, tied


def count_params(
    root: Any, skip: tuple[Any, ...] = (), trained: set[int] | None = None
) -> tuple[int, int, int]:
    """(N, E, frozen): each weight once (by identity, and by storage when it has one); E holds
    embedding tables that no other module also registers (a table tied to the output head is
    a matmul weight, so it stays in N − E). Modules in `skip` (children found not to be part
    of the model: `parts`) are left out. `trained` (ids of weights an optimizer stepped with a
    gradient, `first_iteration`): those are not frozen, whatever their flag says now (a GAN's
    discriminator switched off while the generator trains: Lightning's `toggle_optimizer`)."""
    full, tied = _fsdp1_full_sizes(root)
    left_out = {id(m) for s in skip for m in s.modules()}
    modules = [m for m in root.modules() if id(m) not in left_out]
    seen_ids: set[int] = set()
    seen_ptrs: set[Any] = set()
    total = frozen = 0
    for p in (p for m in modules for p in m.parameters(recurse=False)):
        ptr = _ptr(p)
        if id(p) in seen_ids or (ptr and ptr in seen_ptrs):
            continue
        seen_ids.add(id(p))
        if ptr:
            seen_ptrs.add(ptr)
        n = _numel(p, full)
        total += n
        if not p.requires_grad and (trained is None or id(p) not in trained):
            frozen += n
    lookup_types = (_torch.nn.Embedding, _torch.nn.EmbeddingBag)
    tables: dict[int, Any] = {}
    other_ids: set[int] = set()
    other_ptrs: set[Any] = set()
    for module in modules:
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
    counted_ptrs: set[Any] = set()
    for key, weight in tables.items():
        ptr = _ptr(weight)
        if key in other_ids or key in tied:
            continue
        if ptr and (ptr in other_ptrs or ptr in counted_ptrs):
            continue
        if ptr:
            counted_ptrs.add(ptr)
        embedding += _numel(weight, full)
    return total, embedding, frozen


def data_parallel_degree(chain: list[Any], root: Any = None) -> tuple[int, str] | None:
    """How many ranks hold a different slice of the batch, and where that was read. Local
    queries only (group and mesh sizes), never a collective.

    - DDP and FSDP1: the wrapper's `process_group`; FSDP1's hybrid strategies shard within
      that group and replicate across `_inter_node_pg`, so dp is the product of the two.
    - `fully_shard` (FSDP2): the data-parallel mesh its parameter groups keep
      (`mesh_info.mesh`): 1-D for FSDP, replicate x shard for HSDP, and only the data
      dimensions of a larger mesh (a tensor-parallel dimension is not in it).
    """
    size = _torch.distributed.get_world_size
    for module in chain:
        name = type(module).__name__
        group = getattr(module, "process_group", None)
        if name in DP_WRAPPERS and group is not None:
            n = int(size(group))
            inter = getattr(module, "_inter_node_pg", None)
            strategy = str(getattr(module, "sharding_strategy", ""))
            if inter is not None and "HYBRID" in strategy:
                return n * int(size(inter)), f"{name} hybrid shard x replicate groups"
            return n, f"{name} process group"
    mesh = _fully_shard_mesh(root if root is not None else chain[0])
    if mesh is not None:
        return int(mesh.size()), "fully_shard data-parallel mesh"
    return None


def _fully_shard_mesh(root: Any) -> Any:
    """The data-parallel DeviceMesh of the first `fully_shard` module under `root`, or None."""
    for module in root.modules():
        get_state = getattr(module, "_get_fsdp_state", None)
        if get_state is None:
            continue
        state = get_state()
        groups = getattr(state, "_fsdp_param_groups", None)
        if groups is None:  # torch before the list: one group or None
            one = getattr(state, "_fsdp_param_group", None)
            groups = [one] if one is not None else []
        for group in groups:
            mesh = getattr(getattr(group, "mesh_info", None), "mesh", None)
            if mesh is not None:
                return mesh
    return None


def _fact(key: str, value: Any, note: str) -> None:
    sender = get_sender()
    if sender is not None:
        sender.send(FACT.name, FACT.build(key=key, value=value, source="detected", note=note))


# ---- T from what the first sequence layer is fed (see `structure`) ------------------------

_structure: structure.Structure | None = None
_seq_hook: list[Any] = []  # the one-shot pre-hook's handle while it waits for its first call
_seq_fed: int | None = None  # T as the sequence layer was fed
_tokens_shape: tuple[int, ...] | None = None  # the first token tensor's shape (None: not yet)
_seq_sent = False


def _compiled(chain: list[Any]) -> bool:
    return any(
        hasattr(m, "_orig_mod") or getattr(m, "_compiled_call_impl", None) is not None
        for m in chain
    )


def on_adopt(root: Any) -> None:
    """Before the root's first forward: read its structure, and arm the one-shot hook on its
    first sequence layer (not under torch.compile, where a hook would be traced)."""
    global _structure, _seq_fed, _tokens_shape, _seq_sent
    _remove_seq_hook()
    _seq_fed, _tokens_shape, _seq_sent = None, None, False
    tok.batch_axis = 0  # until this root's sequence layer says otherwise
    chain = unwrap_chain(root)
    _structure = structure.read(chain[-1], _torch)
    module = _structure.seq_module
    if not _compiled(chain) and not _compiled(list(root.modules())):
        parts.watch(chain[-1], _torch.is_grad_enabled, steps.compiling)
        if module is not None:
            _seq_hook.append(module.register_forward_pre_hook(_on_seq_input, with_kwargs=True))
    else:
        parts.reset()


on_adopt.probe = "model"  # type: ignore[attr-defined]


def _settle_parts(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    """First of the first-forward listeners: leave out the frozen children that did not run
    (`parts`), so that every probe after this one reads the model without them."""
    global _structure
    left_out = parts.settle(unwrap_chain(root)[-1])
    if not left_out or _structure is None:
        return
    old = _structure.seq_module
    _structure = structure.read(unwrap_chain(root)[-1], _torch, tuple(left_out))
    if _seq_hook and old is not _structure.seq_module:
        # the hooked layer was in a part left out and never ran: read T at the next forward
        _remove_seq_hook()
        if _structure.seq_module is not None:
            hook = _structure.seq_module.register_forward_pre_hook(_on_seq_input, with_kwargs=True)
            _seq_hook.append(hook)


_settle_parts.probe = "model"  # type: ignore[attr-defined]


def _remove_seq_hook() -> None:
    while _seq_hook:
        _seq_hook.pop().remove()


def _on_seq_input(module: Any, args: Any, kwargs: Any) -> None:
    """The first call of the sequence layer: read T from its input's shape, then leave."""
    global _seq_fed
    if steps.compiling():
        return
    _remove_seq_hook()
    if _structure is not None and _structure.seq_first is not None:
        _seq_fed = structure.seq_len_fed(module, _structure.seq_first, args, kwargs)
    _settle_seq_len()


def _settle_seq_len() -> None:
    """Send T once both the token tensor and the sequence layer's input have been seen (in
    either order: the first forward is counted after it ran), or once it is clear the layer's
    input will not be seen (no sequence layer, a compiled model)."""
    global _seq_sent
    st = _structure
    if _seq_sent or _tokens_shape is None or st is None:
        return
    layer = type(st.seq_module).__name__ if st.seq_module is not None else ""
    shape = _tokens_shape
    if _seq_fed is not None:
        layout = "(T, B, ...)" if st.seq_first else "(B, T, ...)"
        _seq_sent = True
        _fact("seq_len", _seq_fed, f"what its first {layer} was fed, read as {layout}")
        if len(shape) == 2 and shape[0] == _seq_fed and shape[1] != _seq_fed:
            tok.batch_axis = 1  # the token tensor is sequence-first too: its batch is axis 1
        return
    if _seq_hook:
        return  # the layer has not run yet: its first call will settle T
    if len(shape) != 2:
        return  # no token tensor: T only from a sequence layer's input
    _seq_sent = True
    if st.seq_module is not None and st.seq_first is not None:
        axis = 0 if st.seq_first else 1
        tok.batch_axis = 1 - axis
        layout = "(T, B)" if st.seq_first else "(B, T)"
        note = f"token tensor read as {layout}, the layout of its first {layer}"
        _fact("seq_len", int(shape[axis]), note)
        return
    _fact("seq_len", int(shape[1]), f"second dimension of the first token tensor ({st.reason})")


def _structural(key: str) -> bool:
    """L or d from the structure when the config did not say it; False when it cannot say."""
    st = _structure
    value = None if st is None else st.layers if key == "n_layers" else st.width
    if value is not None and st is not None:
        _fact(key, value, st.note)
        return True
    return False


def on_first_forward(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    """Send what the model says about itself, once per root module."""
    global _tokens_shape
    chain = unwrap_chain(root)
    inner = chain[-1]
    if _structure is None:
        on_adopt(root)  # a root adopted before this probe attached
        parts.reset()  # its first forward has run: too late to watch its children
    left_out = tuple(parts.left_out())
    total, embedding, frozen = count_params(root, left_out)
    note = f"parameters of {type(inner).__name__}, tied weights once"
    if left_out:
        names = ", ".join(sorted({type(m).__name__ for m in left_out}))
        note += f" (not the frozen {names} it holds, never run with gradients on)"
    _fact("n_params", total, note)
    _fact("n_embedding_params", embedding, "nn.Embedding tables used only as lookups")
    _fact("n_frozen_params", frozen, "parameters with requires_grad=False")
    first_iteration.frozen_at_first[:] = [frozen]  # said again if the iteration trains some
    _tokens_shape = tuple(tokens.shape) if tokens is not None else ()
    _settle_seq_len()
    config = find_config(chain)
    where = f"config of {type(inner).__name__}"
    missing = []
    layers, how = config_layers(config) if config is not None else (None, "")
    width = config_int(config, WIDTH_KEYS) if config is not None else None
    for key, value, note in (("n_layers", layers, where + how), ("d_model", width, where)):
        if value is not None:
            _fact(key, value, note)
        elif not _structural(key):
            missing.append(key)
    if config is not None:
        experts = config_int(config, EXPERT_KEYS)
        if experts is not None and experts > 1:
            _fact("moe_experts", experts, where)
    if missing:
        flags = " and ".join({"n_layers": "--layers", "d_model": "--d-model"}[k] for k in missing)
        why = _structure.reason if _structure is not None and _structure.reason else "not found"
        _fact("shape_unknown", f"{', '.join(missing)}: {why}", f"declare {flags}")
    dp = data_parallel_degree(chain, root)
    if dp is not None:
        _fact("dp", dp[0], f"size of the {dp[1]}")


on_first_forward.probe = "model"  # type: ignore[attr-defined]


def attach(torch: Any) -> list[str]:
    global _torch
    _torch = torch
    # the first iteration's models are counted as the root is (the step probe cannot import
    # this module: it imports the step probe)
    first_iteration.count_params = count_params
    first_iteration.unwrap = unwrap_chain
    first_iteration.left_out = parts.left_out
    steps.adopted.append(on_adopt)
    steps.first_forward.insert(0, _settle_parts)
    steps.first_forward.append(on_first_forward)
    return ["model"]
