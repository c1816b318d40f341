"""A run's own text (metric keys, `--name`, a script's file name) is data in every output,
never markup, a formula or a terminal command, and never a crash (issue 22, items 6, 7, 8, 11,
and `tm export csv -o -`).

Before: `passport.md` took `![x](...)`, `<img onerror=...>`, `<script>` and `[c](javascript:...)`
raw and a `|` or newline broke its table; CSV headers starting `=`, `+`, `-`, `@` (and NUL
bytes) were written as they were; `tm summary` and `tm passport` printed OSC 52, OSC 0 and
`ESC[2J` from keys and names; a surrogate key or a non-UTF-8 name crashed `tm report` and
`tm export csv`; `-o -` wrote a file named `-`.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from .hostile import ESCAPES, KEYS, hostile_run, tm


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hostile")
    return root, hostile_run(root)


def test_passport_markdown_renders_every_key_as_text(hostile) -> None:
    root, run = hostile
    out = tm(root, "passport")
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    for text in (out.stdout.decode("utf-8"), (run / "passport.md").read_text("utf-8")):
        html = MarkdownIt("commonmark").enable("table").render(text)
        for tag in ("<img", "<script", "<a ", "href="):
            assert tag not in html, tag
        # the table of final values has one row a key: no `|` or newline broke it
        rows = [line for line in text.splitlines() if line.startswith("| ") and line.endswith(" | 5 |")]
        assert len(rows) == len(KEYS), rows
        assert "a\\|b" in text and "&lt;script&gt;" in text


def _cells(data: bytes) -> list[str]:
    return next(csv.reader(io.StringIO(data.decode("utf-8"))))


def test_csv_cells_are_never_formulas_nor_carry_nul(hostile) -> None:
    root, run = hostile
    target = root / "x.csv"
    out = tm(root, "export", "csv", "-o", str(target))
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    data = target.read_bytes()
    assert b"\x00" not in data and b"\x1b" not in data
    header = _cells(data)
    assert len(header) == len(KEYS) + 3  # step, time_s, the keys, trainmeter/tokens
    for cell in header:
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert "'=HYPERLINK(\"http://e.example\",\"x\")" in header and "'@SUM(A1)" in header


def test_export_csv_to_stdout_with_dash(hostile) -> None:
    root, _run = hostile
    out = tm(root, "export", "csv", "-o", "-")
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert not (root / "-").exists()
    assert _cells(out.stdout)[0] == "step"


@pytest.mark.parametrize("args", [["summary"], ["passport"], ["runs"], ["summary", "--json"]])
def test_no_escape_sequence_reaches_the_terminal(hostile, args: list[str]) -> None:
    root, _run = hostile
    out = tm(root, *args)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    text = out.stdout.decode("utf-8")  # valid UTF-8 too: no lone surrogate was printed
    for escape in ESCAPES:
        assert escape not in text, (escape, args)
    assert "\\x1b" in text or args[0] == "runs" or "--json" in args


@pytest.mark.parametrize("args", [["report", "-o", "r.html"], ["summary", "--json"]])
def test_names_that_are_not_utf8_do_not_crash(hostile, args: list[str]) -> None:
    root, _run = hostile
    out = tm(root, *args)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in out.stderr
    if "--json" in args:
        json.loads(out.stdout)
