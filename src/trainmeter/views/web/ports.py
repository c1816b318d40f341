"""The dashboard's listening socket: 127.0.0.1, the first free port from the one asked.

Kept apart from the HTTP server so that `tm` can bind and print the address at once, before
the child starts, and import the server itself (http.server pulls in email, ssl...) on a
background thread, off the path to the training's first line.
"""

from __future__ import annotations

import errno
import socket

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: How many ports after the first to try before giving up.
PORT_TRIES = 50


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # no SO_REUSEADDR: a port another process listens on is taken, not shared
        sock.bind((HOST, port))
        sock.listen(1024)  # a crowd of connections waits in the kernel, not refused
    except OSError:
        sock.close()
        raise
    return sock


def bind_socket(port: int | None) -> socket.socket:
    """A listening socket on the first free port from `port` (default 8765); 0: any free port."""
    if port == 0:
        return _listen(0)
    first = DEFAULT_PORT if port is None else port
    last_error: OSError | None = None
    for candidate in range(first, min(first + PORT_TRIES, 65536)):
        try:
            return _listen(candidate)
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            last_error = exc
    raise OSError(
        errno.EADDRINUSE, f"no free port in {first}-{first + PORT_TRIES - 1} ({last_error})"
    )


def url(sock: socket.socket) -> str:
    return f"http://{HOST}:{sock.getsockname()[1]}/"
