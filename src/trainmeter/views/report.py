"""`tm report`: one self-contained HTML file of a finished run, to attach to a pull request.

Everything is inside the file: the headline numbers, where the time and the peak went, the
charts of every series against the step (train and validation of one quantity on one chart; the
loss, tokens/s and MFU first; axes in human units), then the rest of the passport (the same
record as `passport.json`, each number's derivation folded underneath), the charting library
(uPlot, inlined) and its style sheet. Light and dark follow the system, or a switch that the
browser remembers. A Content-Security-Policy forbids every request, so the
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

from ..snapread import get
from .format import metric

VENDOR = Path(__file__).resolve().parent / "web" / "static" / "vendor"
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'none'"
)


class ReportError(Exception):
    """The report cannot be made here (a missing asset): one line for the user."""


def _asset(name: str) -> str:
    """A file the page needs, inlined: uPlot from vendor/, the number rule and the chart kit
    the dashboard uses too (static/format.js, static/charts.js)."""
    path = VENDOR / name if "/" not in name else VENDOR.parent / name.split("/", 1)[1]
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


# The quantities a reader looks at first, in this order; the rest follow by name.
_FIRST = ("loss", "tokens_per_s", "mfu", "step_time_s", "gpu_memory_used_b", "goodput")
_SPLIT = ("train_", "val_", "eval_", "valid_", "test_")


def _quantity(name: str) -> str:
    """train_loss and val_loss are one quantity (loss): they share a chart."""
    for prefix in _SPLIT:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return name


def chart_data(dump: dict[str, Any]) -> list[dict[str, Any]]:
    """The series of a `History.dump()` grouped into charts: the training and validation series
    of one quantity share a chart, the loss, tokens/s and MFU come first. Each series keeps its
    x = step, y = last value of each point, and the min and max it stands for."""
    groups: dict[str, dict[str, Any]] = {}
    for name, s in sorted((dump.get("series") or {}).items()):
        points = [
            (x, lo, hi, last)
            for x, lo, hi, last in zip(s["step"], s["min"], s["max"], s["last"], strict=True)
            if x is not None
        ]
        if not points:
            continue
        key = _quantity(name) if s.get("group") == "loop" else name
        chart = groups.setdefault(key, {
            "name": key,
            "label": (key.replace("_", " ").capitalize() if key != name else s.get("label") or name),
            "unit": s.get("unit") or "",
            "group": s.get("group"),
            "series": [],
        })
        chart["series"].append({
            "name": name,
            "label": s.get("label") or name,
            "x": [p[0] for p in points],
            "min": [p[1] for p in points],
            "max": [p[2] for p in points],
            "last": [p[3] for p in points],
        })
    for chart in groups.values():  # the training series first, then validation
        chart["series"].sort(key=lambda c: (not c["name"].startswith("train"), c["name"]))

    def order(chart: dict[str, Any]) -> tuple[int, int, str]:
        name = chart["name"]
        first = _FIRST.index(name) if name in _FIRST else len(_FIRST)
        return (first, chart["group"] != "loop", name)

    return sorted(groups.values(), key=order)


_STYLE = """
:root{--bg:#fff;--ink:#17191c;--muted:#5d6470;--line:#e3e6ea;--card:#f7f8fa;--accent:#2459c8;
--c1:#2f6fde;--c2:#e0862d;--c3:#1f9d88;--c4:#a04fd1;--c5:#c8372d;--c6:#6b7a8f;--bar:#2459c8;
color-scheme:light}
:root[data-theme=dark]{--bg:#111316;--ink:#e8eaed;--muted:#a2a9b4;--line:#2b2f35;--card:#1a1d21;
--accent:#6a9cf5;--c1:#6a9cf5;--c2:#f0a050;--c3:#3cc4ad;--c4:#c38af0;--c5:#f06b60;--c6:#9aa6b8;
--bar:#6a9cf5;color-scheme:dark}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:var(--bg);
color:var(--ink)}main{max-width:1180px;margin:1.5em auto;padding:0 1em}
main{overflow-wrap:break-word}code{overflow-wrap:anywhere}td.n{white-space:nowrap}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid var(--line)}
.top{display:flex;justify-content:space-between;gap:1em;align-items:flex-start}
select{font:inherit;color:var(--ink);background:var(--bg);border:1px solid var(--line);border-radius:6px}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .8em;border-bottom:1px solid var(--line);
text-align:left;vertical-align:top}th{font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:var(--muted)}code{font-size:.92em}details{margin:.6em 0}summary{cursor:pointer;font-weight:600}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px;margin:1em 0}
.tile{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.tile .k{color:var(--muted);font-size:12.5px}.tile .v{font-size:22px;font-weight:700}
.tile .v small{font-size:14px;color:var(--muted);font-weight:600;white-space:nowrap}
.split{display:flex;height:22px;border-radius:5px;overflow:hidden;background:var(--line);margin:.6em 0}
.sw{display:inline-block;width:10px;height:10px;border-radius:3px;margin-right:6px}
.wf{width:100%;max-width:760px}.wf .bar{background:var(--line);height:12px;border-radius:3px;width:min(260px,20vw)}
.wf .bar i{display:block;height:100%;background:var(--bar);border-radius:3px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(540px,100%),1fr));gap:1em}
.chart{border:1px solid var(--line);border-radius:8px;padding:.5em}.chart h3{font-size:13.5px;margin:0 .3em .2em}
.keys{display:flex;gap:14px;font-size:12px;color:var(--muted);margin:0 .3em}.keys i{display:inline-block;
width:12px;height:3px;margin-right:5px;vertical-align:middle}
.u-axis{color:var(--muted)}
.chart-data{margin:2px 4px 6px;font-size:12px;color:var(--muted)}.chart-data summary{cursor:pointer;display:inline-block}
.chart-data .csv{float:right;font:inherit;color:var(--accent);background:none;border:1px solid var(--line);
border-radius:6px;padding:1px 8px;cursor:pointer}.chart-table{max-height:320px;overflow:auto;margin-top:6px}
.chart-table table{width:100%;font-size:12px}.chart-table td,.chart-table th{text-align:right;padding:2px 8px}
.chart-data caption{text-align:left;padding:2px 0 4px}
@media (max-width:560px){.top{flex-wrap:wrap}td,th{padding:.2em .4em}.wf .bar{display:none}h1{font-size:1.25em}}
"""

_SCRIPT = """
(function(){
  var KEY = 'trainmeter.theme', root = document.documentElement;
  var mq = window.matchMedia ? matchMedia('(prefers-color-scheme: dark)') : null;
  function pick(){ try { return localStorage.getItem(KEY) || 'system'; } catch (e) { return 'system'; } }
  function theme(){ var p = pick(); root.setAttribute('data-theme', p === 'system' ? (mq && mq.matches ? 'dark' : 'light') : p); }
  theme();
  // the page's own rule for numbers and its charts' axes, colours and text alternatives
  var F = window.TMFormat, K = window.TMCharts;
  var charts = JSON.parse(document.getElementById('tm-charts').textContent);
  var host = document.getElementById('charts');
  window.tmCharts = [];
  function value(unit){
    if (unit === 'tokens/s') return function(v){ return v == null ? '' : F.si(v); };
    if (!unit || unit === '1') return function(v){ return v == null ? '' : F.metric(v); };
    return function(v){ return v == null ? '' : F.amount(v, unit); };
  }
  function step(v){ return v == null ? '' : Math.abs(v) >= 1e4 ? F.si(v) : String(Math.round(v * 100) / 100); }
  function tableOf(c, f){
    return function(){
      var header = ['step'], rows = [], shown = [], xs = {};
      c.series.forEach(function(s){ header.push(s.label); s.x.forEach(function(x){ xs[x] = 1; }); });
      var at = c.series.map(function(s){ var m = {}; s.x.forEach(function(x, i){ m[x] = s.last[i]; }); return m; });
      Object.keys(xs).map(Number).sort(function(a, b){ return a - b; }).forEach(function(x){
        var row = [x], text = [step(x)];
        at.forEach(function(m){ var v = m[x]; row.push(v == null ? null : v); text.push(v == null ? '' : f(v)); });
        rows.push(row); shown.push(text);
      });
      return {header: header, rows: rows, shown: shown};
    };
  }
  function draw(){
    window.tmCharts.forEach(function(u){ u.destroy(); });
    window.tmCharts = [];
    while (host.firstChild) host.removeChild(host.firstChild);
    var ink = K.cssVar('--muted'), grid = K.cssVar('--line');
    charts.forEach(function(c){
      var box = document.createElement('div'); box.className = 'chart';
      box.setAttribute('data-series', c.name); box.setAttribute('data-chart', c.name); host.appendChild(box);
      var h = document.createElement('h3'); h.textContent = c.label; box.appendChild(h);
      var top = 0;
      c.series.forEach(function(s){ s.max.forEach(function(v){ if (v != null && Math.abs(v) > top) top = Math.abs(v); }); });
      var f = value(c.unit), series = [{label: 'step'}], bands = [], tables = [];
      if (c.series.length > 1) {
        var keys = document.createElement('div'); keys.className = 'keys';
        c.series.forEach(function(s, k){
          var key = document.createElement('span'), sw = document.createElement('i');
          sw.style.background = K.color(k); key.appendChild(sw);
          key.appendChild(document.createTextNode(s.label)); keys.appendChild(key);
        });
        box.appendChild(keys);
      }
      c.series.forEach(function(s, k){
        var color = K.color(k), base = series.length;
        series.push({label: s.label, stroke: color, width: 1.6, spanGaps: true, points: {show: false}});
        series.push({label: s.label + ' min', stroke: 'transparent', spanGaps: true, points: {show: false}});
        series.push({label: s.label + ' max', stroke: 'transparent', spanGaps: true, points: {show: false}});
        bands.push({series: [base + 2, base + 1], fill: color + '33'});
        tables.push([s.x, s.last, s.min, s.max]);
      });
      var data = tables.length === 1 ? tables[0] : uPlot.join(tables);
      var axis = {stroke: ink, grid: {stroke: grid}, ticks: {stroke: grid}};
      var axisY = Object.assign({size: K.axisSize, values: function(u, v){ return v.map(f); }}, axis);
      if (K.ROUND_TICKS[c.unit]) K.roundAxis(axisY, c.unit);  // 0/100/200 MiB, 0/20/40%
      var plot = document.createElement('div');
      plot.setAttribute('role', 'img');
      plot.setAttribute('aria-label', c.label + ': a chart; its data is in the table below it');
      box.appendChild(plot);
      var opts = {
        width: Math.max(240, box.clientWidth - 16), height: 260, legend: {show: false},
        // shares from 0 to at least 100%, so a flat 100% reads as full, not as noise (a share
        // that stays small keeps its own range, so its changes stay visible)
        scales: {x: {time: false}, y: c.unit === 'ratio' && top >= 0.2 ? {range: function(u, lo, hi){ return [Math.min(0, lo), Math.max(1, hi)]; }} : {}},
        series: series, bands: bands,
        axes: [Object.assign({label: 'step', labelSize: 22, values: function(u, v){ return v.map(step); }}, axis), axisY]
      };
      var u = new uPlot(opts, data, plot);
      u.tmTitle = c.label;
      window.tmCharts.push(u);
      box.appendChild(K.textAlternative(c.label, tableOf(c, f)));
    });
    document.querySelectorAll('.tiles').forEach(function(t){ K.evenTiles(t, 150, 10); });
    document.body.setAttribute('data-charts-ready', String(window.tmCharts.length));
  }
  draw();
  var sel = document.getElementById('theme');
  sel.value = pick();
  sel.addEventListener('change', function(){
    try { if (sel.value === 'system') localStorage.removeItem(KEY); else localStorage.setItem(KEY, sel.value); } catch (e) {}
    theme(); draw();
  });
  if (mq && mq.addEventListener) mq.addEventListener('change', function(){ theme(); draw(); });
  var resized = null;
  window.addEventListener('resize', function(){ clearTimeout(resized); resized = setTimeout(draw, 200); });
})();
"""


def _fmt(entry: dict[str, Any]) -> str:
    from .passport_md import fmt

    return fmt(entry.get("value"), entry.get("unit", ""))


_HEADLINE = ("tokens_per_s", "samples_per_s", "mfu", "wall_time_s", "steps", "tokens", "goodput",
             "step_time_s", "energy_j")


def _headline_html(passport: dict[str, Any]) -> str:
    """The numbers a reader wants first, as tiles (absent ones are left for 'Not computed')."""
    from .passport_md import LABELS, fmt

    numbers = passport.get("training", {})
    tiles = []
    for name in _HEADLINE:
        entry = numbers.get(name) or {}
        if entry.get("value") is None:
            continue
        if name == "samples_per_s" and get(numbers, "tokens_per_s.value") is not None:
            continue  # one throughput: tokens when the run has them
        text = fmt(entry["value"], entry.get("unit", ""))
        tiles.append(f'<div class="tile" data-headline="{_e(name)}"><div class="k">{_e(LABELS.get(name, name))}'
                     f'</div><div class="v">{_value_html(text)}</div></div>')
    return f'<div class="tiles">{"".join(tiles)}</div>' if tiles else ""


def _value_html(text: str) -> str:
    """A headline value with its unit in small type ("11.2k <small>tokens/s</small>"), as the
    dashboard's tiles: the number stays large and the whole fits a narrow tile."""
    number, space, unit = text.rpartition(" ")
    if space and number and unit[:1].isalpha():
        return f"{_e(number)}<small> {_e(unit)}</small>"
    return _e(text)


_PART_COLORS = ("--c1", "--c2", "--c3", "--c4", "--muted", "--line")


def _time_html(passport: dict[str, Any]) -> str:
    """Where the wall time went: one stacked bar and its table."""
    from .passport_md import fmt

    split = passport.get("time_split") or []
    wall = get(passport, "training.wall_time_s.value")
    if not split or not wall:
        return ""
    bar, rows = [], []
    for i, part in enumerate(split):
        share = part["s"] / wall
        color = f"var({_PART_COLORS[i % len(_PART_COLORS)]})"
        if part.get("not_measured"):
            rows.append(f'<tr><td><span class="sw" style="background:{color}"></span>{_e(part.get("label"))}'
                        f'</td><td colspan=2>not measured: {_e(part["not_measured"])}</td></tr>')
            continue
        bar.append(f'<div style="width:{share * 100:.2f}%;background:{color}"></div>')
        rows.append(f'<tr><td><span class="sw" style="background:{color}"></span>{_e(part.get("label"))}'
                    f'</td><td class=n>{_e(fmt(part["s"], "s"))}</td><td class=n>{_e(fmt(share, "fraction"))}</td></tr>')
    return ('<h2>Where the time went</h2><div class="split" role="img" aria-label="time split">'
            + "".join(bar) + "</div><table>" + "".join(rows) + "</table>")


def _ranks_html(passport: dict[str, Any]) -> str:
    """Each rank's step, computing and waiting for the others, and the straggler in words."""
    from .format import ms
    from .passport_md import fmt
    from .straggler_text import sentence

    ranks = passport.get("ranks")
    if not isinstance(ranks, dict) or not ranks.get("per_rank"):
        return ""
    named = {str(r) for r in (ranks.get("straggler") or {}).get("ranks") or []}
    rows = []
    for rank, row in ranks["per_rank"].items():
        step, compute, wait = row.get("step_s"), row.get("compute_s"), row.get("wait_s")
        bar = ""
        if step and compute is not None and wait is not None:
            bar = (f'<div class="split" style="width:160px;margin:0" role="img" '
                   f'aria-label="compute and waiting">'
                   f'<div style="width:{compute / step * 100:.2f}%;background:var(--c1)"></div>'
                   f'<div style="width:{wait / step * 100:.2f}%;background:var(--muted)"></div></div>')
        mark = " (the others wait for it)" if rank in named else ""
        rows.append(f"<tr><td>rank {_e(rank)}{_e(mark)}</td><td class=n>{_e(ms(step))}</td>"
                    f"<td class=n>{_e(ms(compute))}</td><td class=n>{_e(ms(wait))}</td>"
                    f"<td class=n>{_e(fmt(row.get('wait_share'), 'fraction'))}</td><td>{bar}</td></tr>")
    said = [sentence(e) for e in ranks.get("episodes") or [] if isinstance(e, dict)]
    said = said or [f"No straggler: {ranks.get('rule')}"]
    return ("<h2>Ranks: a step, computing and waiting for the others</h2><table>"
            "<tr><th>Rank</th><th>Step</th><th>Compute</th><th>Waiting</th><th>Share waiting</th>"
            "<th></th></tr>" + "".join(rows) + "</table>"
            + "".join(f"<p>{_e(line[:1].upper() + line[1:])}</p>" for line in said))


def _waterfall_html(passport: dict[str, Any]) -> str:
    from .passport_md import waterfall_rows

    rows = waterfall_rows(passport.get("waterfall"))
    if not rows:
        return ""
    out = ["<h2>Where the peak went (MFU waterfall)</h2>",
           '<table class="wf"><tr><th>Factor</th><th>Kept</th><th>Share of the dense peak after it</th>'
           "<th></th></tr>"]
    for label, kept, share in rows:
        width = share.rstrip("%") if share.endswith("%") else ""
        try:
            bar = f'<div class="bar"><i style="width:{min(100.0, float(width)):.2f}%"></i></div>' if width else ""
        except ValueError:
            bar = ""
        out.append(f"<tr><td>{_e(label.replace('**', ''))}</td><td class=n>{_e(kept)}</td>"
                   f"<td class=n>{_e(share)}</td><td>{bar}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _passport_html(passport: dict[str, Any]) -> str:
    """The rest of the passport: compute, final values, plan, what is absent, derivations."""
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
            shown = "not known" if final is None else metric(final)
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
    absent = passport.get("absent") or {}
    if absent:
        out += ["<h2>Not computed</h2>", "<ul>"]
        from .passport_md import absent_by_reason

        out += [f"<li>{', '.join(f'<b>{_e(n)}</b>' for n in names)}: {_e(why)}</li>"
                for why, names in absent_by_reason(absent)]
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
    """The whole page: headline numbers, the time split and the waterfall, then the charts, then
    the rest of the passport. `charts`: from `chart_data`."""
    js, css = _asset("uPlot.iife.min.js"), _asset("uPlot.min.css")
    kit = _asset("static/format.js") + "\n" + _asset("static/charts.js")
    run = passport.get("run", {})
    title = f"trainmeter: {run.get('name') or 'run'}"
    subtitle = f"started {run.get('start_utc') or 'at an unknown time'}, status {run.get('status')}"
    command = " ".join(run.get("command") or [])
    empty = "" if charts else "<p class=muted>No series were recorded in this run.</p>"
    theme = ('<label class=muted>theme <select id="theme"><option value="system">System</option>'
             '<option value="light">Light</option><option value="dark">Dark</option></select></label>')
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{_e(title)}</title>
<style>{css}</style><style>{_STYLE}</style>
</head><body><main>
<div class="top"><div><h1>{_e(title)}</h1>
<p class="muted">{_e(subtitle)}{'<br><code>' + _e(command) + '</code>' if command else ''}</p></div>{theme}</div>
{_headline_html(passport)}
{_time_html(passport)}
{_ranks_html(passport)}
{_waterfall_html(passport)}
<h2>Charts</h2>
<div id="charts" class="charts"></div>{empty}
{_passport_html(passport)}
</main>
<script type="application/json" id="tm-passport">{_json_for_script(passport)}</script>
<script type="application/json" id="tm-charts">{_json_for_script(charts)}</script>
<script>{js}</script>
<script>{kit}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def build_report(run_dir: Path) -> str:
    """Replay a run and return its report page (raises OSError, ReportError).

    The charts come from the dashboard's bounded history, fed by the replay, and the numbers
    from its final snapshot: nothing is kept per step, so the memory does not grow with the
    length of the log (a table of every step here cost 800 MB on a 2M-step log)."""
    from ..exporters.tables import MAX_SAMPLES, MIN_INTERVAL_S
    from ..redact import private_dirs
    from ..runlog.replay import replay
    from .history import History
    from .passport import build_passport

    _asset("uPlot.iife.min.js")  # fail before the replay, not after
    history = History()
    result = replay(
        Path(run_dir) / "events.jsonl",
        observers=[history],
        max_snapshots=MAX_SAMPLES,
        min_interval_s=MIN_INTERVAL_S,
    )
    history.on_snapshot(result.snapshot, None)  # the final numbers, as `tm view` draws them
    passport = build_passport(result.snapshot, private_dirs(run_dir))
    return render_report(passport, chart_data(history.dump()))
