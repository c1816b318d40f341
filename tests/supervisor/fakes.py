"""Small stand-ins for the other parts, so the supervisor is tested on its own contracts."""

from __future__ import annotations

import hashlib
import json
from typing import Any


class FakeEngine:
    """Deterministic and order-sensitive: a digest of every record fed, in order, plus counts.
    Two engines fed the same records in the same order give the same snapshot; any difference
    in content or order shows."""

    def __init__(self, alerts: list[dict] | None = None) -> None:
        self._digest = hashlib.sha256()
        self.fed: list[dict] = []
        self.kinds: dict[str, int] = {}
        self.tokens = 0
        self.alerts = alerts if alerts is not None else []

    def feed(self, record: dict[str, Any]) -> None:
        self.fed.append(record)
        self._digest.update(json.dumps(record, sort_keys=True).encode())
        self.kinds[record["kind"]] = self.kinds.get(record["kind"], 0) + 1
        if record["kind"] == "step":
            self.tokens += record["d"].get("tokens", 0)

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        return {
            "digest": self._digest.hexdigest(),
            "kinds": dict(self.kinds),
            "tokens_seen": self.tokens,
            "alerts": list(self.alerts),
        }


#: A field of each sample kind the fake counts its calls in (a payload holds only its kind's
#: fields: `payloads.py`).
COUNTED = {"sample.gpu": "selected", "sample.host": "procs", "sample.node": "cores"}


class FakeSampler:
    def __init__(self, kind: str, payload: dict | None = None, fail: bool = False) -> None:
        self.kind = kind
        self.payload = payload or {}
        self.fail = fail
        self.calls = 0
        self.closed = False

    def sample(self) -> dict:
        self.calls += 1
        if self.fail:
            raise RuntimeError("sensor on fire")
        return {**self.payload, COUNTED[self.kind]: self.calls}

    def close(self) -> None:
        self.closed = True


class FakeWatcher:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[list[int], set[int]]] = []

    def tick(self, tree_pids: list[int], hello_pids: set[int]) -> list[dict]:
        self.calls.append((tree_pids, hello_pids))
        if self.fail:
            raise RuntimeError("watcher broke")
        silent = [p for p in tree_pids if p not in hello_pids]
        if silent and len(self.calls) == 1:
            return [{"key": "observe_only", "value": f"pid {silent[0]} has no agent",
                     "source": "detected"}]
        return []
