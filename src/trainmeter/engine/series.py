"""The loop's own curves (loss, lr, grad norm...): the latest value per key, and the one rank rule.

The rank rule, the one every view and export follows (they draw the points the engine takes,
`Engine.take_points`): a key's values are taken from the lowest rank that logs it: rank 0
when it does, else the rank that does (with pipeline parallelism the loss is logged on the last
stage's rank only). Once a lower rank logs the key, its values replace the higher rank's from
then on. A record without a rank counts as rank 0.

Two keys may name the same canonical series (`loss` from the loop's `emit`, `train/loss` from a
wandb tap). The one shown is the emitted one over the tapped one, then the most recent. The
history of each curve is kept by the views that draw it (`views/history.py`), from the points.
"""

from __future__ import annotations

from typing import Any

from . import series_names
from .facts import rank
from .section import Section


class _Series:
    __slots__ = ("value", "count", "source", "via", "seq", "step", "rank")

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.value = 0.0
        self.count = 0
        self.source = "tapped"
        self.via: str | None = None
        self.seq = 0
        self.step: int | None = None


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
        from_rank: int = 0,
    ) -> bool:
        """One reported value from rank `from_rank`; True when it is taken (the rank rule)."""
        series = self._series.get(key)
        if series is not None and from_rank > series.rank:
            return False  # a lower rank logs this key too: its copy is the one kept
        if series is None or from_rank < series.rank:
            series = self._series[key] = _Series(from_rank)
            if series_names.canonical(key) == "train_loss":
                self._explicit_train = True
        seq = self._seq = self._seq + 1
        series.value = value
        series.count += 1
        series.source = "emitted" if emitted else "tapped"
        series.via = via or ("emit" if emitted else None)
        series.seq = seq
        if type(step) is int or isinstance(step, int) and not isinstance(step, bool):
            series.step = step  # (a plain int told by one `type`: a replay adds millions)
        return True

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
