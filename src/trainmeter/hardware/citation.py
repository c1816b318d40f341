"""The peak's citation in one line: the card, its dense figure, and the document it comes from.

A spec's source text says exactly where each number was read and how it was checked (a
paragraph a number can be audited against). A reader of `tm hardware`, the MFU explanation or
the passport first wants one line: which card, which dense figure, from which document. The
paragraph stays available behind a fold (`tm hardware --sources`, the dashboard's and the
report's <details>), and is printed once for GPUs that share a spec.
"""

from __future__ import annotations

MAX_DOC = 110


def document(source: str) -> str:
    """The document a source text cites first: the words before its first quote or colon.

    'NVIDIA H100 product page (nvidia.com/en-us/data-center/h100), H100 SXM column: ...' gives
    'NVIDIA H100 product page (nvidia.com/en-us/data-center/h100), H100 SXM column'."""
    text = " ".join(str(source).split())
    cut = len(text)
    for mark in (": ", " (stored", ". "):
        at = text.find(mark)
        if 0 < at < cut:
            cut = at
    doc = text[:cut].rstrip(" ,;.")
    if len(doc) > MAX_DOC:
        doc = doc[: MAX_DOC - 1].rstrip() + "…"
    return doc


def peak_line(name: str | None, tflops: float | None, source: str | None,
              clock_mhz: float | None = None) -> str:
    """'NVIDIA H100 SXM5 80GB: 989.5 TFLOP/s dense BF16 at 1830 MHz, from <document>'."""
    head = name or "GPU of unknown model"
    figure = "no dense peak" if tflops is None else f"{tflops:g} TFLOP/s dense BF16"
    if tflops is not None and clock_mhz:
        figure += f" at {clock_mhz:g} MHz"
    tail = f", from {document(source)}" if source else ""
    return f"{head}: {figure}{tail}"


def index_ranges(indexes: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5' (which GPUs share a spec)."""
    out: list[str] = []
    start = prev = None
    for i in sorted(indexes):
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)
