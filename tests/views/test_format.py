"""One value reads one way on every surface: the Python rule and the page's JavaScript rule are
checked against one table of cases (format_cases.json), and each surface that writes numbers
(passport, report, compare, check, runs, summary) is checked to write them by that rule."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from trainmeter import readable
from trainmeter.views import format as f

from ..conftest import REPO

CASES_FILE = Path(__file__).with_name("format_cases.json")
CASES = json.loads(CASES_FILE.read_text(encoding="utf-8"))["cases"]
FORMAT_JS = REPO / "src" / "trainmeter" / "views" / "web" / "static" / "format.js"


def _args(args: list) -> list:
    return [float("nan") if a == "nan" else a for a in args]


@pytest.mark.parametrize(("name", "args", "text"), CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_python_reads_each_case_as_the_table_says(name: str, args: list, text: str) -> None:
    assert getattr(readable, name)(*_args(args)) == text


def test_the_table_covers_every_rule_and_the_issue_examples() -> None:
    by = {(c[0], json.dumps(c[1])): c[2] for c in CASES}
    assert {c[0] for c in CASES} == {"si", "si_unit", "percent", "duration", "metric", "amount"}
    # the examples that read several ways before: 83.9 ms was "0.1s", 2.5e9 "2.5B" or "2.5G",
    # 200,000 s "2d07h" or "55h33m", 2.5 s "2.50 s" or "2.5 s"
    assert by[("duration", "[0.0839]")] == "83.9 ms"
    assert by[("si", "[2500000000.0]")] == "2.5B"
    assert by[("si_unit", '[2500000000.0, "FLOP"]')] == "2.5 GFLOP"
    assert by[("duration", "[200000]")] == "2d07h"
    assert by[("duration", "[2.5]")] == "2.5 s"


@pytest.mark.slow
def test_the_pages_javascript_reads_each_case_as_the_table_says(tmp_path: Path) -> None:
    """static/format.js, the page's formatter, under Node (the browser's engine family): every
    case of the same table. The page itself is checked to use it in the browser tests."""
    node = shutil.which("node")
    assert node, "node is needed (scripts/install_system_deps.sh installs it with npm)"
    script = tmp_path / "check.js"
    script.write_text(
        "require(process.argv[2]);\n"
        "const cases = require(process.argv[3]).cases;\n"
        "const bad = [];\n"
        "for (const [name, args, text] of cases) {\n"
        "  const got = globalThis.TMFormat[name](...args.map(a => a === 'nan' ? NaN : a));\n"
        "  if (got !== text) bad.push([name, args, got, text]);\n"
        "}\n"
        "console.log(JSON.stringify({checked: cases.length, bad: bad}));\n"
    )
    out = subprocess.run([node, str(script), str(FORMAT_JS), str(CASES_FILE)],
                         capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(out.stdout)
    assert result == {"checked": len(CASES), "bad": []}


def test_the_views_name_is_the_one_rule() -> None:
    assert f.duration is readable.duration and f.si is readable.si and f.ms is readable.duration


def test_every_surface_writes_by_the_rule() -> None:
    from trainmeter.cli.check import _pct, _seconds, _si
    from trainmeter.cli.compare import cell
    from trainmeter.cli.runs import _count, _duration, _mfu
    from trainmeter.views.compare import _pct as compare_pct
    from trainmeter.views.insight_text import _pct as insight_pct
    from trainmeter.views.insight_text import _si as insight_si
    from trainmeter.views.passport_md import fmt as passport_fmt

    # step time 83.9 ms: the passport, the report's headline (passport fmt), compare, check
    assert passport_fmt(0.0839, "s") == cell(0.0839, "s") == _seconds(0.0839) == "83.9 ms"
    assert cell(0.0839, "s/step") == "83.9 ms"
    # 2.5e9: a count everywhere (tm check, tm runs, passport, insight lines)
    assert _si(2.5e9) == _count(2.5e9) == insight_si(2.5e9) == "2.5B"
    assert passport_fmt(2.5e9, "tokens") == "2.5B tokens"
    assert passport_fmt(2.5e9, "FLOP") == "2.5 GFLOP"
    assert _duration(200_000) == passport_fmt(200_000, "s") == "2d07h"
    assert _pct(0.0042) == compare_pct(0.0042) == insight_pct(0.0042) == "0.4%"
    assert _mfu(0.381, "megatron") == "38.1% megatron"
    assert passport_fmt(None, "s") == "not known" and cell(None, "s") == "-"
    assert cell(0.0, "s/step", not_measured="no checkpoint was saved") == "not measured"


def test_fixed_places_in_integers_gives_decimals_digits() -> None:
    """`fixed_places` works on the float's exact ratio in integers (no decimal import at the end
    of every run); it must give what `Decimal(x).quantize(..., ROUND_HALF_UP)` gives, ties away
    from zero on the exact binary value, for every kind of number a view formats."""
    import random
    import struct

    # ties worked by hand: 0.125 and 2.5 are exact in binary (away from zero); 2.675 and 1.005
    # are a hair under their decimal spelling (down), 0.035 a hair over (up)
    assert readable.fixed_places(0.125, 2) == "0.13"
    assert readable.fixed_places(-2.5, 0) == "-3"
    assert readable.fixed_places(2.675, 2) == "2.67"
    assert readable.fixed_places(1.005, 2) == "1.00"
    assert readable.fixed_places(0.035, 2) == "0.04"
    assert readable.fixed_places(-0.0001, 2) == "0.00"  # no "-0.00"
    assert readable.fixed_places(7, 3) == "7.000"
    rng = random.Random(30)
    values: list[float] = [0.0, -0.0, 1e27, -1e30, 10**30, float("inf"), float("nan"), True]
    for _ in range(1000):
        values.append(rng.uniform(-1000, 1000))
        values.append(rng.choice([1, -1]) * 10 ** rng.uniform(-12, 25))
        values.append(round(rng.uniform(-100, 100), rng.randint(0, 6)))
        values.append(struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0])
    for value in values:
        for places in (0, 1, 2, 3, 6, 12):
            try:
                want = readable._fixed_places_decimal(value, places)
            except ArithmeticError as exc:  # inf, nan, past Decimal's 28 digits: the same error
                with pytest.raises(type(exc)):
                    readable.fixed_places(value, places)
                continue
            assert readable.fixed_places(value, places) == want, (value, places)
