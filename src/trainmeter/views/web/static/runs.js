/* trainmeter: the runs page and runs side by side (`tm runs --web`, `tm compare A B --web`).
 *
 * `/` lists every run of the directory (/api/runs): status, cause of death, headline numbers;
 * filter, sort, open one (its dashboard at /run/<dir>/), tick several to compare.
 * `/compare?runs=A,B` overlays their curves (/api/series/<dir>: loss, tokens/s, MFU, memory)
 * aligned by step, tokens or time, and puts their settings and numbers in one table, rows that
 * differ marked. Every number reads by the one rule (format.js); absent is "—", never 0.
 */
(function () {
  "use strict";
  var F = window.TMFormat, K = window.TMCharts;
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function byId(id) { return document.getElementById(id); }
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v == null) return;
      if (k === "text") e.textContent = v; else if (k === "class") e.className = v; else e.setAttribute(k, v);
    });
    (children || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  var NONE = "—";
  function when(utc) { return utc ? String(utc).slice(0, 16).replace("T", " ") : NONE; }
  function runLink(r) { return "/run/" + encodeURIComponent(r.dir) + "/"; }
  function mfuText(r) {
    if (isNum(r.mfu)) return F.percent(r.mfu) + (r.mfu_convention ? " " + r.mfu_convention : "");
    if (r.mfu_range && isNum(r.mfu_range[0]) && isNum(r.mfu_range[1])) return F.percent(r.mfu_range[0]) + "–" + F.percent(r.mfu_range[1]);
    return NONE;
  }
  function num(f) { return function (v) { return isNum(v) ? f(v) : NONE; }; }

  // The list's columns: title, what it sorts by, how a cell reads.
  var COLUMNS = [
    { key: "name", title: "Run", sort: function (r) { return r.dir; } },
    { key: "start_utc", title: "Started (UTC)", sort: function (r) { return r.start_utc || ""; }, show: function (r) { return when(r.start_utc); } },
    { key: "status", title: "Status", sort: function (r) { return r.state + r.status; } },
    { key: "duration_s", title: "Duration", num: true, show: function (r) { return num(F.duration)(r.duration_s); } },
    { key: "steps", title: "Steps", num: true, show: function (r) { return num(F.si)(r.steps); } },
    { key: "tokens", title: "Tokens", num: true, show: function (r) { return num(F.si)(r.tokens); } },
    { key: "tokens_per_s", title: "Tokens/s", num: true, show: function (r) { return num(F.si)(r.tokens_per_s); } },
    { key: "mfu", title: "MFU", num: true, sort: function (r) { return isNum(r.mfu) ? r.mfu : (r.mfu_range ? r.mfu_range[1] : null); }, show: mfuText },
    { key: "loss", title: "Loss", num: true, show: function (r) { return num(F.metric)(r.loss); } },
    { key: "goodput", title: "Goodput", num: true, show: function (r) { return num(F.percent)(r.goodput); } },
  ];
  var S = { runs: [], sortKey: "start_utc", sortDown: true, selected: {}, filter: "", state: "all", smooth: 0, align: "step" };
  try {
    var saved = JSON.parse(localStorage.getItem("trainmeter.runs") || "{}");
    if (saved.sortKey) { S.sortKey = saved.sortKey; S.sortDown = !!saved.sortDown; }
    S.align = localStorage.getItem("trainmeter.align") || "step";
  } catch (e) { /* storage off */ }
  function remember() {
    try { localStorage.setItem("trainmeter.runs", JSON.stringify({ sortKey: S.sortKey, sortDown: S.sortDown })); } catch (e) { /* storage off */ }
  }

  // ---------------------------------------------------------------- the list
  function matches(r) {
    if (S.state !== "all" && r.state !== S.state) return false;
    if (!S.filter) return true;
    var hay = [r.dir, r.name, r.status, r.cause || "", (r.command || []).join(" ")].join(" ").toLowerCase();
    return S.filter.toLowerCase().split(/\s+/).every(function (w) { return !w || hay.indexOf(w) >= 0; });
  }
  function sortValue(col, r) { return col.sort ? col.sort(r) : r[col.key]; }
  function sorted(rows) {
    var col = COLUMNS.filter(function (c) { return c.key === S.sortKey; })[0] || COLUMNS[1];
    return rows.slice().sort(function (a, b) {
      var x = sortValue(col, a), y = sortValue(col, b);
      if (x == null && y == null) return 0;
      if (x == null) return 1;  // absent last, whichever way
      if (y == null) return -1;
      var c = x < y ? -1 : x > y ? 1 : 0;
      return S.sortDown ? -c : c;
    });
  }
  function renderHead() {
    var tr = el("tr", null, [el("th", { scope: "col", class: "pick" }, [el("span", { class: "visually-hidden", text: "Compare" })])]);
    COLUMNS.forEach(function (c) {
      var sortedBy = c.key === S.sortKey;
      var button = el("button", { type: "button", class: "sort", "data-sort": c.key }, [c.title, sortedBy ? (S.sortDown ? " ↓" : " ↑") : ""]);
      button.addEventListener("click", function () {
        if (S.sortKey === c.key) S.sortDown = !S.sortDown; else { S.sortKey = c.key; S.sortDown = !!c.num || c.key === "start_utc"; }
        remember();
        renderList();
      });
      tr.appendChild(el("th", { scope: "col", class: c.num ? "" : "text", "aria-sort": sortedBy ? (S.sortDown ? "descending" : "ascending") : null }, [button]));
    });
    clear(byId("runs").tHead).appendChild(tr);
  }
  function renderList() {
    renderHead();
    var body = clear(byId("runs").tBodies[0]);
    var shown = sorted(S.runs.filter(matches));
    shown.forEach(function (r) {
      var box = el("input", { type: "checkbox", "aria-label": "compare " + r.dir, "data-pick": r.dir });
      box.checked = !!S.selected[r.dir];
      box.addEventListener("change", function () { if (box.checked) S.selected[r.dir] = true; else delete S.selected[r.dir]; renderPicked(); });
      var cells = [el("td", { class: "pick" }, [box])];
      COLUMNS.forEach(function (c) {
        if (c.key === "name") {
          cells.push(el("td", { class: "text" }, [el("a", { href: runLink(r), text: r.name }), el("div", { class: "hint mono", text: r.dir })]));
        } else if (c.key === "status") {
          cells.push(el("td", { class: "text status-" + r.state, "data-state": r.state }, [r.state === "died" ? (r.cause || r.status) : r.status]));
        } else {
          cells.push(el("td", { class: c.num ? "num" : "text", text: c.show ? c.show(r) : String(r[c.key] == null ? NONE : r[c.key]) }));
        }
      });
      body.appendChild(el("tr", { "data-run": r.dir, class: r.state === "died" ? "died" : null }, cells));
    });
    var n = S.runs.length;
    byId("runs-count").textContent = shown.length === n ? n + (n === 1 ? " run" : " runs") : shown.length + " of " + n + " runs shown";
    renderPicked();
  }
  function picked() { return S.runs.filter(function (r) { return S.selected[r.dir]; }).map(function (r) { return r.dir; }); }
  function renderPicked() {
    var names = picked(), button = byId("compare-selected");
    button.disabled = names.length < 2;
    button.textContent = names.length >= 2 ? "Compare " + names.length + " runs" : "Compare selected";
  }
  byId("compare-selected").addEventListener("click", function () {
    var names = picked();
    if (names.length >= 2) location.href = "/compare?runs=" + names.map(encodeURIComponent).join(",");
  });
  byId("filter").addEventListener("input", function (ev) { S.filter = ev.target.value.trim(); renderList(); });
  byId("state-filter").addEventListener("change", function (ev) { S.state = ev.target.value; renderList(); });

  // ---------------------------------------------------------------- side by side
  var CHARTS = [
    { id: "loss", title: "Loss", names: ["train_loss", "loss"], unit: "", smooth: true },
    { id: "val_loss", title: "Validation loss", names: ["val_loss", "eval_loss"], unit: "", smooth: true },
    { id: "throughput", title: "Tokens per second", names: ["tokens_per_s"], unit: "tokens/s" },
    { id: "mfu", title: "MFU", names: ["mfu"], unit: "ratio" },
    { id: "memory", title: "Memory", names: ["memory_reserved_b", "gpu_memory_used_b", "host_rss_b"], unit: "B", common: true },
  ];
  var X_TITLES = { step: "step", tokens: "tokens", time: "time since start" };
  var ROWS = [  // the settings and numbers table: label, how a run's cell reads
    ["Status", function (r) { return r.state === "died" ? (r.cause || r.status) : r.status; }],
    ["Started (UTC)", function (r) { return when(r.start_utc); }],
    ["Command", function (r) { return r.command ? r.command.join(" ") : NONE; }],
    ["GPUs", function (r) { return isNum(r.gpus) ? r.gpus + (r.gpu ? " × " + r.gpu : "") : NONE; }],
    ["FLOPs convention", function (r) { return r.convention || NONE; }],
    ["Budget", function (r) { return r.budget || NONE; }],
    ["Parameters", function (r) { return num(F.si)(r.params); }],
    ["Layers × width", function (r) { return isNum(r.layers) && isNum(r.d_model) ? r.layers + " × " + r.d_model : NONE; }],
    ["Sequence length", function (r) { return isNum(r.seq_len) ? String(r.seq_len) : NONE; }],
    ["Tokens a step", function (r) { return num(F.si)(r.tokens_per_step); }],
    ["Samples a step", function (r) { return num(F.si)(r.samples_per_step); }],
    ["Matmul precision", function (r) { return r.precision || NONE; }],
    ["Duration", function (r) { return num(F.duration)(r.duration_s); }],
    ["Steps", function (r) { return num(F.si)(r.steps); }],
    ["Tokens", function (r) { return num(F.si)(r.tokens); }],
    ["Tokens/s", function (r) { return num(F.si)(r.tokens_per_s); }],
    ["Step time", function (r) { return num(F.duration)(r.step_time_s); }],
    ["MFU", mfuText],
    ["Goodput", function (r) { return num(F.percent)(r.goodput); }],
    ["Final loss", function (r) { return num(F.metric)(r.loss); }],
    ["Peak memory", function (r) { return isNum(r.memory_peak_b) ? F.si_unit(r.memory_peak_b, "B") : NONE; }],
    ["FLOPs per token", function (r) { return isNum(r.flops_per_token) ? F.si_unit(r.flops_per_token, "FLOP") : NONE; }],
    ["trainmeter", function (r) { return r.tm_version || NONE; }],
  ];
  var C = { runs: [], series: {}, charts: {} };
  function renderSettings() {
    var table = clear(byId("settings"));
    var head = el("tr", null, [el("th", { scope: "col", text: "" })].concat(C.runs.map(function (r, i) {
      return el("th", { scope: "col", class: "text" }, [el("i", { class: "swatch", style: "background:" + K.color(i) }), el("a", { href: runLink(r), text: r.name }), el("div", { class: "hint mono", text: r.dir })]);
    })));
    table.appendChild(el("thead", null, [head]));
    var body = el("tbody");
    ROWS.forEach(function (row) {
      var cells = C.runs.map(function (r) { return row[1](r); });
      var differs = cells.some(function (c) { return c !== cells[0]; });
      if (cells.every(function (c) { return c === NONE; })) return;  // nobody has it: no row
      body.appendChild(el("tr", { class: differs ? "differs" : null, "data-row": row[0] }, [
        el("th", { scope: "row", class: "text" }, [row[0], differs ? el("span", { class: "ne", title: "the runs differ", "aria-label": "(differs)", text: " ≠" }) : null]),
      ].concat(cells.map(function (c) { return el("td", { class: "text" }, [c]); }))));
    });
    table.appendChild(body);
  }
  function seriesOf(run, spec) {
    var got = (C.series[run.dir] || {}).series || {};
    var names = spec.common ? [commonName(spec)] : spec.names;
    for (var i = 0; i < names.length; i++) if (names[i] && got[names[i]]) return got[names[i]];
    return null;
  }
  // One quantity for every run on a chart that could draw several (GPU memory beside a CPU
  // run's RSS would compare nothing): the first that all the runs have, else the first any has.
  function commonName(spec) {
    var has = function (n, r) { return !!(((C.series[r.dir] || {}).series || {})[n]); };
    var all = spec.names.filter(function (n) { return C.runs.every(function (r) { return has(n, r); }); });
    if (all.length) return all[0];
    return spec.names.filter(function (n) { return C.runs.some(function (r) { return has(n, r); }); })[0] || null;
  }
  function titleOf(spec) {
    if (!spec.common) return spec.title;
    var name = commonName(spec), any = null;
    C.runs.forEach(function (r) { var s = ((C.series[r.dir] || {}).series || {})[name]; if (s && !any) any = s; });
    return spec.title + (any && any.label ? ": " + any.label : "");
  }
  // One run's points on the chosen axis: x increasing, the value last of each point.
  function columns(s) {
    var xs = s[S.align] || [], x = [], y = [];
    for (var i = 0; i < xs.length; i++) {
      if (!isNum(xs[i]) || (x.length && xs[i] <= x[x.length - 1])) continue;
      x.push(xs[i]); y.push(isNum(s.last[i]) ? s.last[i] : null);
    }
    return [x, y];
  }
  function xText(v) {
    if (!isNum(v)) return "";
    if (S.align === "time") return F.duration(v);
    return Math.abs(v) >= 1e4 ? F.si(v) : String(Math.round(v * 100) / 100);
  }
  function yText(unit) {
    return function (v) { return !isNum(v) ? "" : unit ? (unit === "tokens/s" ? F.si(v) : F.amount(v, unit)) : F.metric(v); };
  }
  function chartData(spec) {
    var present = [], tables = [];
    C.runs.forEach(function (r, i) {
      var s = seriesOf(r, spec);
      if (!s) return;
      var cols = columns(s);
      if (!cols[0].length) return;
      present.push({ run: r, index: i, label: s.label, few: cols[1].filter(isNum).length < 3 });
      tables.push(cols);
    });
    if (!tables.length) return null;
    var data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    var smoothed = spec.smooth && S.smooth > 0;
    if (smoothed) {
      var out = [data[0]];
      for (var k = 1; k < data.length; k++) out.push(data[k], K.smooth(data[k], S.smooth));
      data = out;
    }
    return { data: data, present: present, stride: smoothed ? 2 : 1 };
  }
  function tableOf(spec) {
    return function () {
      var got = chartData(spec), header = [X_TITLES[S.align]], rows = [], shown = [], f = yText(spec.unit);
      if (!got) return { header: header, rows: rows, shown: shown };
      got.present.forEach(function (p) { header.push(p.run.name); if (got.stride === 2) header.push(p.run.name + " (smoothed)"); });
      for (var i = 0; i < got.data[0].length; i++) {
        var row = [got.data[0][i]], text = [xText(got.data[0][i])];
        for (var k = 1; k < got.data.length; k++) { var v = got.data[k][i]; row.push(isNum(v) ? v : null); text.push(isNum(v) ? f(v) : ""); }
        rows.push(row); shown.push(text);
      }
      return { header: header, rows: rows, shown: shown };
    };
  }
  function renderCharts() {
    var host = clear(byId("compare-charts"));
    Object.keys(C.charts).forEach(function (id) { C.charts[id].destroy(); });
    C.charts = {};
    var ink = K.cssVar("--muted"), grid = K.cssVar("--line");
    CHARTS.forEach(function (spec) {
      var got = chartData(spec);
      if (!got) return;
      var card = el("div", { class: "chart", "data-chart": spec.id, "data-runs": got.present.map(function (p) { return p.run.dir; }).join(" ") });
      var keys = el("div", { class: "keys" }, got.present.map(function (p) {
        return el("span", { class: "key", "data-key": p.run.dir }, [el("i", { style: "background:" + K.color(p.index) }), p.run.name]);
      }));
      var plot = el("div", { class: "plot", role: "img", "aria-label": spec.title + " of " + got.present.map(function (p) { return p.run.name; }).join(" and ") + ": a chart; its data is in the table below it" });
      card.appendChild(el("div", { class: "chart-head" }, [el("h3", { text: titleOf(spec) })]));
      card.appendChild(keys);
      card.appendChild(plot);
      card.appendChild(K.textAlternative(spec.title, tableOf(spec)));
      host.appendChild(card);
      var series = [{ value: function (u, v) { return xText(v); } }];
      got.present.forEach(function (p) {
        var color = K.color(p.index);
        // a run with one or two points (a short run's tokens/s) shows them as dots: no line to draw
        series.push({ label: p.run.name, stroke: got.stride === 2 ? color + "55" : color, width: got.stride === 2 ? 1 : 1.6, spanGaps: true, points: { show: p.few, size: 7, fill: color } });
        if (got.stride === 2) series.push({ label: p.run.name + " smoothed", stroke: color, width: 1.8, spanGaps: true, points: { show: false } });
      });
      var axisY = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, size: K.axisSize, values: function (u, vals) { return vals.map(yText(spec.unit)); } };
      if (K.ROUND_TICKS[spec.unit]) K.roundAxis(axisY, spec.unit);
      else if (spec.id.indexOf("loss") >= 0) { axisY.label = "loss"; axisY.labelSize = 20; }
      var opts = {
        width: Math.max(240, plot.clientWidth - 4), height: 260, legend: { show: false }, series: series,
        scales: { x: { time: false } },
        axes: [{ stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, label: X_TITLES[S.align], labelSize: 20, values: function (u, vals) { return vals.map(xText); } }, axisY],
        cursor: { drag: { x: true, y: false, setScale: true } },
      };
      C.charts[spec.id] = new uPlot(opts, got.data, plot);
      card.setAttribute("data-points", String(got.data[0].length));
    });
    document.body.setAttribute("data-compared", String(Object.keys(C.charts).length));
  }
  function renderCompare() {
    byId("page-title").textContent = "Runs side by side";
    document.title = C.runs.map(function (r) { return r.name; }).join(" vs ") + " · trainmeter";
    var meta = clear(byId("page-meta"));
    meta.appendChild(el("a", { href: "/", text: "all runs" }));
    clear(byId("run-keys"));
    C.runs.forEach(function (r, i) {
      byId("run-keys").appendChild(el("span", { class: "key" }, [el("i", { style: "background:" + K.color(i) }), el("a", { href: runLink(r), text: r.name }), " ", el("span", { class: "hint mono", text: r.dir })]));
    });
    renderSettings();
    renderCharts();
  }
  K.smoothSlider(S, renderCharts);
  byId("align").value = S.align;
  byId("align").addEventListener("change", function (ev) {
    S.align = ev.target.value;
    try { localStorage.setItem("trainmeter.align", S.align); } catch (e) { /* storage off */ }
    renderCharts();
  });
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { if (!byId("compare-view").hidden) renderCharts(); }, 150);
  });
  document.addEventListener("tm-theme", function () { if (!byId("compare-view").hidden) renderCharts(); });

  // ---------------------------------------------------------------- loading
  function fail(text) { var box = byId("load-error"); box.hidden = false; box.textContent = text; }
  function getJson(url) {
    return fetch(url).then(function (r) {
      if (!r.ok) throw new Error(url + ": " + r.status);
      return r.json();
    });
  }
  getJson("/api/runs").then(function (listing) {
    S.runs = listing.runs || [];
    byId("foot-dir").textContent = "runs in " + listing.root;
    var wanted = /^\/compare$/.test(location.pathname) ? (new URLSearchParams(location.search).get("runs") || "").split(",").filter(Boolean) : null;
    if (!wanted) {
      byId("list-view").hidden = false;
      byId("filter").value = S.filter;
      renderList();
      document.body.setAttribute("data-listed", String(S.runs.length));
      return;
    }
    var byDir = {};
    S.runs.forEach(function (r) { byDir[r.dir] = r; });
    var missing = wanted.filter(function (d) { return !byDir[d]; });
    if (missing.length) fail("No such run here: " + missing.join(", ") + ". The list of runs is at /.");
    C.runs = wanted.filter(function (d) { return byDir[d]; }).map(function (d) { return byDir[d]; });
    byId("compare-view").hidden = false;
    return Promise.all(C.runs.map(function (r) {
      return getJson("/api/series/" + encodeURIComponent(r.dir)).then(function (s) { C.series[r.dir] = s; });
    })).then(renderCompare);
  }).catch(function (e) { fail("The runs could not be read: " + e.message); });
})();
