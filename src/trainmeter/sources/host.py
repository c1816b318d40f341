"""`sample.host`: CPU and memory of the training process tree (the root and its descendants).

`cpu_s` is cumulative and does not drop when a worker exits: each live process counts its own
user+system time plus the time of the children it has already waited for (psutil's
`children_user`/`children_system`), so a data-loader worker that is reaped moves its seconds
into its parent instead of vanishing. Cores busy = delta cpu_s / delta t.
"""

from __future__ import annotations

from typing import Any

from ..payloads import SAMPLE_HOST

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency; doctor reports it if absent
    psutil = None  # type: ignore[assignment]

MAX_PIDS = 512
# A read that raced a reap is taken again; three reads in a row racing one is a tree that
# spawns and reaps faster than we can look, and the last read stands.
READ_TRIES = 3


class HostSampler:
    kind = SAMPLE_HOST.name

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.last_pids: list[int] = []
        self._root: Any = None

    def tree_pids(self) -> list[int]:
        """The live tree's pids as of the last sample (the GPU sampler matches NVML's list)."""
        return list(self.last_pids)

    def _root_proc(self) -> Any:
        # Keep the root's Process: psutil then checks it against pid reuse by its create time.
        if self._root is None:
            self._root = psutil.Process(self.root_pid)
        return self._root

    def sample(self) -> dict[str, Any]:
        if psutil is None:
            return {"missing": {"procs": "psutil is not installed"}}
        for _ in range(READ_TRIES):
            try:
                root = self._root_proc()
                if not root.is_running() or root.status() == psutil.STATUS_ZOMBIE:
                    raise psutil.NoSuchProcess(self.root_pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error as exc:
                self.last_pids = []
                gone = isinstance(exc, psutil.NoSuchProcess)
                reason = "the process has exited" if gone else str(exc)
                return {"procs": 0, "pids": [], "missing": {"cpu_s": reason, "rss_kb": reason}}
            out, vanished = self._read(procs)
            if not vanished:
                break
        return out

    def _read(self, procs: list[Any]) -> tuple[dict[str, Any], bool]:
        """Sum the tree's times and memory; say whether a listed process vanished meanwhile.

        The list runs parents before their descendants (psutil walks the tree breadth first),
        so a child reaped after its parent was read is missing from both: the parent's
        children_* times did not have it yet and the child is gone. Such a read is low by the
        child's whole CPU time for one sample (a worker's seconds dropped out and came back,
        read as a negative rate and then a spike), so `sample` reads the tree again.
        """
        cpu_s = 0.0
        rss = 0
        pids = []
        denied = 0
        vanished = False
        for proc in procs:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    mem = proc.memory_info()
            except psutil.NoSuchProcess:
                vanished = True
                continue
            except psutil.Error:
                denied += 1
                continue
            cpu_s += times.user + times.system
            cpu_s += getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
            rss += mem.rss
            pids.append(proc.pid)
        self.last_pids = pids
        out: dict[str, Any] = {
            "procs": len(pids),
            "pids": pids[:MAX_PIDS],
            "cpu_s": round(cpu_s, 3),
            "rss_kb": rss // 1024,
        }
        if denied:
            out["missing"] = {"denied": f"{denied} process(es) in the tree refused access"}
        return out, vanished

    def close(self) -> None:
        self._root = None


def process_tree(root_pid: int) -> list[int]:
    """The child and its descendants now; just the child when psutil cannot say."""
    try:
        import psutil

        root = psutil.Process(root_pid)
        return [root_pid, *(p.pid for p in root.children(recursive=True))]
    except Exception:  # noqa: BLE001 - the child may be gone already
        return [root_pid]
