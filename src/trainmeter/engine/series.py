"""The loop's own curves (loss, lr, grad norm...), latest value per key plus a bounded history.

Two keys may name the same canonical series (`loss` from the loop's `emit`, `train/loss` from a
wandb tap). The one shown is the emitted one over the tapped one, then the most recent. The
series is taken from the lowest rank that logs it: rank 0 when it does, else the rank that
does (with pipeline parallelism the loss is logged on the last rank only). The
history is kept to at most `MAX_POINTS` per key by dropping every other point when full, so
memory stays flat however long the run.
"""

from __future__ import annotations

from typing import Any

from . import series_names
from .facts import rank
from .section import Section

MAX_POINTS = 1024


class _Series:
    __slots__ = (
        "value", "count", "source", "via", "seq", "step", "points", "stride", "_skip", "rank",
    )

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.value = 0.0
        self.count = 0
        self.source = "tapped"
        self.via: str | None = None
        self.seq = 0
        self.step: int | None = None
        self.points: list[tuple[float, float]] = []
        self.stride = 1
        self._skip = 0

    def add(self, x: float, value: float) -> None:
        self._skip += 1
        if self._skip < self.stride:
            return
        self._skip = 0
        self.points.append((x, value))
        if len(self.points) >= MAX_POINTS:
            del self.points[1::2]
            self.stride *= 2


class SeriesStore:
    def __init__(self) -> None:
        self._series: dict[str, _Series] = {}
        self._seq = 0
        self._explicit_train = False

    def add(
        self,
        key: str,
        value: float,
        via: str | None,
        emitted: bool,
        step: Any,
        x: float,
        from_rank: int = 0,
    ) -> None:
        """One reported value from rank `from_rank`; `x` is the step the value belongs to (the curve's)."""
        series = self._series.get(key)
        if series is not None and from_rank > series.rank:
            return  # a lower rank logs this key too: its copy is the one kept
        if series is None or from_rank < series.rank:
            series = self._series[key] = _Series(from_rank)
            if series_names.canonical(key) == "train_loss":
                self._explicit_train = True
        self._seq += 1
        series.value = value
        series.count += 1
        series.source = "emitted" if emitted else "tapped"
        series.via = via or ("emit" if emitted else None)
        series.seq = self._seq
        if isinstance(step, int) and not isinstance(step, bool):
            series.step = step
        series.add(x, value)

    def _name(self, key: str) -> str:
        name = series_names.canonical(key)
        if name is None and key == series_names.BARE_LOSS and not self._explicit_train:
            return "train_loss"
        return name or key

    def _chosen(self) -> dict[str, tuple[str, _Series]]:
        out: dict[str, tuple[str, _Series]] = {}
        for key, series in self._series.items():
            name = self._name(key)
            old = out.get(name)
            order = (rank(series.source), -series.seq)
            if old is None or order < (rank(old[1].source), -old[1].seq):
                out[name] = (key, series)
        return out

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """{name: {value, key, count, source, via, step, mapped_by_name, rank}} (canonical
        names)."""
        out: dict[str, dict[str, Any]] = {}
        for name, (key, s) in sorted(self._chosen().items()):
            out[name] = {
                "value": s.value,
                "key": key,
                "count": s.count,
                "source": s.source,
                "via": s.via,
                "step": s.step,
                "mapped_by_name": name != key,
                "rank": s.rank,
            }
        return out

    def section(self) -> Section:
        return Section(values={"series": self.snapshot()})

    def curves(self) -> dict[str, dict[str, Any]]:
        """{name: {key, points: [[step, value], ...]}}: the shown key's bounded history."""
        return {
            name: {"key": key, "points": [list(p) for p in s.points]}
            for name, (key, s) in sorted(self._chosen().items())
        }
