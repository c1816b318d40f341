"""`Plain`: what a mutable dataclass gave a class of named values (equality by its attributes,
a repr of them, no hash), for the classes on `tm`'s start-up paths that must not import
`dataclasses`: it imports `inspect`, ~8 ms of every replay, export and dashboard start
(`benchmarks/import_instructions.py`). The class keeps its own `__init__` and attributes."""

from __future__ import annotations


class Plain:
    """Equal to an instance of the very same class with equal attributes; unhashable, since
    mutable (as `@dataclass` made it); shown as `Name(attr=value, ...)` in assignment order,
    without the attributes named in `_unshown` (a snapshot too long to print)."""

    __slots__ = ()
    _unshown: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k}={v!r}" for k, v in vars(self).items() if k not in self._unshown
        )
        return f"{type(self).__name__}({shown})"
