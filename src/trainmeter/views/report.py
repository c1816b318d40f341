"""`tm report`: one self-contained HTML file of a finished run, to attach to a pull request.

Everything is inside the file: the passport (the same record as `passport.json`, shown as
tables, each number's derivation folded underneath), the charts of every series against the
step (the loop's series and trainmeter's own: tokens/s, MFU, goodput, ...), the charting library
(uPlot, inlined) and its style sheet. A Content-Security-Policy forbids every request, so the
page works offline and tells nobody it was opened.

The series come from a replay of the log fed through `views.history.History` (the dashboard's own
bounded history), so a report of a week-long run stays small: at most a couple of thousand
points a series, each point keeping the min, max and last value it stands for.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

VENDOR = Path(__file__).resolve().parent / "web" / "static" / "vendor"
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'none'"
)


class ReportError(Exception):
    """The report cannot be made here (a missing asset): one line for the user."""


def _asset(name: str) -> str:
    path = VENDOR / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise ReportError(
            f"the charting library is missing from this installation ({name}); reinstall trainmeter"
        ) from None


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _json_for_script(obj: Any) -> str:
    """JSON that cannot close the <script> element it sits in."""
    text = json.dumps(obj, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def chart_data(dump: dict[str, Any]) -> list[dict[str, Any]]:
    """Each series of a `History.dump()` as one chart: x = step, y = last value (and min/max)."""
    charts = []
    for name, s in sorted(
        (dump.get("series") or {}).items(), key=lambda kv: (kv[1].get("group") != "loop", kv[0])
    ):
        points = [
            (x, lo, hi, last)
            for x, lo, hi, last in zip(s["step"], s["min"], s["max"], s["last"], strict=True)
            if x is not None
        ]
        if not points:
            continue
        charts.append({
            "name": name,
            "label": s.get("label") or name,
            "unit": s.get("unit") or "",
            "group": s.get("group"),
            "x": [p[0] for p in points],
            "min": [p[1] for p in points],
            "max": [p[2] for p in points],
            "last": [p[3] for p in points],
        })
    return charts


_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#1d1d1f}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .8em;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}th{font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#666}.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(500px,1fr));gap:1em}
.chart{border:1px solid #e4e4e4;border-radius:6px;padding:.4em}code{font-size:.92em}
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}
"""

_SCRIPT = """
(function(){
  var charts = JSON.parse(document.getElementById('tm-charts').textContent);
  var host = document.getElementById('charts');
  window.tmCharts = [];
  function si(v){
    if (v == null) return '';
    var a = Math.abs(v), units = [[1e15,'P'],[1e12,'T'],[1e9,'G'],[1e6,'M'],[1e3,'k']];
    for (var i = 0; i < units.length; i++)
      if (a >= units[i][0]) return +(v / units[i][0]).toPrecision(3) + units[i][1];
    return a === 0 ? '0' : String(+v.toPrecision(3));
  }
  function short(u, vals){ return vals.map(si); }
  charts.forEach(function(c, i){
    var box = document.createElement('div'); box.className = 'chart';
    box.setAttribute('data-series', c.name); host.appendChild(box);
    var color = c.group === 'loop' ? '#1f6feb' : '#c2410c';
    var opts = {
      title: c.label + (c.unit ? ' (' + c.unit + ')' : ''), width: 500, height: 220,
      scales: {x: {time: false}},
      axes: [{label: 'step', values: short}, {values: short, size: 60}],
      series: [{label: 'step'},
               {label: 'last', stroke: color, width: 1.5},
               {label: 'min', stroke: color, alpha: 0.25, width: 1},
               {label: 'max', stroke: color, alpha: 0.25, width: 1}]
    };
    window.tmCharts.push(new uPlot(opts, [c.x, c.last, c.min, c.max], box));
  });
  document.body.setAttribute('data-charts-ready', String(window.tmCharts.length));
})();
"""


def _fmt(entry: dict[str, Any]) -> str:
    from .passport_md import fmt

    return fmt(entry.get("value"), entry.get("unit", ""))


def _passport_html(passport: dict[str, Any]) -> str:
    from .passport_md import LABELS, hardware_line, value_text

    numbers = passport.get("training", {})
    out = ["<h2>Compute</h2>", "<table>"]
    out.append(f"<tr><th>Hardware</th><td>{_e(hardware_line(passport.get('hardware', {})))}</td></tr>")
    for name, label in LABELS.items():
        if name in numbers:
            out.append(f"<tr><th>{_e(label)}</th><td>{_e(value_text(name, numbers[name]))}</td></tr>")
    sw = passport.get("software") or {}
    if sw:
        text = ", ".join(f"{k} {v}" for k, v in sw.items())
        out.append(f"<tr><th>Software</th><td>{_e(text)}</td></tr>")
    out.append("</table>")
    series = passport.get("series") or {}
    if series:
        out += ["<h2>Final values</h2>", "<table><tr><th>Series</th><th>Final</th><th>Step</th>"
                "<th>Points</th></tr>"]
        for name, s in series.items():
            final = s.get("final")
            shown = "not known" if final is None else f"{final:.6g}"
            out.append(f"<tr><td>{_e(name)}</td><td class=n>{_e(shown)}</td>"
                       f"<td class=n>{_e(s.get('step') or '')}</td>"
                       f"<td class=n>{_e(s.get('count') or '')}</td></tr>")
        out.append("</table>")
    plan = passport.get("plan") or {}
    if plan:
        from .passport_md import fmt

        out += ["<h2>Plan against the run</h2>",
                "<table><tr><th></th><th>Planned</th><th>This run</th></tr>"]
        for key, label, unit in (("mfu", "MFU", "fraction"), ("tokens_per_s", "Tokens/s",
                                 "tokens/s"), ("hours", "Hours", "h")):
            if key in plan:
                out.append(f"<tr><th>{label}</th><td class=n>{_e(fmt(plan[key]['planned'], unit))}"
                           f"</td><td class=n>{_e(fmt(plan[key]['actual'], unit))}</td></tr>")
        out.append("</table>")
    split = passport.get("time_split") or []
    wall = (numbers.get("wall_time_s") or {}).get("value")
    if split and wall:
        out += ["<h2>Where the time went</h2>", "<table>"]
        for part in split:
            share = part["s"] / wall
            out.append(f"<tr><td>{_e(part.get('label'))}</td><td class=n>{part['s']:.3g} s</td>"
                       f"<td class=n>{share * 100:.1f}%</td></tr>")
        out.append("</table>")
    from .passport_md import waterfall_rows

    wf_rows = waterfall_rows(passport.get("waterfall"))
    if wf_rows:
        out += ["<h2>Where the peak went (MFU waterfall)</h2>",
                "<table><tr><th>Factor</th><th>Kept</th><th>Share of the dense peak after it</th></tr>"]
        for label, kept, share in wf_rows:
            out.append(f"<tr><td>{_e(label.replace('**', ''))}</td><td class=n>{_e(kept)}</td>"
                       f"<td class=n>{_e(share)}</td></tr>")
        out.append("</table>")
    absent = passport.get("absent") or {}
    if absent:
        out += ["<h2>Not computed</h2>", "<ul>"]
        out += [f"<li><b>{_e(k)}</b>: {_e(v)}</li>" for k, v in absent.items()]
        out.append("</ul>")
    out += ["<details><summary>How each number was computed</summary>"]
    for name, entry in numbers.items():
        out.append(f"<p><b>{_e(LABELS.get(name, name))}</b> = {_e(_fmt(entry))}")
        if entry.get("formula"):
            out.append(f": <code>{_e(entry['formula'])}</code>")
        out.append("</p><ul>")
        for inp in entry.get("inputs") or []:
            value = inp.get("value")
            shown = f"{value:.6g}" if isinstance(value, float) else str(value)
            out.append(f"<li>{_e(inp.get('name'))}: {_e(shown)} {_e(inp.get('unit') if inp.get('unit') != '1' else '')} "
                       f"<span class=muted>({_e(inp.get('source'))})</span></li>")
        for key, title in (("convention", "convention"), ("source", "source"), ("note", "note"),
                           ("peak_source", "peak's source")):
            if entry.get(key):
                out.append(f"<li>{title}: {_e(entry[key])}</li>")
        out.append("</ul>")
    out.append("</details>")
    alerts = passport.get("alerts") or []
    if alerts:
        out += ["<h2>Alerts</h2>", "<ul>"] + [f"<li>{_e(a)}</li>" for a in alerts] + ["</ul>"]
    return "\n".join(out)


def render_report(passport: dict[str, Any], charts: list[dict[str, Any]]) -> str:
    """The whole page. `charts`: from `chart_data`."""
    js, css = _asset("uPlot.iife.min.js"), _asset("uPlot.min.css")
    run = passport.get("run", {})
    title = f"trainmeter: {run.get('name') or 'run'}"
    subtitle = f"started {run.get('start_utc') or 'at an unknown time'}, status {run.get('status')}"
    command = " ".join(run.get("command") or [])
    empty = "" if charts else "<p class=muted>No series were recorded in this run.</p>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{_e(title)}</title>
<style>{css}</style><style>{_STYLE}</style>
</head><body>
<h1>{_e(title)}</h1>
<p class="muted">{_e(subtitle)}{'<br><code>' + _e(command) + '</code>' if command else ''}</p>
<h2>Series</h2>
<div id="charts" class="charts"></div>{empty}
{_passport_html(passport)}
<script type="application/json" id="tm-passport">{_json_for_script(passport)}</script>
<script type="application/json" id="tm-charts">{_json_for_script(charts)}</script>
<script>{js}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def build_report(run_dir: Path) -> str:
    """Replay a run and return its report page (raises OSError, ReportError)."""
    from ..exporters.tables import run_table
    from ..redact import private_dirs
    from .history import History
    from .passport import build_passport

    _asset("uPlot.iife.min.js")  # fail before the replay, not after
    history = History()
    table = run_table(run_dir, history=history)
    passport = build_passport(table.snapshot, private_dirs(run_dir))
    return render_report(passport, chart_data(history.dump()))
