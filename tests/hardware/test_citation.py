"""The peak's citation in one line: the document a source text cites, GPUs grouped by ranges."""

from __future__ import annotations

from trainmeter.hardware.citation import document, index_ranges, peak_line
from trainmeter.hardware.specs import lookup


def test_document_is_the_words_before_the_first_quote() -> None:
    text = ("NVIDIA H100 product page (nvidia.com/en-us/data-center/h100), H100 SXM column: "
            "'BFLOAT16 Tensor Core | * | 1,979 teraFLOPS'. More.")
    assert document(text) == "NVIDIA H100 product page (nvidia.com/en-us/data-center/h100), H100 SXM column"
    assert document("Spec table, 'Individual GPU' (stored copy at x): 1") == "Spec table, 'Individual GPU'"
    assert len(document("word " * 100)) <= 110


def test_peak_line_and_ranges() -> None:
    assert peak_line("H100", 989.5, "Doc A: 'x'", 1830) == "H100: 989.5 TFLOP/s dense BF16 at 1830 MHz, from Doc A"
    assert peak_line(None, None, None) == "GPU of unknown model: no dense peak"
    assert index_ranges([5, 0, 1, 2]) == "0-2, 5"
    assert index_ranges([3]) == "3" and index_ranges([]) == ""


def test_every_cited_card_has_a_short_document() -> None:
    spec = lookup("NVIDIA H100 80GB HBM3")
    assert spec is not None
    sources = spec["sources"] if isinstance(spec, dict) else spec.sources
    doc = document(sources["bf16_dense_tflops"])
    assert doc.startswith("NVIDIA H100 product page") and "stored" not in doc
