"""The durable half of delivery: a small shared-memory file that outlives the training process.

The socket is how records reach `tm` while the run lives; it cannot help with what was still in
the process when it died (SIGKILL, `os._exit`, a default SIGTERM that skips `atexit`). So each
process that counts steps or accepts values also writes them, as it goes, into a memory-mapped
file beside the socket (`ring.<pid>` in the private socket directory). The kernel keeps the
file's pages whatever happens to the process; after the child exits `tm` reads every ring
(`trainmeter.supervisor.ring`) and logs what the socket never delivered, once.

The file, all little-endian:

- a header of int64 slots (`H_*` below): the process's running step totals, written by the step
  hook in one `struct.pack_into` (one C call: no other thread sees half), the totals it inherited
  at fork (`H_BASE_*`), the next sequence number hint and counts of values refused;
- a key table: `[u16 length][via NUL key]` entries, an entry's index is the key's id;
- `CAPACITY` slots of 36 bytes, one per accepted value: key id, step, time, value and, last,
  the value's per-process sequence number (the slot is valid when that number says so);
- the rare records' area (`RARE_BYTES`, two halves): every record other than steps and values
  (hello, facts, phases, alerts), as its JSON line `[u32 length][line]`, numbered in the
  process from 1 (`r` on the record); the header says which half is in use, its bytes and its
  entries (`H_RARE_SIDE`, `H_RARE_USED`, `H_RARE_COUNT`, written in one `pack_into`, the count
  last). When a half is full, the records not yet shipped move to the other half and it takes
  over: a record is dropped from the ring only once the sender shipped it. `tm` logs, after the
  process ended, the entries whose number it never received.

Values are numbered in the order they are accepted; the sender thread ships them in that order
with the number (`q`) on each record, so `tm` keeps, per process, the highest number it received
and takes from the ring only what lies above it. A slot is reused only after the sender shipped
its value (`tail`), so what `tm` may still need is never overwritten; a value that finds the ring
full is refused and counted (`H_DROPPED_FULL`), never silently lost, and its number is skipped.

The file is sparse, and a page of a shared mapping that the filesystem cannot back (a full
`$TMPDIR`, a small tmpfs) is a SIGBUS in whoever touches it, the training process included. So
no page is touched before it is reserved: the header, the key table and a first run of slots
are reserved when the file is made (written with zeros: `_write_zeros`), the slots beyond in
doubling runs as the writer reaches them (`Ring.grow`, `os.posix_fallocate`), and the header
says how many slots are reserved
(`H_RESERVED`); both readers stop there. A reservation that fails leaves the ring as it is: the
values after it travel by the socket alone, and those still waiting at exit are counted.
"""

from __future__ import annotations

import _thread  # not threading: see sender.py
import errno
import itertools
import mmap
import os
import stat
import struct
import time

from .. import records
from . import sender as sender_module
from .sender import get_sender

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAGIC = 0x31474E49524D54  # "TMRING1", little-endian
LAYOUT = 4  # 2: H_RESERVED, and nothing read or written past it; 3: the rare records' area;
# 4: H_SOCKET_ONLY, H_IMAGE
HEADER_BYTES = 4096
KEYS_BYTES = 1 << 16
#: key id, step (-1: none), t, value, seq (written last); "2d", the same bytes as "dd", is one
#: code for the struct module to loop over: 13 instructions less a `pack_into`
SLOT = struct.Struct("<iq2dq")
SLOT_BYTES = SLOT.size
_iter_slots = SLOT.iter_unpack
_FIRST_WINDOW = 64  # slots the sender reads at once at first (an idle ring: 2 KiB copied)
_MAX_WINDOW = 4096
CAPACITY = 1 << 20  # slots; the file is sparse, pages exist only once reserved
FIRST_RESERVED = 1 << 12  # slots reserved with the file (147 KiB); then doubling runs
NO_LIMIT = 1 << 62  # `Ring.room` once every slot is reserved
SLOTS_AT = HEADER_BYTES + KEYS_BYTES
RARE_AT = SLOTS_AT + CAPACITY * SLOT_BYTES  # the rare records' area, after the slots
RARE_HALF = 1 << 16  # bytes of each half (a hello is about 1 kB, a phase record 150 bytes)
RARE_BYTES = 2 * RARE_HALF
FILE_BYTES = RARE_AT + RARE_BYTES
RARE_ENTRY = struct.Struct("<I")  # the line's length, then the line
RARE_STATE = struct.Struct("<qqq")  # side, bytes used, entries: one write, the count last
KEY_LEN = struct.Struct("<H")
TOTALS = struct.Struct("<qqqqdq")  # tokens, real, real_missing, micro, t, steps
TOTALS_AT = 5 * 8  # H_TOKENS
#: the totals' last three (micro, t, steps): all a step changes while no token tensor was seen
#: (tokens, real and real_missing stay what they were, 0 or a forked parent's)
STEP_TOTALS = struct.Struct("<qdq")
STEP_TOTALS_AT = 8 * 8  # H_MICRO

# header indices (int64 each)
H_MAGIC = 0
H_LAYOUT = 1
H_CAPACITY = 2
H_PID = 3
H_RANK = 4  # -1: unknown
# the totals the step hook writes, in one `TOTALS.pack_into` (steps last, in memory order)
H_TOKENS = 5
H_REAL = 6
H_REAL_MISSING = 7
H_MICRO = 8
H_STEP_T = 9  # a float64
H_STEPS = 10
H_ANY_TOKENS = 11
H_BASE_STEPS = 12
H_BASE_TOKENS = 13
H_BASE_REAL = 14
H_BASE_REAL_MISSING = 15
H_BASE_MICRO = 16
H_DROPPED_SENDER = 17  # records the sender dropped (a receiver gone quiet, at exit)
H_DROPPED_FULL = 18  # values refused because the ring was full
H_DROPPED_KEYS = 19  # values refused because the key table was full
H_KEYS_USED = 20  # bytes of the key table in use
H_KEYS_COUNT = 21
H_RESERVED = 22  # slots whose pages are reserved: positions [0, H_RESERVED)
H_RARE_SIDE = 23  # the half of the rare area in use (0 or 1)
H_RARE_USED = 24  # its bytes in use
H_RARE_COUNT = 25  # its entries
H_RARE_FULL = 26  # rare records not kept (the area full of unshipped ones, or not reserved)
H_RARE_LAST = 27  # the last rare record number given
H_SOCKET_ONLY = 28  # values that found no room in the ring and went by the socket alone
H_IMAGE = 29  # which program this pid runs: 0, then one more at each exec (see `Ring.__init__`)
HEADER_SLOTS = 30

FILE_PREFIX = "ring."


def path_for(directory: str, pid: int) -> str:
    return os.path.join(directory, f"{FILE_PREFIX}{pid}")


def set_aside(path: str) -> int | None:
    """Keep the ring file already at `path`, if any, under another name, and return the image
    number the new ring takes (None: nothing was there).

    A file there belongs to this pid's earlier program (the process exec'd: same pid, new
    image) or to a process that had this pid before and ended (pids are reused). Its records
    are not this program's, and what the socket never delivered of them is only there: so it
    is renamed `ring.<pid>.<image>` (its image number, read from its header), never truncated,
    and `tm` logs what it holds before this program's first record (`supervisor/ring.py`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError:
        fd = -1  # not a file we can read (a link): moved aside all the same
    image = 0
    if fd >= 0:
        try:
            head = os.pread(fd, HEADER_SLOTS * 8, 0)
            if len(head) == HEADER_SLOTS * 8:
                h = struct.unpack(f"<{HEADER_SLOTS}q", head)
                if h[H_MAGIC] == MAGIC and h[H_LAYOUT] == LAYOUT and 0 <= h[H_IMAGE] < 1 << 20:
                    image = h[H_IMAGE]
        finally:
            os.close(fd)
    while True:
        aside = f"{path}.{image}"
        if not os.path.lexists(aside):
            break
        image += 1
    os.rename(path, aside)
    return image + 1


class Ring:
    """One process's ring. Created by the process itself; never shared with a forked child."""

    def __init__(
        self, path: str, pid: int, rank: int | None, image: int = 0, spare: bool = True
    ) -> None:
        try:
            fd, reserved, rare_room = _new_file(path)
        except OSError:
            if not spare:
                raise
            # no room (a full $TMPDIR): a spare `tm` reserved while there was room, if any
            fd, reserved, rare_room = _claim_spare(path)
        try:
            self.mm = mmap.mmap(fd, FILE_BYTES)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        self._fd = fd  # kept for the reservations to come (closed with the ring)
        self.path = path
        self.pid = pid
        header = memoryview(self.mm)[:HEADER_BYTES]
        self.h = header.cast("q")  # the step hook writes here: h[H_STEPS] = n
        self.hd = header.cast("d")
        #: the value slots alone: `emit` packs a value at (number & mask) * SLOT_BYTES here
        self.slots = memoryview(self.mm)[SLOTS_AT:RARE_AT]
        h = self.h
        h[H_LAYOUT] = LAYOUT
        h[H_CAPACITY] = CAPACITY
        h[H_PID] = pid
        h[H_RANK] = -1 if rank is None else rank
        h[H_RESERVED] = reserved
        h[H_IMAGE] = image
        #: the first value number whose slot is not reserved: `put` grows the ring there
        self.room = reserved
        self.no_room = False  # a reservation failed: later values go by the socket alone
        h[H_MAGIC] = MAGIC  # last: a reader trusts the header only once this is there
        self.keys: dict[tuple[str, str], int] = {}
        self.emit_ids: dict[str, int] = {}  # emit's own look-up: by key alone
        self.key_names: list[tuple[str, str]] = []
        self.keys_sent = 0  # key table entries `tm` was sent (with the values' datagrams)
        # Values are numbered from 1, so a never-written (zero) slot can never pass for a value.
        # A number comes with its slot's offset in `mm` (SLOTS_AT + (number & mask) * SLOT_BYTES)
        # from one `next()` on a zip: the counter and the offsets advance together in C, atomic
        # under the GIL, so two threads never share a number and an offset always goes with its
        # own. Every taker goes through a zip over these two (never the counter alone), or the
        # offsets would fall out of step. Two ints made in C, not computed by the caller with
        # `&` and `*` (two more ints and four bytecodes a value).
        count = itertools.count(1)
        offsets = itertools.chain(
            range(SLOTS_AT + SLOT_BYTES, RARE_AT, SLOT_BYTES),  # the first lap: from number 1
            itertools.chain.from_iterable(itertools.repeat(range(SLOTS_AT, RARE_AT, SLOT_BYTES))),
        )
        #: next(): (offset, number) of a new value
        self.numbers = zip(offsets, count, strict=False)  # both endless
        #: What `emit`'s steady call reads, in one tuple (`sender.emit_hot` while the ring is
        #: hot): its key ids, a zip whose next() is (offset, number, time.monotonic()) for its
        #: one value (the clock read in the same C call: a builtin without arguments is a
        #: generic call in 3.11's interpreter), the mapping, and the ring. Not attributes of
        #: their own: past 28 or so an instance's attributes lose 3.11's fast lookup.
        clock = itertools.starmap(time.monotonic, itertools.repeat(()))
        stamped = zip(offsets, count, clock, strict=False)
        self.emit_path = (self.emit_ids, stamped, self.mm, self)
        #: numbers below this one may be written without a check: min(room, tail + CAPACITY),
        #: kept by whoever moves either (`tail`'s setter, `grow`). Both only grow, so a value
        #: computed from a stale reading of the other (two threads) is lower than the truth,
        #: never higher: a number at or above it takes the checked path (`outbox.put_numbered`)
        self.limit = 0
        self.tail = 1  # first value not yet shipped (the sender thread moves it)
        self.read = 1  # first value not yet taken by the sender thread
        self.mask = CAPACITY - 1
        self.skipped: set[int] = set()  # numbers given to values that were refused
        self._key_lock = _thread.allocate_lock()
        self.owner: object = None  # the sender it was made for (a new sender: a new ring)
        self.rare_room = rare_room
        self.rare_seq = itertools.count(1)
        self.rare_shipped = 0  # every rare record numbered up to this one was shipped
        self.rare_entries: list[tuple[int, bytes]] = []  # (r, entry) of the half in use
        self.rare_side = self.rare_used = 0
        self._rare_lock = _thread.allocate_lock()

    @property
    def tail(self) -> int:
        """The first value not yet shipped (the sender thread moves it): its slot and every one
        after it may still be needed by `tm`."""
        return self._tail

    @tail.setter
    def tail(self, tail: int) -> None:
        self._tail = tail
        self.limit = min(self.room, tail + CAPACITY)

    def grow(self) -> bool:
        """Reserve the next run of slots (double the reserved ones), so the value numbered
        `room` can be written. False, for good, when the filesystem has no room for them."""
        if self.no_room:
            return False
        reserved = self.h[H_RESERVED]
        if reserved < CAPACITY:
            more = min(reserved, CAPACITY - reserved)
            try:
                _reserve(self._fd, SLOTS_AT + reserved * SLOT_BYTES, more * SLOT_BYTES)
            except OSError:
                self.no_room = True
                return False
            reserved += more
            self.h[H_RESERVED] = reserved
        # numbers 1..reserved-1 sit in reserved slots on the first lap; all of them after it
        self.room = NO_LIMIT if reserved >= CAPACITY else reserved
        self.limit = min(self.room, self._tail + CAPACITY)
        return True

    def key_id(self, key: str, via: str) -> int:
        """The id of (via, key), adding it to the table the first time. -1: the table is full."""
        with self._key_lock:  # rare (a key's first value), and two threads may race to it
            return self._add_key((via, key))

    def _add_key(self, entry: tuple[str, str]) -> int:
        kid = self.keys.get(entry)
        if kid is not None:
            return kid
        via, key = entry
        data = f"{via}\0{key}".encode("utf-8", "replace")
        used = self.h[H_KEYS_USED]
        if len(data) > 0xFFFF or used + 2 + len(data) > KEYS_BYTES:
            return -1
        at = HEADER_BYTES + used
        KEY_LEN.pack_into(self.mm, at, len(data))
        self.mm[at + 2 : at + 2 + len(data)] = data
        kid = len(self.key_names)
        self.key_names.append(entry)
        self.h[H_KEYS_USED] = used + 2 + len(data)
        self.h[H_KEYS_COUNT] = kid + 1  # after the bytes: a reader never sees half an entry
        self.keys[entry] = kid
        return kid

    def keep_rare(self, record: dict[str, Any]) -> None:
        """Number a rare record (`r`) and keep its line in the rare area, until shipped."""
        with self._rare_lock:  # several threads may send; the number and the bytes go together
            r = next(self.rare_seq)
            record["r"] = r
            try:
                line = records.encode(record).encode("utf-8")
            except records.RecordError:
                line = b""
            if not line or len(line) > records.MAX_DATAGRAM:
                # the sender counts it, unable to encode or to send it either: the number goes
                # back, so tm does not count the same record a second time as lost
                del record["r"]
                self.rare_seq = itertools.count(r)
                return
            self.h[H_RARE_LAST] = r
            if not self.rare_room:
                self.h[H_RARE_FULL] += 1
                return
            entry = RARE_ENTRY.pack(len(line)) + line
            if self.rare_used + len(entry) > RARE_HALF and not self._rare_turn(len(entry)):
                self.h[H_RARE_FULL] += 1
                return
            at = RARE_AT + self.rare_side * RARE_HALF + self.rare_used
            self.mm[at : at + len(entry)] = entry
            self.rare_used += len(entry)
            self.rare_entries.append((r, entry))
            RARE_STATE.pack_into(
                self.mm, H_RARE_SIDE * 8, self.rare_side, self.rare_used, len(self.rare_entries)
            )

    def _rare_turn(self, need: int) -> bool:
        """The half is full: move the unshipped entries to the other half, which takes over
        (the header switches in one write). False when even they leave no room for `need`."""
        kept = [(r, e) for r, e in self.rare_entries if r > self.rare_shipped]
        size = sum(len(e) for _, e in kept)
        if size + need > RARE_HALF:
            self.rare_entries = kept  # what was shipped is gone either way
            return False
        side = 1 - self.rare_side
        at = RARE_AT + side * RARE_HALF
        data = b"".join(e for _, e in kept)
        self.mm[at : at + len(data)] = data
        RARE_STATE.pack_into(self.mm, H_RARE_SIDE * 8, side, len(data), len(kept))
        self.rare_side, self.rare_used, self.rare_entries = side, len(data), kept
        return True

    def rare_sent(self, r: int) -> None:
        """Sender thread: every rare record numbered up to `r` was shipped."""
        if r > self.rare_shipped:
            self.rare_shipped = r

    def take(
        self, limit: int, chunks: list[bytes] | None = None
    ) -> list[tuple[int, int, int, float, float]]:
        """Sender thread: up to `limit` written values from `read` on, in order, as
        (seq, key id, step, t, value); stops at the first slot not yet written. With `chunks`,
        the slots' own bytes are appended there too (refused numbers' stale slots among them,
        which a reader tells by their sequence number).

        Slots are read a window at a time (a copy of the window, unpacked in one C call), not
        one `unpack_from` each: the windows grow while every slot in them is written."""
        out: list[tuple[int, int, int, float, float]] = []
        seq, mask, mm, skipped = self.read, self.mask, self.mm, self.skipped
        window = _FIRST_WINDOW
        reserved = self.h[H_RESERVED]
        while len(out) < limit:
            start = seq & mask
            if start >= reserved:  # never touch an unreserved page: only refusals lie there
                if seq not in skipped:
                    break
                skipped.discard(seq)
                out.append((seq, -1, -1, 0.0, 0.0))
                seq += 1
                continue
            count = min(window, limit - len(out), reserved - start)  # never past the reserved
            at = SLOTS_AT + start * SLOT_BYTES
            whole = True
            buf = mm[at : at + count * SLOT_BYTES]
            used = 0
            for kid, step, t, value, written in _iter_slots(buf):
                if written != seq:
                    if seq in skipped:  # refused (ring or key table full): counted already
                        skipped.discard(seq)
                        out.append((seq, -1, -1, 0.0, 0.0))
                        seq += 1
                        used += 1
                        continue
                    whole = False
                    break
                out.append((seq, kid, step, t, value))
                seq += 1
                used += 1
            if chunks is not None and used:
                chunks.append(buf if used == count else buf[: used * SLOT_BYTES])
            if not whole:
                break
            window = min(window * 4, _MAX_WINDOW)
        self.read = seq
        return out

    def take_bytes(self, limit: int, chunks: list[bytes]) -> tuple[int, int, int]:
        """Sender thread: `take` for a datagram of the slots' own bytes (appended to `chunks`):
        (the first number taken, the last, how many are values), all 0 when none is written.

        A whole window is checked in two C calls, not a Python step a slot: every slot's number
        read at once, and their sum compared with the sum of the numbers the slots should hold.
        A slot not yet written holds a smaller number than its own (0 in a new file, the
        number of a lap before, a refused number's leftover), never a larger one (a slot is
        written again only after its value was shipped, and this thread ships in order), so
        the sums are equal only when every slot holds its own. The window is a view of the
        ring, not a copy: the datagram's join is the one copy of the slots' bytes. With
        refused numbers about (rare), `take` does it."""
        if self.skipped:
            taken = self.take(limit, chunks)
            if not taken:
                return 0, 0, 0
            return taken[0][0], taken[-1][0], sum(1 for v in taken if v[1] >= 0)
        first = seq = self.read
        mask, slots = self.mask, self.slots
        window = _FIRST_WINDOW
        reserved = self.h[H_RESERVED]
        while seq - first < limit:
            start = seq & mask
            if start >= reserved:  # never touch an unreserved page
                break
            count = min(window, limit - (seq - first), reserved - start)
            count = 1 << (count.bit_length() - 1)  # a power of two: a dozen readers at most
            at = start * SLOT_BYTES
            buf = slots[at : at + count * SLOT_BYTES]
            numbers = _numbers(count).unpack(buf)
            if sum(numbers) == count * seq + (count * (count - 1) >> 1):  # seq .. seq+count-1
                chunks.append(buf)
                seq += count
                window = min(window * 4, _MAX_WINDOW)
                continue
            used = 0  # the written start of the window, then the first slot not yet written
            for number in numbers:
                if number != seq + used:
                    break
                used += 1
            if used:
                chunks.append(buf[: used * SLOT_BYTES])
                seq += used
            break
        self.read = seq
        return (first, seq - 1, seq - first) if seq > first else (0, 0, 0)

    def unshipped(self) -> int:
        """Values not yet shipped: those the sender took and has not sent (`read - tail`), plus
        one when the next value is written but not taken yet (a peek at one slot: whether more
        wait is all the exit flush asks; `tm` reads whatever is left from the ring)."""
        seq = self.read
        slot = seq & self.mask
        if slot >= self.h[H_RESERVED]:  # never touch an unreserved page (a full disk: SIGBUS)
            return max(seq - self.tail, 0) + (seq in self.skipped)
        written = SLOT.unpack_from(self.mm, SLOTS_AT + slot * SLOT_BYTES)[-1]
        return max(seq - self.tail, 0) + (written == seq or seq in self.skipped)

    def close(self) -> None:
        cool(self)
        try:
            self.h.release()
            self.hd.release()
            self.slots.release()
            self.mm.close()
            os.close(self._fd)
        except Exception:  # noqa: BLE001 - a view still exported: leave it to the collector
            pass


def _new_file(path: str) -> tuple[int, int, bool]:
    """A new ring file at `path` with its first pages reserved: (fd, slots reserved, whether
    the rare area is). Never one that is there (`set_aside` moved it): another program's."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.ftruncate(fd, FILE_BYTES)
        _write_zeros(fd, 0, SLOTS_AT + FIRST_RESERVED * SLOT_BYTES)
        try:
            _write_zeros(fd, RARE_AT, RARE_BYTES)
            rare_room = True
        except OSError:
            rare_room = False  # rare records by the socket alone, each counted
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)  # no room: no ring, and no file for `tm` to map
        except OSError:
            pass
        raise
    return fd, FIRST_RESERVED, rare_room


#: Spare ring files `tm` keeps in the socket directory while there is room (`supervisor/ring.py`
#: `keep_spares`): a process that cannot make its ring (the disk filled after the run began) takes
#: one, so what it records survives however it ends. Pages reserved: the header, the key table,
#: `SPARE_SLOTS` value slots and the rare area.
SPARE_PREFIX = "spare."
SPARE_SLOTS = 1 << 10
SPARE_RESERVED = ((0, SLOTS_AT + SPARE_SLOTS * SLOT_BYTES), (RARE_AT, RARE_BYTES))


def _claim_spare(path: str) -> tuple[int, int, bool]:
    """Take one of `tm`'s spares as the ring at `path` (renamed: only one process gets each).
    OSError when there is none."""
    directory = os.path.dirname(path)
    for name in sorted(os.listdir(directory)):
        if not name.startswith(SPARE_PREFIX) or name.endswith(".tmp"):
            continue
        try:
            os.rename(os.path.join(directory, name), path)
        except OSError:
            continue  # another process took it first
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        st = os.fstat(fd)
        if st.st_size == FILE_BYTES and st.st_uid == os.getuid() and stat.S_ISREG(st.st_mode):
            return fd, SPARE_SLOTS, True
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
    raise OSError(errno.ENOSPC, "no room for a ring and no spare left")


def make_spare(directory: str, name: str) -> bool:
    """`tm`: one spare ring file, its pages reserved (False, and nothing left, when no room)."""
    tmp = os.path.join(directory, name + ".tmp")
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    try:
        os.ftruncate(fd, FILE_BYTES)
        for offset, length in SPARE_RESERVED:
            _reserve(fd, offset, length)
        os.rename(tmp, os.path.join(directory, name))
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    finally:
        os.close(fd)


_NUMBER_AT = SLOT.size - 8  # the number is a slot's last field (written last)
_number_readers: dict[int, struct.Struct] = {}


def _numbers(count: int) -> struct.Struct:
    """A struct that reads only the numbers of `count` slots in a row (a power of two)."""
    reader = _number_readers.get(count)
    if reader is None:
        reader = _number_readers[count] = struct.Struct("<" + f"{_NUMBER_AT}xq" * count)
    return reader


def _write_zeros(fd: int, offset: int, length: int) -> None:
    """Reserve [offset, offset+length) by writing zeros: OSError (ENOSPC) when it cannot.

    For the pages a new ring touches at once (its header, this hello in the rare area). Space
    fallocate reserves is "unwritten" on ext4 and xfs: the first store into each such extent
    through the mapping converts it in the filesystem's journal, 1 to 10 ms measured on ext4
    (/tmp here), and that was on every Python's start under `tm` (the hello) and on the
    training thread (its first value). Written zeros cost ~0.2 ms for the 340 KiB, once."""
    data = bytes(length)
    while data:
        written = os.pwrite(fd, data, offset)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        data = data[written:]
        offset += written


def _reserve(fd: int, offset: int, length: int) -> None:
    """Give the file real pages for [offset, offset+length): OSError (ENOSPC) when it cannot."""
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, offset, length)
        return
    os.pwrite(fd, bytes(length), offset)  # no fallocate (macOS): write the zeros


def read_header(mm: Any) -> dict[str, Any] | None:
    """The header of a ring file as a dict, or None when it is not one of ours."""
    if len(mm) < SLOTS_AT:
        return None
    h = struct.unpack_from(f"<{HEADER_SLOTS}q", mm, 0)
    if h[H_MAGIC] != MAGIC or h[H_LAYOUT] != LAYOUT:
        return None
    (step_t,) = struct.unpack_from("<d", mm, H_STEP_T * 8)
    return {"h": h, "step_t": step_t, "reserved": max(0, min(h[H_RESERVED], CAPACITY))}


def read_rare(mm: Any, h: tuple[int, ...]) -> list[bytes]:
    """The rare records' lines the header says are there (only whole entries)."""
    side, used, count = h[H_RARE_SIDE], h[H_RARE_USED], h[H_RARE_COUNT]
    if side not in (0, 1) or not 0 <= used <= RARE_HALF or len(mm) < FILE_BYTES:
        return []
    base, at, end = RARE_AT + side * RARE_HALF, 0, used
    lines = []
    for _ in range(max(count, 0)):
        if at + RARE_ENTRY.size > end:
            break
        (length,) = RARE_ENTRY.unpack_from(mm, base + at)
        at += RARE_ENTRY.size
        if at + length > end:
            break
        lines.append(bytes(mm[base + at : base + at + length]))
        at += length
    return lines


def read_keys(mm: Any, count: int) -> list[tuple[str, str]]:
    names = []
    at = HEADER_BYTES
    for _ in range(count):
        (length,) = KEY_LEN.unpack_from(mm, at)
        via, _, key = bytes(mm[at + 2 : at + 2 + length]).decode("utf-8", "replace").partition("\0")
        names.append((via, key))
        at += 2 + length
    return names


# ---- the process's ring ---------------------------------------------------------------------

#: This process's ring once made (`current()` makes it): others read it, only this module sets it.
active: Ring | None = None
_tried = False
#: Called with each new ring (the step probe points its totals there). Never raise out.
on_new: list[Callable[[Ring], None]] = []


def cool(ring: Ring | None) -> None:
    """`emit` no longer writes into `ring` unchecked (its sender's `hot`): it is being replaced,
    dropped or closed."""
    owner = None if ring is None else ring.owner
    if owner is not None and getattr(owner, "hot", None) is ring:
        owner.hot = None


def current(spare: bool = True) -> Ring | None:
    """This process's ring, made on first use inside `tm`; None outside `tm` or when the file
    cannot be made (then values travel by the socket alone, and what is left at exit is
    counted). Without `spare`, none of `tm`'s spares is taken when there is no room, and the
    next call tries again (a forked child takes one only once it has something to keep)."""
    global active, _tried
    sender = get_sender()
    if active is not None and active.owner is sender or _tried and active is None:
        return active
    _tried = True
    cool(active)
    active = None
    if sender is None:
        return None
    pid = os.getpid()
    path = path_for(os.path.dirname(sender.path), pid)
    try:
        image = set_aside(path)
    except OSError:
        image = None  # could not be moved: Ring() below fails on it, and the socket carries on
    try:
        ring: Ring | None = Ring(path, pid, sender.rank, image or 0, spare)
    except Exception:  # noqa: BLE001 - no room, no directory: the socket alone, counted
        ring = None
    if ring is not None:
        ring.owner = sender
        active = ring
        for listener in tuple(on_new):
            try:
                listener(ring)
            except Exception:  # noqa: BLE001 - promise 1
                pass
        sender.has_ring = True  # the step totals are published in its header from now on
    if image is not None:
        _say_new_image(sender, image)
    if ring is None and not spare:
        _tried = False  # a spare, when this process first has something to keep
    return ring


#: The fact that tells `tm` a pid's earlier ring was set aside (`set_aside`): sent first, before
#: anything of this program's, so what `tm` received up to it was the earlier program's. `tm`
#: logs that ring's undelivered records there, and does not log this fact itself.
IMAGE_FACT = "agent_new_image"


def _say_new_image(sender: Any, image: int) -> None:
    try:
        sender.send("fact", {
            "key": IMAGE_FACT, "value": image, "source": "detected",
            "note": "this pid's earlier ring was set aside (an exec, or a pid used again)",
        })
    except Exception:  # noqa: BLE001 - promise 1
        pass


def keep_rare(sender: Any, record: dict[str, Any]) -> None:
    """The sender's hook for each rare record: kept in this process's ring (made if need be)."""
    if sender is not get_sender():
        return  # a sender of its own (a test's): no ring of the process's
    ring = current()
    if ring is not None:
        sender.rare_shipped = ring.rare_sent
        ring.keep_rare(record)


sender_module.rare_keeper = keep_rare


def _learned_rank(rank: int) -> None:
    """The process learned its rank late (`Sender.learn_rank`): the header says it, for `tm`
    reading this ring after the process ended."""
    if active is not None:
        active.h[H_RANK] = rank


sender_module.rank_listeners.append(_learned_rank)


def forget() -> None:
    """Drop this process's ring (tests: each gets its own sender and ring)."""
    global active, _tried
    cool(active)
    active, _tried = None, False


def _after_fork_in_child() -> None:
    """A forked child writes its own ring, never its parent's: the parent's unsent values stay
    the parent's to send. The parent's mapping is left alone (its views may still be held)."""
    global active, _tried
    had = active is not None
    cool(active)
    active, _tried = None, False
    if had:
        # its own file when there is room; a spare only once it records something (a
        # DataLoader worker forked after the disk filled never does: it must not take one)
        current(spare=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
