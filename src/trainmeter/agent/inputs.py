"""Every file the agent or `tm` reads as input, read with a bound on its size.

A path comes from an environment variable (`TRAINMETER_FAKE_CUDA_MEMORY`, `TRAINMETER_FAKE_NVML`),
a flag (`tm hardware --from-file`), a run directory someone else may have written, or /proc.
Read whole, `/dev/zero` or a runaway file grows the reader without end: inside the training
process that is the user's run killed by the OOM killer. So each reader names the most it will
take; a file larger than that (or one that never ends) is refused with `InputTooLarge`, a
`ValueError` whose message says which file and the bound, after reading at most one byte past
the bound. A FIFO or a socket is refused too: opening one to read can wait for ever for a writer.

Standard library only: the agent imports this inside the user's process.
"""

from __future__ import annotations

import json
import os
import stat

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

MIB = 1 << 20


class InputTooLarge(ValueError):
    """A file past the reader's bound, or one that is not a file that can be read to its end."""


def read_bytes(path: str | os.PathLike[str], limit: int, what: str = "input file") -> bytes:
    """The file's bytes, at most `limit` of them; `InputTooLarge` when it holds more.

    OSError as `open` raises it (a missing file is the caller's business)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISDIR(mode):
            raise InputTooLarge(f"{what} {os.fspath(path)!s} is not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a file or a device: reads below are ordinary
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, MIB))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    raise InputTooLarge(f"{what} {os.fspath(path)!s} is larger than {_size(limit)}: not read")


def read_text(path: str | os.PathLike[str], limit: int, what: str = "input file") -> str:
    """`read_bytes` as text (UTF-8, undecodable bytes replaced)."""
    return read_bytes(path, limit, what).decode("utf-8", "replace")


def load_json(path: str | os.PathLike[str], limit: int, what: str = "input file") -> Any:
    """`read_bytes` parsed as JSON (ValueError when it is not)."""
    return json.loads(read_bytes(path, limit, what))


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB and limit % MIB == 0 else f"{limit} bytes"
