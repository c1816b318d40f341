"""Text from a run made safe to place in Markdown: a passport is pasted into model cards on
public hubs, and its metric keys, run name and versions come from the training script.

Each string (keys too) is shown as the text it is: no raw HTML (`<img onerror=...>`,
`<script>`), no link or image (`[c](javascript:...)`, `![x](http://...)`), no code span it could
close, and nothing that ends a table row (`|`, a newline). Control characters are made visible.
The characters that need it are escaped (entities for `<`, `>`, `&`; a backslash for the rest),
so a renderer shows exactly the original text.
"""

from __future__ import annotations

from typing import Any

from ..visible import visible

_ESCAPES = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "\\": "\\\\",
    "`": "\\`",
    "[": "\\[",
    "]": "\\]",
    "|": "\\|",
}
_TABLE = str.maketrans(_ESCAPES)


def md_text(text: str) -> str:
    """One string as inert Markdown text, on one line."""
    return visible(text, newlines=False).translate(_TABLE)


def md_code(text: str) -> str:
    """One string as a code span that shows it exactly, whatever backticks it holds: fenced
    by one more backtick than its longest run of them (CommonMark), padded when it starts or
    ends with one. A code span takes its text literally (no escapes), so none are added."""
    text = visible(text, newlines=False)
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_safe(value: Any, keep: frozenset[str] = frozenset()) -> Any:
    """`value` with every string in it (dict keys included) made inert, except the values of
    the keys named in `keep` (made one-line and visible only: they go in code spans)."""
    if isinstance(value, str):
        return md_text(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = md_text(key) if isinstance(key, str) else key
            if key in keep and isinstance(item, str):
                out[name] = visible(item, newlines=False).replace("`", "'")
            else:
                out[name] = md_safe(item, keep)
        return out
    if isinstance(value, list):
        return [md_safe(item, keep) for item in value]
    return value
