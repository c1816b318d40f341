"""What every tap shares: wrapping a tracker's logging call, and shipping what it saw.

A tap wraps one method or function of a tracker the user already imported (wandb's `Run.log`,
TensorBoard's `add_scalar`, ...). The wrapper reads the numbers out of the call, then forwards the
call unchanged: same arguments, same return value, the tracker's own exceptions untouched. Why the
pieces look the way they do:

- Reading is cheap and lazy: a tuple appended to a list. The sender thread turns the list into
  `metric` records when it drains, exactly as `emit()` does, so a tapped loss costs about what a
  dict update costs and no JSON happens on the training thread.
- Only numbers and 0-dim CPU tensors are read (`emit.as_number`): a tensor on an accelerator is
  skipped without touching it, since reading it would synchronize the device (promise 1).
- Trackers call each other: HF `Trainer.log` calls `wandb.log`, `mlflow.log_metric` calls
  `MlflowClient.log_metric`, Lightning's loggers call `SummaryWriter.add_scalar`. One value the
  loop logged must be one record, so a thread-local flag makes only the outermost tapped call
  count.
- A tap whose own code fails turns itself off (alone), warns once, and the call still goes
  through: the run must never notice trainmeter.
- A tap is named in `hello`'s `probes` only once it wrapped something (its tracker was imported),
  not when its import hook was armed: the first wrap adds the name to `STATE.probes` and calls
  the `on_attach` callback (boot's: say `hello` again), so a loop that uses no tracker lists none.
"""

from __future__ import annotations

import _thread  # not threading: see sender.py
import sys

from ..outbox import put
from ..state import STATE
from ..values import as_number

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    Observe = Callable[[tuple[Any, ...], dict[str, Any]], None]

#: Attribute set on every wrapper, so a second install does not wrap a wrapper.
MARK = "__trainmeter_tap__"


_local = _thread._local()  # threading.local is this
#: Called with a tap's name the first time it attached (boot sets it to say `hello` again).
on_attach: Callable[[str], None] | None = None


def _announce(name: str) -> None:
    if name in STATE.probes:
        return
    STATE.probes.append(name)
    callback = on_attach
    if callback is not None:
        try:
            callback(name)
        except Exception:  # noqa: BLE001 - promise 1: the tracker's import goes on
            pass


def _optimizer_steps() -> int:
    """The optimizer steps the step probe counted; 0 before torch (the probe comes with it, and
    importing it here would cost every run's start-up the modules it needs)."""
    steps = sys.modules.get("trainmeter.agent.probes.steps")
    return steps.step_count() if steps is not None else 0  # type: ignore[attr-defined]


def step_or_current(step: Any) -> int | None:
    """The tracker's own step when the call gave one, else the optimizer steps the agent saw.

    A step given as a tensor is read like a value (`as_number`: a CPU tensor only), never
    through `__index__`, which on a CUDA tensor would synchronize the device.
    """
    if step is None or isinstance(step, bool):
        return _optimizer_steps()
    if isinstance(step, int):
        return step
    number = as_number(step)
    if number is not None and number.is_integer():
        return int(number)
    return _optimizer_steps()


def arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    """Positional argument `index` or keyword `name` of a call, None when absent."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


class Tap:
    """One tap: its name (the `via` of its records), its patches, and its on/off switch."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.enabled = True
        self.patched: list[tuple[Any, str, Any, bool]] = []  # owner, attr, original, own attr
        self._noted_device = False
        self._warned = False

    # ---- reading ------------------------------------------------------------------------

    def record(self, key: Any, value: Any, step: int | None) -> None:
        """Queue one value if it is a number on the host; skip anything else quietly."""
        number = as_number(value)
        if number is None:
            device = getattr(getattr(value, "device", None), "type", None)
            if device is not None and device != "cpu" and not self._noted_device:
                self._noted_device = True
                print(
                    f"trainmeter: {self.name} logged {key!s} as a tensor on {device}; it is not "
                    "read (that would synchronize the device). emit(name=value.item()) where "
                    "the loop already syncs gives trainmeter the value.",
                    file=sys.stderr,
                )
            return
        put(str(key), number, self.name, step)

    def record_all(self, items: Iterable[tuple[Any, Any]], step: int | None) -> None:
        for key, value in items:
            self.record(key, value, step)

    # ---- failing alone ------------------------------------------------------------------

    def fail(self, exc: BaseException) -> None:
        """Our own code failed: this tap goes off for good, with one line on stderr."""
        self.enabled = False
        if not self._warned:
            self._warned = True
            print(
                f"trainmeter: the {self.name} tap failed ({exc!r}); it is off, the run goes on",
                file=sys.stderr,
            )

    # ---- wrapping -----------------------------------------------------------------------

    def wrap(self, owner: Any, attr: str, observe: Observe | None) -> bool:
        """Replace `owner.attr` by a wrapper that calls `observe(args, kwargs)` then forwards.

        `observe` None makes a wrapper that only marks the call as "inside a tracker", so the
        calls it makes to other trackers are not counted twice. Returns whether it wrapped.
        """
        own = isinstance(owner, type) and attr in owner.__dict__
        original = owner.__dict__[attr] if own else getattr(owner, attr, None)
        if original is None or isinstance(original, (staticmethod, classmethod)):
            return False  # none of the calls we tap is one; binding them differs
        if not callable(original) or getattr(original, MARK, None):
            return False
        wrapper = _make_wrapper(self, original, observe)
        setattr(owner, attr, wrapper)
        self.patched.append((owner, attr, original, own or not isinstance(owner, type)))
        _announce(self.name)
        return True

    def unwrap(self) -> None:
        """Put every original back (tests, and a clean shutdown)."""
        while self.patched:
            owner, attr, original, own = self.patched.pop()
            if own:
                setattr(owner, attr, original)
            else:
                try:
                    delattr(owner, attr)
                except AttributeError:
                    pass
        if self.name in STATE.probes:
            STATE.probes.remove(self.name)
        self.enabled = True
        self._warned = False
        self._noted_device = False


def _make_wrapper(tap: Tap, original: Callable[..., Any], observe: Observe | None) -> Any:
    import functools  # here: a tracker was imported (the taps arm with no import of theirs)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_local, "inside", False):
            return original(*args, **kwargs)  # a tracker calling a tracker: counted already
        if observe is not None and tap.enabled:
            try:
                observe(args, kwargs)
            except Exception as exc:  # noqa: BLE001 - promise 1: our failure is ours alone
                tap.fail(exc)
        _local.inside = True
        try:
            return original(*args, **kwargs)
        finally:
            _local.inside = False

    setattr(wrapper, MARK, tap.name)
    return wrapper
