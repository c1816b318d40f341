"""How a number reads, everywhere: one rule for every view and message, the page's too.

The rule (docs/reading.md says it for users; `views/web/static/format.js` is the same rule in
the page's language; both are checked against one table of cases, tests/views/format_cases.json).
Standard library only, in the bottom layer, so the engine's messages read numbers this way too:

- digits: a scaled value keeps one decimal below 100 and none from 100 up (1.2M, 35.1k, 123k,
  83.9 ms, 2.5 s, 1.4 kJ); a whole count below a thousand stays whole (950, 2); a value below
  one that no prefix scales keeps three significant digits (0.5, 0.123). Ties round away from
  zero on the exact binary value, as JavaScript's `toFixed` does, so both languages agree;
- a count reads like a count, with k, M, B, T (7B parameters, 1.4T tokens, 64.2k tokens/s);
- a quantity with a unit takes the SI prefix on its unit (2.5 GFLOP, 989 TFLOP/s, 6.8 mJ), and
  bytes the binary one (2.0 GiB, 344 MiB, 512 B);
- a percentage has one decimal (42.0%, 0.4%); a tiny one two significant digits, never 0.0%
  for a value that is not zero (0.042%), past four zeros with a power of ten (3.6e-6%);
- a duration: below a second in ms or µs (83.9 ms), then seconds (2.5 s, 12.3 s), then minutes
  and seconds (5m03s), hours and minutes (2h05m), days and hours (2d07h);
- a value the loop logs (a loss, an accuracy, a learning rate) keeps four significant digits
  (0.3877, 2.046, 3.0e-4 below a thousandth), a count-sized one k, M, B, T;
- a number the engine left absent reads `?`: never zero.

`amount(value, unit)` picks among these by the unit a snapshot gives a number in.
"""

from __future__ import annotations

import math

from .snapread import finite as number

_COUNT_SCALES = ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))
_UNIT_SCALES = (
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
    (1e-3, "m"),
    (1e-6, "µ"),
    (1e-9, "n"),
)
_BYTE_SCALES = ((2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki"))
#: A value this close under a scale is shown at that scale (999.96 reads "1.0k", not "1000").
_ROUNDS_UP = 0.9995
ABSENT = "?"


def fixed_places(x: float, places: int) -> str:
    """`x` with `places` decimals, a tie rounded away from zero on the exact binary value
    (JavaScript's `toFixed`; Python's own formatting rounds a tie to even).

    Worked in integers on the float's exact ratio: the same digits as `Decimal(x).quantize`
    with ROUND_HALF_UP, without importing decimal (its C library's load, ~1.5 ms, at the end of
    every run: the passport formats its numbers here). What integers do not cover (a number
    that is not a float or an int, infinities, negative places, more digits than Decimal's
    context holds) goes through Decimal, as before."""
    if isinstance(x, (float, int)) and places >= 0 and math.isfinite(x):
        num, den = x.as_integer_ratio()
        whole, rest = divmod(abs(num) * 10**places, den)
        if 2 * rest >= den:
            whole += 1
        digits = str(whole)
        if len(digits) <= _DECIMAL_DIGITS:
            if places:
                digits = digits.rjust(places + 1, "0")
                digits = f"{digits[:-places]}.{digits[-places:]}"
            return f"-{digits}" if num < 0 and whole else digits
    return _fixed_places_decimal(x, places)


#: The digits `decimal`'s default context holds: past them `quantize` raises, and so do we.
_DECIMAL_DIGITS = 28


def _fixed_places_decimal(x: float, places: int) -> str:
    from decimal import ROUND_HALF_UP, Decimal

    quantum = Decimal(1).scaleb(-places)
    text = format(Decimal(x).quantize(quantum, rounding=ROUND_HALF_UP), "f")
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


def _below_one(x: float) -> str:
    """Three significant digits, trailing zeros dropped: 0.5, 0.123, 0.00123."""
    places = 2 - math.floor(math.log10(abs(x)))
    text = fixed_places(x, places)
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def mantissa(x: float) -> str:
    """The digits of a scaled value: none from 100 up, one below, three significant below 1."""
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 99.95:
        return fixed_places(x, 0)
    if a >= 0.95:
        return fixed_places(x, 1)
    return _below_one(x)


def si(value: float | int | None) -> str:
    """A count: 1234567 -> '1.2M', 35123 -> '35.1k', 2.5e9 -> '2.5B', 950 -> '950', 0.5 -> '0.5'."""
    v = number(value)
    if v is None:
        return ABSENT
    for scale, suffix in _COUNT_SCALES:
        if abs(v) >= scale * _ROUNDS_UP:
            return mantissa(v / scale) + suffix
    if v == int(v):
        return str(int(v))
    return mantissa(v)


def si_unit(value: float | int | None, unit: str) -> str:
    """A quantity with the SI prefix on its unit: 1403 J -> '1.4 kJ', 0.00685 J -> '6.8 mJ',
    2.5e9 FLOP -> '2.5 GFLOP'; bytes (B, B/s) in binary units: 2**31 B -> '2.0 GiB'."""
    v = number(value)
    if v is None:
        return ABSENT
    if v == 0:
        return f"0 {unit}"
    if unit == "B" or unit.startswith("B/"):  # memory and disk in one family everywhere
        for scale, prefix in _BYTE_SCALES:
            if abs(v) >= scale * _ROUNDS_UP:
                return f"{mantissa(v / scale)} {prefix}{unit}"
        return f"{fixed_places(v, 0)} {unit}"
    for scale, prefix in _UNIT_SCALES:
        if abs(v) >= scale * _ROUNDS_UP:
            return f"{mantissa(v / scale)} {prefix}{unit}"
    return f"{mantissa(v / 1e-9)} n{unit}"


def percent(fraction: float | int | None) -> str:
    """One decimal for ordinary values; a tiny one keeps two significant digits, never 0.0%."""
    f = number(fraction)
    if f is None:
        return ABSENT
    value = 100 * f
    a = abs(value)
    if a == 0 or a >= 0.095:
        return fixed_places(value, 1) + "%"
    if a < 0.0001:  # past four zeros the digits hide: 3.6e-6%
        return _exponent(value) + "%"
    places = 1 - math.floor(math.log10(a))
    return fixed_places(value, places).rstrip("0").rstrip(".") + "%"


def duration(seconds: float | None) -> str:
    """83.9 ms, 2.5 s, 12.3 s, 5m03s, 2h05m, 2d07h; below a millisecond in µs."""
    s = number(seconds)
    if s is None:
        return ABSENT
    s = max(s, 0.0)
    if s == 0:
        return "0 s"
    if 0.9995 <= s < 59.95:
        return f"{mantissa(s)} s"
    if s < 1:
        return si_unit(s, "s")
    whole = math.floor(s + 0.5)
    if whole < 3600:
        m, rest = divmod(whole, 60)
        return f"{m}m{rest:02d}s"
    if whole < 86400:
        h, rest = divmod(whole, 3600)
        return f"{h}h{rest // 60:02d}m"
    d, rest = divmod(whole, 86400)
    return f"{d}d{rest // 3600:02d}h"


def metric(value: float | int | None) -> str:
    """A value the loop logs: 0.387745 -> '0.3877', 2.04567 -> '2.046', 0.0003 -> '3.0e-4',
    123456 -> '123k'; four significant digits, trailing zeros dropped."""
    v = number(value)
    if v is None:
        return ABSENT
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 9999.5:
        return si(v)
    if a >= 0.00099995:
        text = fixed_places(v, max(0, 3 - math.floor(math.log10(a))))
        return text.rstrip("0").rstrip(".") if "." in text else text
    return _exponent(v)


def _exponent(v: float) -> str:
    """Two significant digits and a power of ten: 3.0e-4, 2.5e-7."""
    exponent = math.floor(math.log10(abs(v)))
    digits = fixed_places(v / 10.0**exponent, 1)
    if abs(float(digits)) >= 10:  # 9.96e-5 rounds up to the next power
        exponent += 1
        digits = fixed_places(v / 10.0**exponent, 1)
    return f"{digits}e{exponent}"


#: Units the SI prefix goes on (the part before a "/": FLOP/token, J/token, B/s).
_PREFIXED = frozenset({"FLOP", "FLOPs", "J", "W", "B", "Wh", "Hz", "byte"})
#: Units that already carry their scale: the number is written as it is (1980 MHz, 65 °C).
_PLAIN = frozenset({"MHz", "GHz", "°C", "C", "cores", "%"})


def amount(value: float | int | None, unit: str = "") -> str:
    """A number in the unit the snapshot gives it in: a share as a percentage, seconds as a
    duration, a physical unit with its SI prefix, a count with k, M, B, T and its unit after."""
    v = number(value)
    if v is None:
        return ABSENT
    if unit in ("fraction", "ratio", "fraction of dense peak"):
        return percent(v)
    if unit == "s":
        return duration(v)
    if unit == "factor":
        return "×" + mantissa(v)
    if unit.split("/")[0].split(" ")[0] in _PREFIXED:
        return si_unit(v, unit)
    if unit in _PLAIN:
        return f"{mantissa(v) if v != int(v) else int(v)} {unit}"
    return si(v) + (f" {unit}" if unit and unit != "1" else "")


#: A step time is a duration like any other (kept for callers that name it so).
ms = duration


def fixed(value: float, places: int = 3) -> str:
    """`places` decimals, but a non-zero number too small for them in scientific notation:
    0.25 -> '0.250', 0.00001234 -> '1.23e-05', never '0.000'."""
    if value != 0 and abs(value) < 0.5 * 10.0**-places:
        return f"{value:.2e}"
    return f"{value:.{places}f}"
