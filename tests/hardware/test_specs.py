"""The device spec table: the project's figures, exact-name matching, and a source for every figure."""

from __future__ import annotations

import pytest

from trainmeter.hardware.specs import CITED_FIELDS, all_specs, load_raw, lookup

# (NVML name, key, dense BF16 TFLOP/s, tensor clock MHz, HBM GB/s): the project's peak table (README).
# These are project facts and stay as our peak table has them even where a stored vendor line differs a
# little (the spec files' source lines say so): the H100 whitepaper prints 989.4 dense (we keep
# 1,979 / 2 = 989.5) and 3352 GB/s (we keep the product page's 3.35 TB/s), and NVIDIA's newer
# HGX B200 table gives 7.7 TB/s per GPU where we keep 8000 (DGX B200's 64 TB/s over 8 GPUs).
PEAK_TABLE = [
    ("NVIDIA H100 80GB HBM3", "h100_sxm", 989.5, 1830, 3350),
    ("NVIDIA H100 PCIe", "h100_pcie", 756.0, 1620, 2039),
    ("NVIDIA H200", "h200", 989.5, None, 4800),
    ("NVIDIA A100-SXM4-80GB", "a100_sxm_80gb", 312.0, None, 2039),
    ("NVIDIA B200", "b200", 2250.0, None, 8000),
    ("NVIDIA GB200", "gb200", 2500.0, None, 8000),
    ("NVIDIA GB10", "gb10", None, None, 273),
]


@pytest.mark.parametrize("nvml, key, tflops, clock, gb_s", PEAK_TABLE)
def test_spec_figures(nvml, key, tflops, clock, gb_s):
    spec = lookup(nvml)
    assert spec is not None and spec.key == key
    assert spec.bf16_dense_flops == (None if tflops is None else tflops * 1e12)
    assert spec.tensor_clock_mhz == clock
    assert spec.hbm_bytes_per_s == gb_s * 1e9


def test_ridge_is_peak_over_bandwidth():
    # H100 SXM: 989.5e12 FLOP/s / 3350e9 B/s = 295.373... FLOP/byte
    assert lookup("NVIDIA H100 80GB HBM3").ridge == pytest.approx(295.3731343, rel=1e-9)
    # GB10 has no dense peak, so no ridge (never a borrowed one)
    assert lookup("NVIDIA GB10").ridge is None


def test_case_insensitive_and_surrounding_words():
    assert lookup("nvidia h100 80gb hbm3").key == "h100_sxm"
    assert lookup("  NVIDIA   H100 80GB HBM3 ").key == "h100_sxm"


def test_h100_variants_never_share_a_peak():
    sxm, pcie, nvl = (
        lookup("NVIDIA H100 80GB HBM3"),
        lookup("NVIDIA H100 PCIe"),
        lookup("NVIDIA H100 NVL"),
    )
    assert {sxm.key, pcie.key, nvl.key} == {"h100_sxm", "h100_pcie", "h100_nvl"}
    # H100 NVL: 1,671 sparse / 2 = 835.5 dense; PCIe 756; SXM 989.5
    assert (sxm.bf16_dense_flops, pcie.bf16_dense_flops, nvl.bf16_dense_flops) == (
        989.5e12,
        756e12,
        835.5e12,
    )
    assert lookup("NVIDIA H100") is None  # a family name matches nothing


def test_gh200_is_not_an_h200_and_h200_nvl_is_its_own_card():
    assert lookup("NVIDIA GH200 480GB") is None
    assert lookup("NVIDIA GH200 144G HBM3e") is None
    assert lookup("NVIDIA H200 NVL").key == "h200_nvl"
    assert lookup("NVIDIA H200").key == "h200"


def test_no_prefix_of_a_word_matches():
    # "NVIDIA L4" must not give an L40 (not in the table) the L4's peak, nor A10 an A10G.
    assert lookup("NVIDIA L40") is None
    assert lookup("NVIDIA A10G") is None
    assert lookup("NVIDIA L40S").key == "l40s"
    assert lookup("NVIDIA L4").key == "l4"


@pytest.mark.parametrize("name", ["Tesla T4", "AMD Instinct MI250X", "", "cpu", None])
def test_unknown_card_is_none(name):
    assert lookup(name) is None


def test_every_non_null_figure_has_a_source_line():
    raw = load_raw()
    assert len(raw) >= 7
    for card in raw:
        for field in CITED_FIELDS:
            if card.get(field) is not None:
                line = card["sources"].get(field, "")
                assert len(line) > 20, f"{card['key']}.{field} has no datasheet line"
        # a sparse headline figure must say it was halved
        src = card["sources"].get("bf16_dense_tflops", "")
        if "sparsity" in src and card["bf16_dense_tflops"] is not None:
            assert "halved" in src or "dense" in src, card["key"]


# How each figure was looked up and how far it was checked is the maintainers' record, kept in
# each file's "audit" (never shown): against a stored quote of the vendor's own wording, against
# stored records of the vendor figure, or not at all ("not verified against a stored vendor
# page"). The spec files were first written from memory, so an unmarked figure is an unchecked one.
STATUS = (
    "confirmed by a stored quote",
    "confirmed by stored records",
    "not verified against a stored vendor page",
)
#: Words that tell how a figure was looked up, which a citation shown to users never says.
LOOKUP_WORDS = ("stored", "fetched", "checked", "confirmed", "verified", "corpus", "copy at",
                "transcri", "the lead", "a note", "found", "crawl", "mirror")


def test_every_figure_says_in_its_audit_how_it_was_checked():
    for card in load_raw():
        for field in CITED_FIELDS:
            if card.get(field) is None:
                continue
            line = card.get("audit", {}).get(field, "").casefold()
            assert any(s in line for s in STATUS), (
                f"{card['key']}.{field} does not say it was checked"
            )


def test_a_citation_names_the_document_its_line_and_the_figure_and_nothing_else():
    """What users see (tm hardware, the MFU explanation, the passport): the document, its table
    or line, the figure; never which copies of a page were at hand or when one was read."""
    for card in load_raw():
        for field, line in card["sources"].items():
            low = line.casefold()
            said = [w for w in LOOKUP_WORDS if w in low]
            assert not said, f"{card['key']}.{field}: {said} in {line!r}"
            value = card.get(field)
            if value is not None:
                shown = {f"{value:g}", f"{value:,g}"}
                assert any(text in line for text in shown), (card["key"], field, value)


def test_file_fields_and_unique_names():
    seen: set[str] = set()
    for card in load_raw():
        assert set(card) >= {
            "key",
            "name",
            "bf16_dense_tflops",
            "tensor_clock_mhz",
            "hbm_gb_s",
            "gpm",
            "nvml_names",
            "exclude",
            "sources",
        }
        for name in card["nvml_names"]:
            assert name.casefold() not in seen, f"{name} listed twice"
            seen.add(name.casefold())
            assert lookup(name).key == card["key"], name  # each card is found by its own names


def test_gpm_only_on_hopper_and_newer_data_center():
    gpm = {s.key for s in all_specs() if s.gpm}
    assert {"h100_sxm", "h100_pcie", "h200", "b200", "gb200"} <= gpm
    assert not gpm & {"a100_sxm_80gb", "l4", "l40s", "rtx_4090", "gb10"}


def test_gb10_has_no_peak_but_a_reason():
    spec = lookup("NVIDIA GB10")
    assert spec.bf16_dense_flops is None
    assert "no dense BF16" in spec.sources["bf16_dense_tflops"]


# Cards added with issue 17: (reported name, key, dense BF16, dense FP8, dense TF32) in TFLOP/s.
#   B300: NVIDIA HGX B300 table, 36 PF BF16 / 72 PF FP8 / 18 PF TF32 sparse for 8 GPUs, halved
#   MI300X, MI325X: AMD CDNA 3 white paper Table 1, 1307.4 BF16 and 2614.9 FP8, dense
#   H20, RTX 5090, MI355X: no vendor line we hold, so no peak (never a borrowed one)
NEW_CARDS = [
    ("NVIDIA B300 SXM6 AC", "b300", 2250.0, 4500.0, 1125.0),
    ("AMD Instinct MI300X", "mi300x", 1307.4, 2614.9, None),
    ("AMD Instinct MI325X", "mi325x", 1307.4, 2614.9, None),
    ("NVIDIA H20", "h20", None, None, None),
    ("NVIDIA GeForce RTX 5090", "rtx_5090", None, None, None),
    ("AMD Instinct MI355X", "mi355x", None, None, None),
    # RTX 4090: Ada whitepaper Appendix A, FP8 with FP32 accumulate 330.3 dense (v2.02)
    ("NVIDIA GeForce RTX 4090", "rtx_4090", 165.2, 330.3, None),
]


@pytest.mark.parametrize("name, key, bf16, fp8, tf32", NEW_CARDS)
def test_new_cards_and_their_other_precisions(name, key, bf16, fp8, tf32):
    spec = lookup(name)
    assert spec is not None and spec.key == key
    assert spec.bf16_dense_flops == (None if bf16 is None else bf16 * 1e12)
    for precision, tflops in (("fp8", fp8), ("tf32", tf32)):
        peak = spec.peak_for(precision)
        if tflops is None:
            assert peak is None
        else:
            assert peak[0] == pytest.approx(tflops * 1e12)
            assert "dense" in peak[1]  # the line says the figure is dense (or was halved to it)
    if bf16 is None:  # the reason a card has no peak is written where the figure would be
        assert "No MFU" in spec.sources["bf16_dense_tflops"]


def test_b300_is_not_gb300_and_h20_is_not_h200():
    assert lookup("NVIDIA GB300") is None
    assert lookup("NVIDIA H20").key == "h20" and lookup("NVIDIA H200").key == "h200"


def test_a_spec_is_an_immutable_value_compared_by_its_figures_not_its_citations():
    """What the frozen dataclass it was gave (a plain class now: `dataclasses` is not imported
    on a replay's path): no assignment, equal and hashed by its figures and names whatever its
    `sources` and `dense_flops`, its fields in order in its repr, a copy through pickle."""
    import pickle

    from trainmeter.hardware.specs import DeviceSpec

    spec = lookup("NVIDIA H100 80GB HBM3")
    assert spec is not None
    for name in ("key", "sources", "new"):
        with pytest.raises(AttributeError):
            setattr(spec, name, 1)
    with pytest.raises(AttributeError):
        del spec.key
    fields = ("key", "name", "bf16_dense_flops", "tensor_clock_mhz", "hbm_bytes_per_s", "gpm",
              "nvml_names", "exclude")
    bare = DeviceSpec(*(getattr(spec, f) for f in fields))
    assert bare.sources == {} and bare.dense_flops == {}
    assert bare == spec and hash(bare) == hash(spec) and len({bare, spec}) == 1
    assert DeviceSpec(*(getattr(spec, f) for f in fields[:-1]), exclude=("x",)) != spec
    assert spec != lookup("NVIDIA H200") and spec.__eq__("h100_sxm") is NotImplemented
    assert repr(bare) == (
        "DeviceSpec(" + ", ".join(f"{f}={getattr(spec, f)!r}" for f in fields)
        + ", sources={}, dense_flops={})"
    )
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and repr(copy) == repr(spec)
