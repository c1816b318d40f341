"""Device specs: one JSON file a card under `specs/`, each figure with the datasheet line it
comes from, and a lookup by the model name NVML reports.

A file's `sources` are the citations users see (`tm hardware`, the MFU explanation, the
passport): the document, its table or line, and the figure, nothing else. How each figure was
looked up and how far it was checked is the maintainers' record, the file's `audit`, which
no view shows (tests/hardware/test_specs.py reads both).

Why it matches the way it does: a wrong peak is the most common way an MFU goes wrong (a sparse
headline figure, a PCIe card given the SXM peak, a new card silently given an old one's). So a
name matches only when one of a card's `nvml_names` is the whole reported name, or a run of
whole words inside it ("NVIDIA H200" inside "NVIDIA H200 NVL"), never a family or a prefix of a
word ("NVIDIA L4" does not match "NVIDIA L40S"). The longest matching name wins, and a card's
`exclude` substrings rule it out ("GH200" is not an H200). No match is `None`, never a guess.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any

#: Dense peaks at other precisions than BF16, by the precision's name: a spec gives the ones
#: its datasheet prints (`fp8_dense_tflops`, ...), never one derived from another.
PRECISIONS = ("fp8", "fp16", "tf32", "fp32")
#: Figures that must carry a source line whenever they are not null.
CITED_FIELDS = ("bf16_dense_tflops", "tensor_clock_mhz", "hbm_gb_s") + tuple(
    f"{p}_dense_tflops" for p in PRECISIONS
)


class DeviceSpec:
    """One card. Rates are in base units: FLOP/s and bytes/s; None where nothing is published.

    Immutable, equal and hashed by its figures and names (`sources` and `dense_flops` aside),
    as the frozen dataclass it replaces was: a plain class, since `dataclasses` imports `inspect`
    (~8 ms) and the engine loads this module at a replay's first GPU record (see
    `engine/section.py`)."""

    key: str
    name: str
    bf16_dense_flops: float | None
    tensor_clock_mhz: float | None
    hbm_bytes_per_s: float | None
    gpm: bool
    nvml_names: tuple[str, ...]
    exclude: tuple[str, ...]
    sources: dict[str, str]
    #: precision ("fp8", "tf32", ...) -> dense peak FLOP/s, only those the datasheet gives
    dense_flops: dict[str, float]

    def __init__(
        self,
        key: str,
        name: str,
        bf16_dense_flops: float | None,
        tensor_clock_mhz: float | None,
        hbm_bytes_per_s: float | None,
        gpm: bool,
        nvml_names: tuple[str, ...],
        exclude: tuple[str, ...] = (),
        sources: dict[str, str] | None = None,
        dense_flops: dict[str, float] | None = None,
    ) -> None:
        # past the `__setattr__` that refuses assignment, in the dataclass's field order
        self.__dict__.update(
            key=key,
            name=name,
            bf16_dense_flops=bf16_dense_flops,
            tensor_clock_mhz=tensor_clock_mhz,
            hbm_bytes_per_s=hbm_bytes_per_s,
            gpm=gpm,
            nvml_names=nvml_names,
            exclude=exclude,
            sources={} if sources is None else sources,
            dense_flops={} if dense_flops is None else dense_flops,
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def _compared(self) -> tuple[object, ...]:
        return (self.key, self.name, self.bf16_dense_flops, self.tensor_clock_mhz,
                self.hbm_bytes_per_s, self.gpm, self.nvml_names, self.exclude)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        return "DeviceSpec(" + ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()) + ")"

    def peak_for(self, precision: str) -> tuple[float, str | None] | None:
        """(dense peak FLOP/s at `precision`, its source line), or None when not published.
        `bf16` is the MFU peak itself."""
        if precision == "bf16":
            flops = self.bf16_dense_flops
        else:
            flops = self.dense_flops.get(precision)
        if flops is None:
            return None
        return flops, self.sources.get(f"{precision}_dense_tflops")

    @property
    def ridge(self) -> float | None:
        """FLOP per byte where the roofline bends: dense peak FLOP/s over peak bytes/s."""
        if not self.bf16_dense_flops or not self.hbm_bytes_per_s:
            return None
        return self.bf16_dense_flops / self.hbm_bytes_per_s

    @property
    def source(self) -> str | None:
        """The line the dense peak comes from (what a view prints next to MFU)."""
        return self.sources.get("bf16_dense_tflops")


def _spec_from(data: dict[str, Any]) -> DeviceSpec:
    tflops = data.get("bf16_dense_tflops")
    gb_s = data.get("hbm_gb_s")
    return DeviceSpec(
        key=str(data["key"]),
        name=str(data["name"]),
        bf16_dense_flops=None if tflops is None else float(tflops) * 1e12,
        tensor_clock_mhz=data.get("tensor_clock_mhz"),
        hbm_bytes_per_s=None if gb_s is None else float(gb_s) * 1e9,
        gpm=bool(data.get("gpm", False)),
        nvml_names=tuple(data.get("nvml_names") or ()),
        exclude=tuple(data.get("exclude") or ()),
        sources=dict(data.get("sources") or {}),
        dense_flops={
            p: float(data[f"{p}_dense_tflops"]) * 1e12
            for p in PRECISIONS
            if data.get(f"{p}_dense_tflops") is not None
        },
    )


def load_raw() -> list[dict[str, Any]]:
    """The spec files as written, sorted by key (tests check every figure has its source)."""
    # the folder beside this module (importlib.resources, for packages inside a zip file,
    # costs several milliseconds of imports: zipfile, tempfile, shutil, lzma, bz2)
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "specs")
    out = []
    for name in os.listdir(folder):
        if name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                out.append(json.load(fh))
    return sorted(out, key=lambda d: d["key"])


@lru_cache(maxsize=1)
def all_specs() -> tuple[DeviceSpec, ...]:
    """Every card in the table, loaded once."""
    return tuple(_spec_from(d) for d in load_raw())


def _words(text: str) -> list[str]:
    return text.casefold().split()


def _contains_words(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


@lru_cache(maxsize=256)
def lookup(nvml_name: str | None) -> DeviceSpec | None:
    """The spec whose NVML name matches `nvml_name` (case-insensitive), or None.

    The longest matching name wins; a card whose `exclude` substring occurs in the name is
    skipped.
    """
    if not isinstance(nvml_name, str) or not nvml_name.strip():
        return None
    words = _words(nvml_name)
    folded = nvml_name.casefold()
    best: tuple[int, DeviceSpec] | None = None
    for spec in all_specs():
        if any(ex.casefold() in folded for ex in spec.exclude):
            continue
        for name in spec.nvml_names:
            name_words = _words(name)
            if _contains_words(words, name_words):
                length = len(" ".join(name_words))
                if best is None or length > best[0]:
                    best = (length, spec)
    return None if best is None else best[1]
