"""The step probe under torch.compile: being invisible to dynamo, and counting a module compiled
in place from outside its compiled call.

- `compiling_check` gives the cheapest test dynamo folds to a constant while it traces; every
  hook of ours returns at once on it, so it adds no graph break, guard or recompile.
- `nn.Module.compile` is wrapped (the class, once): a module compiled in place gets its
  `_compiled_call_impl` behind a shim that first runs the probe's eager pre-call (`pre`), since
  dynamo would otherwise trace the probe inside the compiled call. The shim holds the module
  weakly, so nothing of ours keeps it alive.
- An optimizer step inside a compiled function cannot be counted without a graph break: when
  dynamo traces the step hook, `note_compiled_step` has dynamo run `compiled_step` at compile
  time (`comptime`), which turns the steps probe off with that reason, once.
Standard library only; torch arrives as an argument.
"""

from __future__ import annotations

import functools
import sys
import weakref

from .. import importhook
from . import guard

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_comptime: Any = None  # torch._dynamo.comptime.comptime: runs a function at compile time


def compiling_check(torch: Any) -> Callable[[], bool]:
    """The cheapest test dynamo folds to a constant True while it traces: torch's
    `is_dynamo_compiling` (a bare `return False` when not tracing, half the cost of
    `is_compiling`, which also asks TorchScript). Both are in dynamo's table of tracing-state
    functions; older torch has only the second."""
    compiler = getattr(torch, "compiler", None)
    return (
        getattr(compiler, "is_dynamo_compiling", None)
        or getattr(compiler, "is_compiling", None)
        or bool
    )


def install(
    torch: Any,
    pre: Callable[[Any, tuple[Any, ...], dict[str, Any]], None],
    fail: Callable[[BaseException], None],
) -> None:
    """Wrap `nn.Module.compile` (once) and take dynamo's `comptime` when dynamo is imported."""
    importhook.when_imported("torch._dynamo", _bind_comptime)
    module_cls = torch.nn.Module
    compile_method = getattr(module_cls, "compile", None)
    if compile_method is not None and not hasattr(compile_method, "__trainmeter_original__"):
        module_cls.compile = _wrap_compile(compile_method, pre, fail)


def _shim(module: Any, compiled_call: Any, pre: Callable[..., None]) -> Any:
    ref = weakref.ref(module)  # the module holds the shim: no cycle through it

    def call(*args: Any, **kwargs: Any) -> Any:
        owner = ref()
        if owner is not None:
            pre(owner, args, kwargs)
        return compiled_call(*args, **kwargs)

    call.__trainmeter_original__ = compiled_call  # type: ignore[attr-defined]
    return call


def _wrap_compile(original: Any, pre: Callable[..., None], fail: Callable[..., None]) -> Any:
    @functools.wraps(original)
    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        try:
            compiled_call = self.__dict__.get("_compiled_call_impl")
            if compiled_call is not None and not hasattr(compiled_call, "__trainmeter_original__"):
                self._compiled_call_impl = _shim(self, compiled_call, pre)
        except Exception as exc:  # noqa: BLE001 - promise 1
            fail(exc)
        return result

    compile.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return compile


def _bind_comptime(dynamo: Any) -> None:
    global _comptime
    module = sys.modules.get("torch._dynamo.comptime")
    _comptime = getattr(module, "comptime", None)


def note_compiled_step() -> None:
    """Called while dynamo traces the step hook: have it run `compiled_step` at compile time."""
    if _comptime is not None:
        _comptime(compiled_step)


def compiled_step(ctx: Any = None) -> None:
    """Run by dynamo at compile time (`comptime`), never in the compiled step itself."""
    reason = (
        "optimizer.step() runs inside torch.compile, where the step hook cannot run without a "
        "graph break: optimizer steps and tokens are not counted"
    )
    guard.off("steps", reason)
    guard.off("tokens", "the steps probe it rides on is off")
