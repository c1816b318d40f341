"""Run a callback right after a named module is imported, without importing it ourselves.

The agent must attach to torch (and to wandb, TensorBoard, MLflow, ...) only when the user's code
imports them: importing torch ourselves would cost seconds and could change the run. A finder at
the front of `sys.meta_path` sees the import, lets the normal machinery load the module, then
calls the callbacks registered for that name. A callback that raises is disabled alone.
"""

from __future__ import annotations

# _thread, not threading: threading (with collections and functools) costs ~3 ms in every
# Python the run starts, and a script that never starts a thread never needs it
import _thread
import importlib.machinery
import sys

TYPE_CHECKING = False  # importlib.abc and typing cost ~20 ms in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

    Callback = Callable[[ModuleType], None]

_callbacks: dict[str, list[Callback]] = {}
_lock = _thread.RLock()
_busy = _thread._local()  # threading.local is this


def _fire(name: str, module: ModuleType) -> None:
    with _lock:
        callbacks = _callbacks.pop(name, [])
    for callback in callbacks:
        try:
            callback(module)
        except Exception as exc:  # noqa: BLE001 - promise 1
            _warn_once(f"{getattr(callback, '__qualname__', callback)} failed on {name}: {exc!r}")


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"trainmeter: {message}; that probe is off, the run goes on", file=sys.stderr)


class _LoaderWrapper:
    """Delegates to the real loader; fires the callbacks once the module has run."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _fire(self._name, module)

    def __getattr__(self, attr: str) -> Any:  # get_data, get_filename, is_package, ...
        return getattr(self._loader, attr)


class _Finder:
    """First on `sys.meta_path`, it only wraps the loader of the names it watches."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _callbacks or getattr(_busy, "on", False):
            return None
        _busy.on = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
            if spec is None:
                for finder in sys.meta_path:
                    if finder is _FINDER or not hasattr(finder, "find_spec"):
                        continue
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        break
        finally:
            _busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _LoaderWrapper(spec.loader, fullname)
        return spec


_FINDER = _Finder()


def when_imported(name: str, callback: Callback) -> None:
    """Call `callback(module)` once `name` is imported; at once if it already is."""
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__spec__", None) is not None:
        try:
            callback(module)
        except Exception as exc:  # noqa: BLE001 - promise 1
            _warn_once(f"{getattr(callback, '__qualname__', callback)} failed on {name}: {exc!r}")
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
