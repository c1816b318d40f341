/* trainmeter: what every chart of the page, the runs page and the report shares (TMCharts).
 *
 * Round axis ticks in a unit a person reads, the y axis as wide as its labels, the palette,
 * even rows of tiles, the loss smoothing, and each chart's text alternative: its data as a
 * table (for screen readers and for copying) and as a CSV file. Loaded after format.js.
 */
(function (root) {
  "use strict";
  var F = root.TMFormat;
  function isNum(v) { return typeof v === "number" && isFinite(v); }

  // Axis titles in words a person reads: the unit the tick labels are in.
  var AXIS_UNITS = { ratio: "%", B: "bytes (GiB, MiB)", "B/s": "bytes/s", W: "W", s: "seconds", "tokens/s": "tokens/s", cores: "cores" };
  // The series colours, as CSS variables of the page's style sheet (the same in the report).
  var PALETTE = ["--c1", "--c2", "--c3", "--c4", "--c5", "--c6"];
  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  function color(k) { return cssVar(PALETTE[k % PALETTE.length]); }

  // The y axis is as wide as its longest label, so no label is cut.
  function axisSize(u, values) {
    if (!values || !values.length) return 48;
    var longest = Math.max.apply(null, values.map(function (v) { return String(v).length; }));
    return 18 + longest * 7;
  }

  // Round ticks in a unit a person reads: 1, 2 or 5 × 10^k of B/KiB/MiB/GiB for bytes, of ms or
  // s for seconds, of % for shares (0/100/200/300 MiB, not 95.4/191/286/381 MiB). The unit is
  // picked from the top of the axis, and the axis title names it.
  var ROUND_TICKS = { B: 1, "B/s": 1, s: 1, W: 1, ratio: 1 };
  function axisUnit(unit, top) {
    var a = Math.abs(top) || 0;
    if (unit === "B" || unit === "B/s") {
      var names = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
      while (a >= 1024 && i < names.length - 1) { a /= 1024; i++; }
      var name = names[i] + (unit === "B/s" ? "/s" : "");
      return { div: Math.pow(1024, i), name: name, title: (unit === "B/s" ? "bytes/s (" : "bytes (") + name + ")" };
    }
    if (unit === "s") return a < 1 ? { div: 1e-3, name: "ms", title: "milliseconds" } : { div: 1, name: "s", title: "seconds" };
    if (unit === "ratio") return { div: 0.01, name: "%", title: "%", glue: "" };
    return { div: 1, name: unit, title: AXIS_UNITS[unit] || unit };
  }
  // The round step nearest to span / n from a little below, so a short axis still gets ~n ticks.
  function niceStep(span, n) {
    var raw = 0.7 * span / Math.max(n, 1), pow = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = [1, 2, 5, 10];
    for (var i = 0; i < m.length; i++) if (m[i] * pow >= raw * (1 - 1e-9)) return m[i] * pow;
    return 10 * pow;
  }
  // {unit, step (in that unit), ticks (in the axis's own unit)} for the range lo..hi.
  function roundTicks(unit, lo, hi, n) {
    var au = axisUnit(unit, Math.max(Math.abs(lo), Math.abs(hi)));
    var a = lo / au.div, b = hi / au.div;
    if (!(b > a)) return { unit: au, step: 1, ticks: [lo] };
    var step = niceStep(b - a, n), ticks = [];
    for (var k = Math.ceil(a / step - 1e-9); k * step <= b + step * 1e-9; k++) ticks.push(k * step * au.div);
    return { unit: au, step: step, ticks: ticks };
  }
  function tickLabel(v, t) {
    var dec = t.step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(t.step) - 1e-9));
    var text = (v / t.unit.div).toFixed(dec);
    if (Number(text) === 0) text = (0).toFixed(dec);  // never "-0"
    return text + (t.unit.glue === "" ? "" : " ") + t.unit.name;
  }
  function tickCount(u) { return Math.max(2, Math.floor(u.bbox.height / (window.devicePixelRatio || 1) / 32)); }
  function yTicks(u, unit) { var sc = u.scales.y; return roundTicks(unit, sc.min, sc.max, tickCount(u)); }
  // A uPlot axis with round ticks in `unit`; the card ([data-chart]) records its labels.
  function roundAxis(axis, unit) {
    axis.splits = function (u) { return yTicks(u, unit).ticks; };
    axis.values = function (u, vals) {
      var t = yTicks(u, unit), labels = vals.map(function (v) { return tickLabel(v, t); });
      var card = u.root.closest ? u.root.closest("[data-chart]") : null;
      if (card) { card.setAttribute("data-y-ticks", labels.join("|")); card.setAttribute("data-y-title", t.unit.title); }
      return labels;
    };
    axis.label = function (u) { return yTicks(u, unit).unit.title; };
    axis.labelSize = 20;
    axis.size = axisSize;
  }

  // As many columns as fit (`min` px a tile at least), then as few as keep the same number of
  // rows, so the rows are even: 8 tiles where 7 fit make two rows of 4, not 7 and 1 alone.
  function tileColumns(n, width, min, gap) {
    var fit = Math.max(1, Math.floor((width + gap) / (min + gap)));
    var rows = Math.ceil(n / fit);
    return Math.max(1, Math.ceil(n / rows));
  }
  function evenTiles(box, min, gap) {
    var n = box.children.length;
    if (n) box.style.gridTemplateColumns = "repeat(" + tileColumns(n, box.clientWidth, min, gap) + ", minmax(0, 1fr))";
  }

  // The loss smoothed as TensorBoard does: an exponential moving average, debiased at the
  // start so the first points are not pulled to zero; `weight` 0 is the raw curve. A gap
  // (null) stays a gap and does not reset the average.
  function smooth(values, weight) {
    if (!(weight > 0)) return values.slice();
    var out = [], last = 0, n = 0;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (!isNum(v)) { out.push(v == null ? null : v); continue; }
      last = last * weight + (1 - weight) * v;
      n++;
      out.push(last / (1 - Math.pow(weight, n)));
    }
    return out;
  }

  // A chart's data as CSV: a header, then one row per x; exact values (not as shown), an
  // empty cell for no value. Quotes a field with a comma, a quote or a line break.
  function csvField(v) {
    if (v == null || (typeof v === "number" && !isFinite(v))) return "";
    var s = String(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  function csv(header, rows) {
    return [header].concat(rows).map(function (r) { return r.map(csvField).join(","); }).join("\n") + "\n";
  }
  function download(name, text) {
    var blob = new Blob([text], { type: "text/csv;charset=utf-8" });
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }
  function fileName(text) { return String(text || "chart").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "chart"; }

  // The chart's text alternative: a <details> that holds its data as a table (built when
  // opened: a long run's table is not in the page until asked for), and beside it a button
  // that downloads the same data as CSV.
  // `data()` returns {header: [...], rows: [[...]], shown: [[...]]}: exact rows for the CSV,
  // the same rows as the chart shows them for the table.
  function textAlternative(title, data) {
    var wrap = document.createElement("div");
    wrap.className = "chart-data";
    var box = document.createElement("details");
    var summary = document.createElement("summary");
    summary.textContent = "Data as a table";
    var button = document.createElement("button");
    button.type = "button";
    button.className = "csv";
    button.textContent = "Download CSV";
    button.setAttribute("aria-label", "Download the data of " + title + " as CSV");
    button.addEventListener("click", function (ev) {
      ev.preventDefault();
      var d = data();
      download(fileName(title) + ".csv", csv(d.header, d.rows));
    });
    var holder = document.createElement("div");
    holder.className = "table-wrap chart-table";
    function fill() {
      while (holder.firstChild) holder.removeChild(holder.firstChild);
      var d = data(), table = document.createElement("table");
      var cap = document.createElement("caption");
      cap.textContent = title + ": " + d.rows.length + " points";
      table.appendChild(cap);
      var head = table.createTHead().insertRow();
      d.header.forEach(function (h) { var th = document.createElement("th"); th.scope = "col"; th.textContent = h; head.appendChild(th); });
      var body = table.createTBody();
      d.shown.forEach(function (r) {
        var tr = body.insertRow();
        r.forEach(function (c, i) {
          var cell = i === 0 ? document.createElement("th") : document.createElement("td");
          if (i === 0) cell.scope = "row";
          cell.className = "num";
          cell.textContent = c == null ? "" : String(c);
          tr.appendChild(cell);
        });
      });
      holder.appendChild(table);
    }
    box.addEventListener("toggle", function () { if (box.open) fill(); });
    wrap.refresh = function () { if (box.open) fill(); };
    Object.defineProperty(wrap, "open", { get: function () { return box.open; } });
    box.appendChild(summary);
    box.appendChild(holder);
    wrap.appendChild(button);
    wrap.appendChild(box);
    return wrap;
  }

  // The loss smoothing's slider (#smooth, its value shown in #smooth-value), one setting for
  // every page: S.smooth read from storage at once, kept there after each move, then redraw().
  function smoothSlider(S, redraw) {
    S.smooth = 0;
    try { S.smooth = Math.min(0.99, Math.max(0, Number(localStorage.getItem("trainmeter.smooth")) || 0)); } catch (e) { /* storage off */ }
    var slider = document.getElementById("smooth");
    var shown = document.getElementById("smooth-value");
    function show() { shown.textContent = S.smooth > 0 ? S.smooth.toFixed(2) : "off"; }
    slider.value = String(S.smooth);
    show();
    slider.addEventListener("input", function (ev) {
      S.smooth = Number(ev.target.value) || 0;
      show();
      try { localStorage.setItem("trainmeter.smooth", String(S.smooth)); } catch (e) { /* storage off */ }
      redraw();
    });
  }

  root.TMCharts = {
    AXIS_UNITS: AXIS_UNITS, PALETTE: PALETTE, ROUND_TICKS: ROUND_TICKS, cssVar: cssVar, color: color,
    axisSize: axisSize, axisUnit: axisUnit, niceStep: niceStep, roundTicks: roundTicks, tickLabel: tickLabel,
    roundAxis: roundAxis, tileColumns: tileColumns, evenTiles: evenTiles, smooth: smooth, csv: csv,
    download: download, textAlternative: textAlternative, smoothSlider: smoothSlider, isNum: isNum,
    format: F,
  };
})(typeof window !== "undefined" ? window : globalThis);
