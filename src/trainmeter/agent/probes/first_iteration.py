"""What the first iteration shows about the job around the loop: the models it trains, and which
of the model's calls consumed data.

Why: a step can run more than one forward of the model on the same data (an LBFGS closure
evaluated 20 times, a discriminator run on a real batch and on the generator's fake one) and
can train more than one model (a generator and a discriminator, an actor and a critic, a
teacher and a student). Counting every call as a batch made samples per step 20x too high;
counting one model's parameters as the job's hid the others.

How: discovery's two global module hooks (`root_finder`) stay on after the root is found, for
the first iteration only (until the step after it begins: every optimizer of the iteration has
stepped by then), unless torch.compile is in use (they would be traced and their removal would
make dynamo recompile: a compiled module called meanwhile ends the watch before it runs). While
they are on:

- every outermost call of another module with parameters is noted, and the storages of its
  outputs: a root input that shares one is a batch a model made (a GAN's fake, detached or not),
  not data (`made_by_model`);
- the optimizers that step are noted. At the end, the modules whose parameters they stepped
  are the models trained, each named by the variable that holds it in the training code (else
  its class), with its parameters; parameters stepped that no called module holds are listed
  as such. Two or more: the `models` fact, and `n_params` becomes their sum (its note says so).
  An optimizer first seen later, joining a step (`late`: a discriminator stepped n_critic
  times before the generator's first step, a model whose optimizer starts after a warm-up),
  says the models again with its own; an optimizer made anew over the same models adds none.
- the data batches of the iteration (`steps` decides, cheaply, which root calls are new data:
  see `steps._new_data`; here each counts once in the iteration) give samples per step: the
  first data batch's size x their number.

Only metadata is read (shapes, storage addresses, `requires_grad`, parameter identities), and
only during the first iteration: the steady-state step runs none of this. Standard library only.
"""

from __future__ import annotations

import os
import sys
import weakref

from ...payloads import FACT
from ..sender import get_sender
from . import guard
from . import tokens as tok
from .step_state import state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: bound by `model.attach` (model imports the step probe, not the other way round)
count_params: Callable[..., tuple[int, int, int]] | None = None
#: the frozen parameters the model probe counted at the first forward (set there)
frozen_at_first: list[int] = []
unwrap: Callable[[Any], list[Any]] = lambda module: [module]  # noqa: E731
left_out: Callable[[], list[Any]] = list

_called: list[Any] = []  # weak references to the other modules called outermost, in order
_made: set[int] = set()  # storage addresses of those calls' outputs
_optimizers: list[Any] = []  # weak references to the optimizers that stepped
#: ids of the optimizers seen stepping since adoption: one that joins a step later and is not
#: here may train a model the first iteration did not see (`late`)
known: set[int] = set()
#: ids of the weights the optimizers stepped with a gradient in the first iteration: trained,
#: whatever their `requires_grad` says at the end (a model toggled off while another trains)
_trained: set[int] = set()
_marks: list[int] = []  # distinct data batches so far, at each optimizer step of the iteration
_seen: list[Any] = []  # (weak reference, version) of each data batch of the iteration
_distinct = [0]  # how many distinct data batches the iteration fed so far
#: the token tensors' dtype, kept from `state.ids_dtype` until the end (the fast path off)
ids_dtype: list[Any] = []
_first: dict[str, Any] = {}  # the first data batch: its size, token tensor shape
_active: list[bool] = []  # [True] while an iteration is watched (hooks on or not)
#: read on the training thread's general path: [True] while watching (the same list)
watching = _active
_ours = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def begin(root: Any, hooks: bool = True) -> bool:
    """At adoption: watch the first iteration. True when the global hooks may stay on for it
    (`hooks`, and torch.compile not in use); without them the models are found from the
    optimizers and the training code's variables alone, and no batch is known to be made."""
    reset()
    _active.append(True)
    if on_step not in _listeners():
        _listeners().append(on_step)
    if not hooks or _compiling_in_use(root):
        return False
    state.learning = True
    return True


def reset() -> None:
    state.learning = False
    _active.clear()
    if on_step in _listeners():
        _listeners().remove(on_step)
    _called.clear()
    _made.clear()
    _optimizers.clear()
    known.clear()
    _trained.clear()
    frozen_at_first.clear()
    _marks.clear()
    _first.clear()
    _seen.clear()
    _distinct[0] = 0
    ids_dtype.clear()


def _listeners() -> list[Any]:
    from .step_state import step_listeners

    return step_listeners


def _compiling_in_use(root: Any) -> bool:
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        if utils is not None and int(utils.counters["frames"]["total"]):
            return True
    except Exception:  # noqa: BLE001 - torch internals vary: assume compiled, watch nothing
        return True
    return any(_compiled(m) for m in unwrap(root)) or any(_compiled(m) for m in root.modules())


def _compiled(module: Any) -> bool:
    return hasattr(module, "_orig_mod") or getattr(module, "_compiled_call_impl", None) is not None


# ---- while the global hooks are on (root_finder.pre / post) --------------------------------


def called(module: Any) -> bool:
    """An outermost call of a module that is not the root. False: stop watching now (a
    compiled module: the hooks must be gone before dynamo traces it)."""
    if _compiled(module):
        return False
    if next(iter(module.parameters()), None) is not None and not any(
        r() is module for r in _called
    ):
        _called.append(weakref.ref(module))
    return True


def returned(module: Any, output: Any) -> None:
    """The outputs of that call: any later root input sharing their storage is made, not data."""
    if module is state.root or next(iter(module.parameters()), None) is None:
        return
    items = output.values() if isinstance(output, dict) else (
        output if isinstance(output, (tuple, list)) else (output,)
    )
    for item in items:
        ptr = _storage(item)
        if ptr:
            _made.add(ptr)


def _storage(x: Any) -> int:
    try:
        return int(x.untyped_storage().data_ptr()) if isinstance(x, state.tensor_cls) else 0
    except Exception:  # noqa: BLE001 - a fake or meta tensor: no address
        return 0


def made_by_model(x: Any) -> bool:
    """Whether `x` shares its storage with an output of another model in this iteration."""
    return bool(_made) and _storage(x) in _made


def data_batch(x: Any, tokens: Any) -> None:
    """A root call that fed new data this step: the first one's size makes samples per step,
    and the distinct ones of the iteration their number. Distinct over the whole iteration, not
    the step: a generator called on the same noise for the discriminator's update and then for
    its own, across the discriminator's step, feeds one batch (`steps` counts it again, since
    the same batch in the next step, a full-batch loop's, is that step's data)."""
    if not _first:
        _first["tokens_shape"] = tuple(tokens.shape) if tokens is not None else None
        _first["leading"] = _leading(x, tokens)
    if x is not None:
        version = x._version
        for ref, seen in _seen:
            if ref() is x and seen == version:
                return
        try:
            _seen.append((weakref.ref(x), version))
        except TypeError:
            pass
    _distinct[0] += 1


def forget_batches() -> None:
    """The batches fed so far were a dry run (`steps._forget_dry_run`): samples per step are
    read from the next one."""
    _first.clear()
    _seen.clear()
    _distinct[0] = 0
    _marks.clear()


def _leading(x: Any, tokens: Any) -> int | None:
    if tokens is not None:
        return None  # read at the end: the model probe may find the ids sequence-first
    if x is None:
        return None
    # a 1-D float input is one sample (a state vector); its length is its features
    if x.dim() == 1 and x.is_floating_point():
        return 1
    return int(x.shape[0]) if x.dim() > 0 else 1


def optimizer(opt: Any, joined: bool) -> None:
    """An optimizer stepped during the iteration (`joined`: it joined the step in progress)."""
    known.add(id(opt))
    _note_trained(opt)
    if not any(r() is opt for r in _optimizers):
        try:
            _optimizers.append(weakref.ref(opt))
        except TypeError:
            pass
    if joined:
        _marks.append(_distinct[0])


def _note_trained(opt: Any) -> None:
    """The weights `opt` just stepped with a gradient (once per optimizer step of the first
    iteration only: metadata, no tensor read)."""
    for group in getattr(opt, "param_groups", None) or ():
        for p in group.get("params", ()):
            if p.grad is not None:
                _trained.add(id(p))


def on_step(n: int) -> None:
    """A step listener while watching: the second step begins once the first iteration ended."""
    _made.clear()  # a model's output of an earlier step: its address may be reused by now
    if n >= 2:
        end()
    else:
        _marks.append(_distinct[0])


on_step.probe = "steps"  # type: ignore[attr-defined]


def end(at_exit: bool = False) -> None:
    """The first iteration is over: hooks off, then say what it showed."""
    active, learning = bool(_active), state.learning
    state.learning = False
    _active.clear()
    if on_step in _listeners():
        _listeners().remove(on_step)
    while learning and state.discovery:  # the hooks were kept on for the watch: now off
        try:
            state.discovery.pop().remove()
        except Exception:  # noqa: BLE001 - promise 1: a hook torch already dropped
            pass
    if ids_dtype:
        state.ids_dtype = ids_dtype.pop()  # `steps._root_call`'s fast path from now on
    if not active or state.root is None:
        return
    try:
        data = _marks[-1] if _marks else (_distinct[0] if at_exit else 0)
        _send_samples(data)
        if not guard.is_off("model"):
            _send_models()
    except Exception as exc:  # noqa: BLE001 - promise 1: say nothing rather than stop the run
        guard.off("model", exc)  # the models are the model probe's facts
    finally:
        _called.clear()
        _made.clear()
        _seen.clear()


def late(opt: Any) -> None:
    """An optimizer the first iteration did not see joins a step after it (`steps._step`'s join,
    which a loop of one optimizer never takes). Why: the watch ends as the second step begins,
    and in a loop that steps one model's optimizer twice before another's (D, D, G) the other
    model's optimizer has not stepped by then: N was the discriminator's alone. Its parameters
    not yet listed, the models are said again (the facts' latest value from a source is the one
    kept); an optimizer over models already listed (one made anew) changes nothing."""
    known.add(id(opt))
    if state.root is None or guard.is_off("model"):
        return
    try:
        listed = _stepped_params()
        _optimizers.append(weakref.ref(opt))
        _note_trained(opt)
        if {id(p) for group in opt.param_groups for p in group.get("params", ())} <= (
            listed | {id(p) for p in state.root.parameters()}
        ):
            return
        _send_models()
    except Exception as exc:  # noqa: BLE001 - promise 1: say nothing rather than stop the run
        guard.off("model", exc)


# ---- what the iteration showed -----------------------------------------------------------


def _send(key: str, value: Any, note: str) -> None:
    sender = get_sender()
    if sender is not None:
        sender.send(FACT.name, FACT.build(key=key, value=value, source="detected", note=note))


def _send_samples(data: int) -> None:
    """Samples per step on this rank: the first data batch's size (along the batch axis of the
    token tensor, once the model probe knows it) x the data batches of the first iteration."""
    shape = _first.get("tokens_shape")
    if shape is not None and len(shape) > tok.batch_axis:
        batch = int(shape[tok.batch_axis])
        axis = "dim 1, sequence-first" if tok.batch_axis == 1 else "dim 0"
    else:
        batch, axis = _first.get("leading"), "dim 0"
        if batch == 1 and shape is None:
            axis = "one unbatched sample"
    if not batch or data <= 0:
        return
    note = f"batch size {batch} of the first data batch ({axis}) x {data} data batch(es) a step"
    _send("samples_per_step", batch * data, note)


def at_exit() -> None:
    """The process ends within the first iteration: say what it showed."""
    if _active:
        end(at_exit=True)


def _send_models() -> None:
    """The models the first iteration trained, when there are two or more."""
    stepped = _stepped_params()
    root = state.root
    if not stepped or count_params is None:
        return
    root_ids = {id(p) for p in root.parameters()}
    names = _Names()
    entries = []
    chain = unwrap(root)
    inner = chain[-1]
    apart = _held_apart(root_ids)
    n, e, frozen = count_params(root, (*left_out(), *apart), _trained)
    name = names.of(chain)
    if apart:
        # the root less the models held apart: one child of it (the generator) is named so
        kept = {id(p) for m in apart for p in m.parameters()}
        rest = [c for c in inner.children() if {id(p) for p in c.parameters()} - kept]
        if len(rest) == 1 and next(iter(inner.parameters(recurse=False)), None) is None:
            inner = rest[0]
        if names.has(inner):
            name = names.of([inner])
    entries.append(_entry(name, inner, n, e, frozen))
    for module in apart:
        n, e, frozen = count_params(module, (), _trained)
        entries.append(_entry(names.of([module]), module, n, e, frozen))
    covered = set(root_ids)
    for module in _candidates(names):
        ids = {id(p) for p in module.parameters()}
        if ids & covered or not ids & stepped:
            continue  # part of a model already listed, or not trained
        covered |= ids
        n, e, frozen = count_params(module, (), _trained)
        entries.append(_entry(names.of([module]), module, n, e, frozen))
    rest = [p for p in _stepped_tensors() if id(p) not in covered]
    if rest:
        label = names.of_tensors(rest) or "parameters outside any model found"
        total = sum(int(p.numel()) for p in rest)
        entries.append({"name": label, "class": "Parameter", "params": total})
    if len(entries) < 2:
        if frozen_at_first and entries[0]["frozen"] != frozen_at_first[0]:
            _send(
                "n_frozen_params",
                entries[0]["frozen"],
                "parameters with requires_grad=False that no optimizer stepped in the first "
                f"iteration ({frozen_at_first[0]:,} were off at the first forward: a part "
                "switched off while another part's optimizer stepped is trained)",
            )
        return
    listed = ", ".join(f"{x['name']} ({x['class']}) {x['params']:,}" for x in entries)
    _send("models", entries, f"{len(entries)} models trained together: {listed}")
    total = sum(x["params"] for x in entries)
    _send(
        "n_params",
        total,
        f"parameters of the {len(entries)} models trained together, each once: {listed}",
    )
    _send(
        "n_embedding_params",
        sum(x.get("embedding", 0) for x in entries),
        f"nn.Embedding tables used only as lookups, in the {len(entries)} models",
    )
    _send(
        "n_frozen_params",
        sum(x.get("frozen", 0) for x in entries),
        f"parameters with requires_grad=False, in the {len(entries)} models",
    )


def _held_apart(root_ids: set[int]) -> list[Any]:
    """Modules inside the root that are models of their own: called outside the root's forward
    in the iteration, and trained by optimizers that step nothing else of the root while another
    optimizer steps the rest. Why: a LightningModule holds the generator and the discriminator
    it trains (`self.generator`, `self.discriminator`, each with its optimizer), and its forward
    runs the generator alone: the root was the module, one 'model' of both. A model trained by
    two optimizers over its own parts (Muon and AdamW) calls those parts inside its forward,
    and stays one."""
    optimizers = [o for o in (r() for r in _optimizers) if o is not None]
    if len(optimizers) < 2:
        return []
    stepped = [
        {id(p) for group in o.param_groups for p in group.get("params", ())} for o in optimizers
    ]
    out: list[Any] = []
    for module in (r() for r in _called):
        if module is None or module is state.root:
            continue
        ids = {id(p) for p in module.parameters()}
        if not ids or not ids <= root_ids:
            continue
        mine = [ps for ps in stepped if ps & ids]
        others = [ps for ps in stepped if not ps & ids]
        if mine and all(ps & root_ids <= ids for ps in mine) and any(ps & root_ids for ps in others):
            if not any(ids & {id(p) for p in m.parameters()} for m in out):
                out.append(module)
    return out


def _entry(name: str, module: Any, n: int, e: int, frozen: int) -> dict[str, Any]:
    return {"name": name, "class": type(module).__name__, "params": n, "embedding": e,
            "frozen": frozen}


def _stepped_tensors() -> list[Any]:
    out, seen = [], set()
    for ref in _optimizers:
        opt = ref()
        for group in getattr(opt, "param_groups", None) or ():
            for p in group.get("params", ()):
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
    return out


def _stepped_params() -> set[int]:
    return {id(p) for p in _stepped_tensors()}


def _candidates(names: _Names) -> list[Any]:
    """The other modules called outermost in the iteration, then those the training code
    holds (when the hooks were off or a model was only ever called inside another)."""
    out = [m for m in (r() for r in _called) if m is not None]
    for module in names.modules():
        if all(module is not m for m in out):
            out.append(module)
    return out


class _Names:
    """Names the training code gives its modules: variables of its frames (innermost first)
    and of `__main__`, and one level into the objects and dicts they hold (`self.critic`)."""

    def __init__(self) -> None:
        self._by_id: dict[int, str] = {}
        self._objects: list[Any] = []
        module_cls = state.nn_module.Module if state.nn_module is not None else None
        frame = sys._getframe(1)
        scopes: list[dict[str, Any]] = []
        depth = 0
        while frame is not None and depth < 64:
            depth += 1
            path = frame.f_code.co_filename
            if not path.startswith(_ours) and f"{os.sep}torch{os.sep}" not in path:
                scopes.append(frame.f_locals)
                scopes.append(frame.f_globals)
            frame = frame.f_back
        main = sys.modules.get("__main__")
        if main is not None:
            scopes.append(vars(main))
        for scope in scopes:
            for key, value in list(scope.items())[:500]:
                if key.startswith("__"):
                    continue
                self._add(key, value, module_cls, nested=True)

    def _add(self, name: str, value: Any, module_cls: Any, nested: bool) -> None:
        try:
            self._take(name, value, module_cls, nested)
        except Exception:  # noqa: BLE001 - an object whose attributes raise: no name from it
            pass

    def _take(self, name: str, value: Any, module_cls: Any, nested: bool) -> None:
        if module_cls is not None and isinstance(value, module_cls):
            if id(value) not in self._by_id:
                self._by_id[id(value)] = name
                self._objects.append(value)
                if nested:
                    # its children by their attribute names: a module holding the models (a
                    # LightningModule's `self.generator` and `self.discriminator`)
                    for key, child in list(value._modules.items())[:64]:
                        if child is not None:
                            self._add(key, child, module_cls, nested=False)
            return
        if isinstance(value, state.tensor_cls):
            self._by_id.setdefault(id(value), name)
            return
        if not nested or isinstance(value, (str, bytes, int, float, type)):
            return
        if isinstance(value, dict):
            for key, item in list(value.items())[:64]:
                if isinstance(key, (str, int)):
                    self._add(f"{name}[{key!r}]", item, module_cls, nested=False)
            return
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value[:64]):
                self._add(f"{name}[{i}]", item, module_cls, nested=False)
            return
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict) and not callable(value):
            for key, item in list(attrs.items())[:64]:
                if not key.startswith("_"):
                    self._add(key, item, module_cls, nested=False)

    def of(self, chain: list[Any]) -> str:
        """The name of the first module of `chain` the code names, else its last one's class."""
        for module in chain:
            name = self._by_id.get(id(module))
            if name is not None:
                return name
        return type(chain[-1]).__name__

    def has(self, module: Any) -> bool:
        return id(module) in self._by_id

    def of_tensors(self, tensors: list[Any]) -> str:
        named = [self._by_id[id(t)] for t in tensors if id(t) in self._by_id]
        return ", ".join(named[:4])

    def modules(self) -> list[Any]:
        return list(self._objects)
