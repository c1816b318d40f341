"""After the child exits: log what the agents' rings hold and the socket never delivered.

Every process the agent runs in keeps its running step totals and its accepted values in a
memory-mapped file beside the ingest socket (`trainmeter.agent.ring` writes it). A process
killed by SIGKILL, leaving by `os._exit` or by a default SIGTERM never sends its last
records; the file still has them. So `tm`:

1. watches the records the socket delivers (`Delivered`, wrapped around the ingest sink): per
   process, the highest value number `q` and the step totals received;
2. maps every ring file before the socket directory is removed (`open_rings`);
3. once the socket is drained, writes for each process the steps and values above what was
   delivered (`recover`), marked `"recovered": true`, before `run.end`.

Each value carries its number, and the socket keeps order, so "above the highest received" is
exactly "never delivered": nothing is logged twice. The rare records (hello, facts, phases,
alerts) carry their own numbers (`r`); the ring keeps each until it was shipped, and `tm`
logs those whose number it never received, in their order. Steps are running totals: the missing part
is the ring's total less what the step records delivered. Values the agent refused because its
ring was full are counted there and logged as `agent_dropped_records`.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable
from typing import Any

from .. import records
from ..agent import ring as layout
from ..payloads import FACT, METRIC, STEP

_GAP = 64  # numbers a writer may have taken and not filled (killed between the two)


class Delivered:
    """What the socket delivered, per process id. Cheap: called for every record."""

    def __init__(self) -> None:
        self.last_q: dict[int, int] = {}
        #: pid -> [steps, tokens, real tokens, micro-batches], summed over its step records
        self.steps: dict[int, list[int]] = {}
        self.dropped_reported: dict[int, int] = {}
        #: pid -> [n, numbers above n]: the rare records received (every one up to n)
        self.rare: dict[int, list[Any]] = {}
        #: pid -> values received without a number: those its ring had no room for
        self.socket_values: dict[int, int] = {}
        #: Called with a pid whose next program (an exec, or a new process with a pid used
        #: before) set its ring aside, before anything of the new program is counted here:
        #: the set-aside ring is read against what was delivered until then (`recover_set_aside`)
        self.on_new_image: Callable[[int], None] | None = None

    def see(self, record: dict[str, Any]) -> bool:
        """Note what the record tells; False for a record that is not for the log (the new
        image's notice: it only marks where one program's records end and the next begin)."""
        pid = record.get("pid")
        q = record.get("q")
        if type(q) is int and q > self.last_q.get(pid, 0):  # type: ignore[arg-type]
            self.last_q[pid] = q  # type: ignore[index]
            return True
        r = record.get("r")
        kind = record.get("kind")
        if kind == FACT.name and type(pid) is int and record.get("src") == "agent":
            d = record.get("d") or {}
            if d.get("key") == layout.IMAGE_FACT:
                self._new_image(pid)
                if type(r) is int:
                    self._see_rare(pid, r)
                return False
        if type(r) is int:
            self._see_rare(pid, r)  # type: ignore[arg-type]
        if kind == METRIC.name and q is None and r is None:
            self.socket_values[pid] = self.socket_values.get(pid, 0) + 1  # type: ignore[index,call-overload]
            return True
        if kind == FACT.name:
            d = record.get("d") or {}
            if d.get("key") == "agent_dropped_records" and type(d.get("value")) is int:
                self.dropped_reported[pid] = d["value"]  # type: ignore[index]
            elif d.get("source") == "emitted" and q is None and r is None:
                self.socket_values[pid] = self.socket_values.get(pid, 0) + 1  # type: ignore[index,call-overload]
            return True
        if kind != STEP.name or record.get("src") != "agent":
            return True
        d = record.get("d") or {}
        totals = self.steps.get(pid)  # type: ignore[arg-type]
        if totals is None:
            totals = self.steps[pid] = [0, 0, 0, 0]  # type: ignore[index]
        for at, name in ((0, "k"), (1, "tokens"), (2, "real_tokens"), (3, "micro")):
            value = d.get(name)
            if type(value) is int:
                totals[at] += value
        return True

    def _new_image(self, pid: int) -> None:
        """Everything received from `pid` so far was its earlier program's: read that ring
        against it, then count the new program from nothing."""
        if self.on_new_image is not None:
            try:
                self.on_new_image(pid)
            except Exception:  # noqa: BLE001 - the ingest goes on; the ring is read at the end
                pass
        self.forget(pid)

    def forget(self, pid: int) -> None:
        for table in (self.last_q, self.steps, self.dropped_reported, self.rare, self.socket_values):
            table.pop(pid, None)  # type: ignore[attr-defined]

    def _see_rare(self, pid: int, r: int) -> None:
        seen = self.rare.get(pid)
        if seen is None:
            seen = self.rare[pid] = [0, set()]
        if r <= seen[0]:
            return
        above: set[int] = seen[1]
        above.add(r)
        while seen[0] + 1 in above:  # in order (the usual case) nothing stays in the set
            seen[0] += 1
            above.discard(seen[0])

    def rare_received(self, pid: int, r: int) -> bool:
        seen = self.rare.get(pid)
        return seen is not None and (r <= seen[0] or r in seen[1])

    def wrap(self, sink: Callable[[bytes, dict[str, Any]], None]) -> Callable[..., None]:
        """The ingest sink, watched."""

        def watched(line: bytes, record: dict[str, Any]) -> None:
            try:
                if not self.see(record):
                    return
            except Exception:  # noqa: BLE001 - a forged record must not stop the ingest
                pass
            sink(line, record)

        return watched


SPARES = 2  # spare ring files kept ready (`agent.ring.SPARE_PREFIX`)
#: spares are made only while the filesystem has this many times their size free: a small
#: $TMPDIR is not filled by tm, and the spares are for a disk that fills later
SPARE_ROOM_FACTOR = 64


def keep_spares(directory: str, want: int = SPARES) -> int:
    """Keep `want` spare ring files in the socket directory while there is room, so a process
    that cannot make its ring once the disk is full (a worker forked late, the program after an
    exec) takes one (`agent.ring`). Returns how many were made. Never raises."""
    try:
        names = os.listdir(directory)
        have = sum(1 for n in names if n.startswith(layout.SPARE_PREFIX) and not n.endswith(".tmp"))
        if have >= want:
            return 0
        st = os.statvfs(directory)
        size = sum(length for _, length in layout.SPARE_RESERVED)
        if st.f_bavail * st.f_frsize < SPARE_ROOM_FACTOR * size * want:
            return 0
    except OSError:
        return 0
    made, n = 0, 0
    while have + made < want and n < 1000:
        name = f"{layout.SPARE_PREFIX}{n}"
        n += 1
        if name in names:
            continue
        if not layout.make_spare(directory, name):
            break
        made += 1
    return made


def map_new_rings(directory: str, known: dict[tuple[int, int], mmap.mmap]) -> int:
    """Map the ring files in `directory` not in `known` (by device and inode) into it, so they
    stay readable if the directory is removed. Returns how many could not be mapped."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    failed = 0
    for name in names:
        if not name.startswith(layout.FILE_PREFIX):
            continue
        try:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            failed += 1
            continue
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) in known or st.st_size < layout.SLOTS_AT:
                continue
            known[(st.st_dev, st.st_ino)] = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            failed += 1
        finally:
            os.close(fd)
    return failed


def open_rings(directory: str) -> list[mmap.mmap]:
    """Map every ring file in the socket directory (read-only), so they can be read after the
    directory is gone. A file that is not a ring, or cannot be read, is left out."""
    maps: list[mmap.mmap] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return maps
    for name in names:
        if not name.startswith(layout.FILE_PREFIX):
            continue
        try:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_size >= layout.SLOTS_AT:
                maps.append(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
        except (OSError, ValueError):
            pass
        finally:
            os.close(fd)
    return maps


def recover_set_aside(
    directory: str,
    known: dict[tuple[int, int], Any],
    pid: int,
    delivered: Delivered,
    accept: Callable[[bytes, dict[str, Any]], None],
) -> int:
    """`pid` runs a new program (its first record is the new image's notice): log what the
    rings it set aside (`ring.<pid>.<image>`) hold and the socket never delivered, oldest
    first, against what was delivered until now. Each is then marked done in `known` (its
    value None), so the end of the run does not read it again. Returns the records written."""
    prefix = f"{layout.FILE_PREFIX}{pid}."
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix)]
    except OSError:
        return 0
    names.sort(key=lambda n: int(n[len(prefix):]) if n[len(prefix):].isdigit() else 1 << 62)
    written, first = 0, True
    for name in names:
        try:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            if key in known and known[key] is None:
                continue  # read already
            mm = known.get(key)
            if mm is None and st.st_size >= layout.SLOTS_AT:
                mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            continue
        finally:
            os.close(fd)
        known[key] = None
        if mm is not None:
            written += recover([mm], delivered if first else Delivered(), accept)
            first = False
    return written


def recover(
    maps: list[mmap.mmap],
    delivered: Delivered,
    accept: Callable[[bytes, dict[str, Any]], None],
) -> int:
    """Write, through `accept`, each ring's steps and values the socket never delivered.
    Returns how many records were written. Never raises.

    A pid may have several rings: the programs it ran one after the other (an exec), or
    processes that had the same pid. What was delivered since the last new-image notice was
    sent by the oldest of them not read yet (any later one's first record is its notice), so
    per pid the oldest ring (by its image number) is read against `delivered` and the others
    against nothing."""
    written = 0
    order: list[tuple[int, int, int]] = []
    for i, mm in enumerate(maps):
        header = layout.read_header(mm)
        h = header["h"] if header is not None else None
        order.append((h[layout.H_PID], h[layout.H_IMAGE], i) if h else (-1, 0, i))
    read: set[int] = set()
    for pid, _image, i in sorted(order):
        mm = maps[i]
        against = delivered if pid not in read else Delivered()
        read.add(pid)
        try:
            for record in _missing(mm, against):
                try:
                    line = records.encode(record)
                except records.RecordError:
                    continue  # a damaged slot (not a finite number): that one value only
                # JSON-native types only, so the dict is what a replay parses from the line
                accept(line.encode("utf-8"), record)
                written += 1
        except Exception:  # noqa: BLE001 - one damaged ring must not cost the others
            continue
        finally:
            with contextlib.suppress(Exception):
                mm.close()
    return written


def _missing(mm: mmap.mmap, delivered: Delivered) -> list[dict[str, Any]]:
    header = layout.read_header(mm)
    if header is None:
        return []
    h = header["h"]
    pid = h[layout.H_PID]
    rank = h[layout.H_RANK] if h[layout.H_RANK] >= 0 else None
    out: list[dict[str, Any]] = _missing_rare(mm, h, pid, delivered)
    kept = {rec["r"] for rec in out}
    floor = delivered.rare.get(pid, [0])[0]  # every number up to it was received
    last = min(max(h[layout.H_RARE_LAST], 0), floor + layout.RARE_BYTES)  # a damaged header: bounded
    rare_lost = sum(
        1
        for r in range(floor + 1, last + 1)
        if r not in kept and not delivered.rare_received(pid, r)
    )  # numbered, never delivered and not in the ring (its rare area was full)
    step = _missing_step(h, header["step_t"], delivered.steps.get(pid))
    if step is not None:
        out.append(records.make(
            STEP.name, STEP.build(**step), t=header["step_t"], src="agent", rank=rank, pid=pid
        ))
    out.extend(
        _missing_values(mm, h, pid, rank, delivered.last_q.get(pid, 0), header["reserved"])
    )
    full, keys, sender = (
        h[layout.H_DROPPED_FULL],
        h[layout.H_DROPPED_KEYS],
        h[layout.H_DROPPED_SENDER],
    )
    # values that found no room in the ring (a full disk) went by the socket alone: those that
    # never arrived are lost, counted here (the agent leaves them to this count)
    unsent = max(h[layout.H_SOCKET_ONLY] - delivered.socket_values.get(pid, 0), 0)
    if full + keys + sender + rare_lost + unsent > delivered.dropped_reported.get(pid, 0):
        fact = FACT.build(
            key="agent_dropped_records",
            value=full + keys + sender + rare_lost + unsent,
            source="detected",
            note=(
                f"{full} values refused with the agent's ring full (the receiver fell "
                f"{layout.CAPACITY} values behind), {keys} with its key table full or not storable, "
                f"{sender} records the sender could not deliver (receiver full at exit, or gone;"
                f" those its ring kept are in the log, recovered), {rare_lost} rare records"
                " neither delivered nor kept (the ring's area for them was full), "
                f"{unsent} values that found no room in the ring (its disk full) and never "
                "arrived by the socket"
            ),
        )
        t = out[-1]["t"] if out else header["step_t"]
        out.append(records.make(FACT.name, fact, t=t, src="agent", rank=rank, pid=pid))
    return out


def _missing_rare(
    mm: mmap.mmap, h: tuple[int, ...], pid: int, delivered: Delivered
) -> list[dict[str, Any]]:
    """The rare records the ring kept and the socket never delivered, in their order."""
    out: list[dict[str, Any]] = []
    for line in layout.read_rare(mm, h):
        try:
            record = records.decode(line.decode("utf-8"))
        except (records.RecordError, UnicodeDecodeError):
            continue  # a damaged entry: that one only
        r = record.get("r")
        if type(r) is not int or record.get("pid") != pid or delivered.rare_received(pid, r):
            continue
        if record.get("kind") == FACT.name and (record.get("d") or {}).get("key") == layout.IMAGE_FACT:
            continue  # a marker between programs, never logged
        record["recovered"] = True
        out.append(record)
    return out


def _missing_step(h: tuple[int, ...], t: float, got: list[int] | None) -> dict[str, Any] | None:
    """One step record for the steps the ring's totals count and the delivered step records do
    not (those after the last delivered, and those of a record that was never delivered: the
    agent does not count a step record as lost when its totals are here), or None."""
    steps = h[layout.H_STEPS]
    base = h[layout.H_BASE_STEPS]
    k_got, tokens, real, micro = got if got is not None else (0, 0, 0, 0)
    k = steps - base - k_got
    if k <= 0:
        return None
    d: dict[str, Any] = {
        "k": k,
        "n": steps,
        "micro": max(h[layout.H_MICRO] - h[layout.H_BASE_MICRO] - micro, 0),
        "recovered": True,
    }
    if h[layout.H_ANY_TOKENS]:
        d["tokens"] = max(h[layout.H_TOKENS] - h[layout.H_BASE_TOKENS] - tokens, 0)
        if h[layout.H_REAL_MISSING] == h[layout.H_BASE_REAL_MISSING]:
            d["real_tokens"] = max(h[layout.H_REAL] - h[layout.H_BASE_REAL] - real, 0)
    return d


def _missing_values(
    mm: mmap.mmap,
    h: tuple[int, ...],
    pid: int,
    rank: int | None,
    last_q: int,
    reserved: int,
) -> list[dict[str, Any]]:
    """The values numbered above `last_q`, in order, as records. Only the `reserved` slots are
    read: a page past them may have no backing (a full tmpfs), and touching it is a SIGBUS."""
    capacity = h[layout.H_CAPACITY]
    if capacity != layout.CAPACITY:
        return []
    keys = layout.read_keys(mm, h[layout.H_KEYS_COUNT])
    unpack = layout.SLOT.unpack_from
    mask = capacity - 1
    allowed_gap = _GAP + h[layout.H_DROPPED_FULL] + h[layout.H_DROPPED_KEYS]
    out: list[dict[str, Any]] = []
    seq, gap = last_q + 1, 0
    while gap <= allowed_gap and seq - last_q <= capacity:
        if seq & mask >= reserved:
            break  # never written: the writer reserves before it writes
        kid, step, t, value, written = unpack(
            mm, layout.SLOTS_AT + (seq & mask) * layout.SLOT_BYTES
        )
        seq += 1
        if written != seq - 1 or not 0 <= kid < len(keys):
            gap += 1
            continue
        gap = 0
        via, key = keys[kid]
        step_or_none = step if step >= 0 else None
        out.append(
            records.value_record(
                key, value, via, step_or_none, t=t, rank=rank, pid=pid, q=written, recovered=True
            )
        )
    return out
