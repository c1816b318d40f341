"""The rich console every terminal view draws with: colour on a terminal, plain text otherwise.

Plain means no escape sequence at all: a pipe, a file, a CI log, or any terminal when `NO_COLOR`
is set (no-color.org) or `TERM=dumb`. rich is imported here, late, so `tm` pays for it only when
something is drawn.
"""

from __future__ import annotations

import os
from typing import Any, TextIO


def is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def colour_wanted(stream: Any, env: dict[str, str] | os._Environ | None = None) -> bool:
    """Colour and styles only on a terminal, and never with NO_COLOR (any value) or TERM=dumb."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR", "") != "" or env.get("TERM") == "dumb":
        return False
    return is_tty(stream)


def terminal_width(stream: Any, default: int = 100) -> int:
    """The terminal's columns; COLUMNS, else `default`, when the stream is not a terminal."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        pass
    try:
        return max(int(os.environ.get("COLUMNS", "")), 20)
    except ValueError:
        return default


def make_console(stream: TextIO | None = None, width: int | None = None, colour: bool | None = None):
    """A `rich.console.Console` on `stream` that writes colour only where it is wanted."""
    from rich.console import Console

    if colour is None:
        colour = colour_wanted(stream)
    return Console(
        file=stream,
        width=width or terminal_width(stream),
        force_terminal=colour,
        no_color=not colour,
        color_system="auto" if colour else None,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
        legacy_windows=False,
    )
