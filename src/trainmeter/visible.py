"""Text from a run shown with its control characters made visible (terminal and Markdown).

A metric key, a run name or a script name is the training script's to choose: an escape
sequence in it (OSC 52 writes the clipboard, OSC 0 the window title, `ESC[2J` clears the
screen) must reach a terminal as characters, not as a command; a lone surrogate (a name that
was not UTF-8) must not make printing it fail. So every C0 and C1 control character and DEL
becomes `\\xNN` (`\\uNNNN` past 0xFF for surrogates), and tabs and newlines become `\\t`, `\\n`
unless the caller keeps newlines.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_AND_BREAKS = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _show(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    if char == "\n":
        return "\\n"
    if char == "\t":
        return "\\t"
    if char == "\r":
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str, newlines: bool = True) -> str:
    """`text` with every control character shown as an escape; with `newlines`, tabs and
    newlines are kept as they are (multi-line output), else shown too."""
    pattern = _CONTROL if newlines else _CONTROL_AND_BREAKS
    if pattern.search(text) is None:
        return text
    return pattern.sub(_show, text)


def visible_all(value: object) -> object:
    """`value` (a snapshot, a passport) with `visible` applied to every string in it, dict keys
    included: what a view prints to a terminal comes from here."""
    if isinstance(value, str):
        return visible(value, newlines=False)
    if isinstance(value, dict):
        return {
            (visible(k, newlines=False) if isinstance(k, str) else k): visible_all(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [visible_all(v) for v in value]
    return value
