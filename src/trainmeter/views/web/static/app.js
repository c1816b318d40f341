/* trainmeter dashboard: renders the engine's snapshot and the bounded history.
 *
 * Data comes from /api/events (server-sent events: the whole state first, then the snapshot
 * and the new points about once a second). Nothing here computes a number the engine did not:
 * the page formats, places and explains what the snapshot says, and shows an absent number
 * with the engine's reason, never as zero.
 */
(function () {
  "use strict";

  // ---------------------------------------------------------------- state
  var S = {
    snap: {},
    mode: "live",
    finished: false,
    connected: false,
    seq: 0,
    series: {},        // name -> {meta..., step:[], tokens:[], flops:[], time:[], min:[], max:[], last:[]}
    axesAbsent: {},
    flopsConvention: null,
    axis: "step",
    charts: {},        // chart id -> {plot, el, spec, zoomed, log}
    runDir: null,
    pressed: false,    // a pointer button is down: snapshots wait for its release (see apply)
    renderHeld: false,
    opened: {},        // details the reader opened, by name, kept open across redraws
  };
  try { S.axis = localStorage.getItem("trainmeter.axis") || "step"; } catch (e) { /* storage off */ }

  // ---------------------------------------------------------------- formatting
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null) continue;
        if (k === "class") e.className = attrs[k];
        else if (k === "text") e.textContent = attrs[k];
        else if (k === "style") e.setAttribute("style", attrs[k]);
        else e.setAttribute(k, attrs[k]);
      }
    }
    (children || []).forEach(function (c) {
      if (c == null) return;
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function byId(id) { return document.getElementById(id); }

  // Every number reads by the one rule of views/format.py, in static/format.js (TMFormat):
  // a count with k, M, B, T; a unit with its SI prefix; bytes in KiB..TiB; 83.9 ms, 2.5 s.
  var F = window.TMFormat;
  // Axis units, round ticks, the palette, the text alternative: static/charts.js (TMCharts),
  // shared with the runs page and the report.
  var K = window.TMCharts;
  function sig(v) { return !isNum(v) ? "—" : (Number.isInteger(v) && Math.abs(v) < 1e4 ? String(v) : F.mantissa(v)); }
  function si(v, unit) {
    if (!isNum(v)) return "—";
    return unit ? F.si_unit(v, unit) : F.si(v);
  }
  function pct(v) { return isNum(v) ? F.percent(v) : "—"; }
  function dur(s) { return isNum(s) ? F.duration(s) : "—"; }
  function bytes(v) { return isNum(v) ? F.si_unit(v, "B") : "—"; }
  function count(v) { return si(v, ""); }
  function val(entry) { return entry && typeof entry === "object" ? entry.value : entry; }
  function absentReason(name) {
    var a = S.snap.absent || {};
    return a[name];
  }
  // A reason short enough for a tile, still a whole phrase: one that fits three lines is kept
  // whole; a longer one loses its asides in parentheses and all after a ";", then keeps its
  // leading "a: b: c" clauses while they fit. The whole reason is in the tile's tooltip and in
  // the explanation its click opens.
  var SHORT_REASON = 56, FITS_TILE = 80;
  function shortReason(reason) {
    var r = String(reason || ""), prev;
    if (r.length <= FITS_TILE) return r;
    do { prev = r; r = r.replace(/\s*\([^()]*\)/g, ""); } while (r !== prev);
    var clauses = r.split(";")[0].split(": "), out = clauses[0];
    for (var i = 1; i < clauses.length && (out + ": " + clauses[i]).length <= SHORT_REASON; i++) out += ": " + clauses[i];
    return out.trim();
  }
  // A number in the unit the snapshot gives it in; a bare value (a loss) keeps four digits.
  function fmtUnit(v, unit) {
    if (typeof v === "string") return v;
    if (!isNum(v)) return v == null ? "—" : String(v);
    if (unit === "1" || !unit) return F.metric(v);
    if (unit === "tokens/s") return F.si(v) + " tok/s";
    return F.amount(v, unit);
  }
  function srcBadge(src) {
    if (!src) return null;
    var cls = "src";
    if (/declared/.test(src)) cls += " src-declared";
    else if (/measured|detected|counted/.test(src)) cls += " src-measured";
    return el("span", { class: cls, text: src });
  }

  // ---------------------------------------------------------------- header and alerts
  function renderHeader() {
    var snap = S.snap, run = snap.run || {};
    byId("run-name").textContent = run.name || (S.mode === "view" ? "finished run" : "run");
    document.title = (run.name ? run.name + " · " : "") + "trainmeter";
    var st = byId("status");
    var done = S.finished || (snap.time && snap.time.finished);
    if (!S.connected && S.mode === "live" && S.seq > 0 && !done) {
      st.className = "pill pill-lost"; st.textContent = "connection lost";
      st.title = "tm stopped serving: the run ended or tm was stopped. `tm view` shows a finished run again.";
    } else if (done) {
      st.className = "pill pill-done"; st.textContent = S.mode === "view" ? "finished (replayed)" : "finished";
      st.title = run.exit_status != null ? "exit status " + run.exit_status : "";
    } else if (S.seq > 0) {
      st.className = "pill pill-live"; st.textContent = "live"; st.title = "updates about once a second";
    } else {
      st.className = "pill pill-wait"; st.textContent = S.connected ? "starting" : "connecting";
    }
    var meta = clear(byId("run-meta"));
    function m(k, v) { if (v != null && v !== "") meta.appendChild(el("span", null, [k + " ", el("b", { text: v })])); }
    var t = snap.time || {};
    m("elapsed", isNum(t.elapsed_s) ? dur(t.elapsed_s) : null);
    m("steps", isNum(snap.steps) ? count(snap.steps) : null);
    m("tokens", isNum(snap.tokens_seen) ? count(snap.tokens_seen) : null);
    var ng = val(snap.n_gpus);
    if (isNum(ng)) m("GPUs", ng + (snap.peak && snap.peak.name ? " × " + snap.peak.name : ""));
    m("host", run.hostname);
    var job = snap.job;
    if (job && isNum(job.nodes) && job.nodes > 1) m("node", (isNum(job.node_rank) ? job.node_rank : "?") + " of " + job.nodes);
    byId("foot-dir").textContent = S.runDir ? "run directory: " + S.runDir : "";
    if (/^\/run\//.test(location.pathname) && !byId("all-runs")) {  // one run of the runs page
      meta.parentNode.insertBefore(el("a", { id: "all-runs", href: "/", text: "all runs" }), meta);
    }
  }

  function renderAlerts() {
    var box = clear(byId("alerts"));
    var alerts = S.snap.alerts || [];
    var facts = S.snap.facts || {};
    var observe = facts.observe_only && facts.observe_only.value;
    var warnings = S.snap.warnings || [];
    var death = S.snap.death;
    box.hidden = !alerts.length && !observe && !warnings.length && !death;
    if (death && death.text) {
      var detail = [];
      if (death.exception) detail.push((death.exception.type || "") + (death.exception.where ? " at " + death.exception.where : ""));
      if (death.oom && isNum(death.oom.tried_b)) detail.push("tried to allocate " + bytes(death.oom.tried_b) + (isNum(death.oom.free_b) ? ", " + bytes(death.oom.free_b) + " free" : ""));
      if (death.stack_file) detail.push("Python stacks in " + death.stack_file);
      box.appendChild(el("div", { class: "alert alert-bad", "data-death": death.cause || "" }, [
        el("span", { class: "icon", text: "✕" }),
        el("div", null, [el("div", { class: "msg", text: "The run died: " + death.text }),
          el("div", { class: "kind", text: detail.join(" · ") || death.cause || "" })]),
      ]));
    }
    if (observe) {
      box.appendChild(el("div", { class: "alert alert-info", "data-observe-only": "1" }, [
        el("span", { class: "icon", text: "i" }),
        el("div", null, [el("div", { class: "msg", text: "Watching from outside only: " + observe }),
          el("div", { class: "kind", text: "GPU, process and node numbers are measured; the training's own (steps, tokens, MFU) are not, and say why below." })]),
      ]));
    }
    alerts.forEach(function (a) {
      var bad = /impossible|stall|hang|crash|nan|diverg/i.test(a.kind || "");
      box.appendChild(el("div", { class: "alert " + (bad ? "alert-bad" : "alert-warn"), "data-alert": a.kind || "" }, [
        el("span", { class: "icon", text: "!" }),
        el("div", null, [
          el("div", { class: "msg", text: a.message || a.kind }),
          el("div", { class: "kind", text: a.kind || "alert" }),
        ]),
      ]));
    });
    if (warnings.length) {
      var notes = el("details", { class: "alert alert-info notes" }, [
        el("summary", null, [el("span", { class: "icon", text: "i" }), el("span", { class: "msg", text: warnings.length === 1 ? "1 note on how to read these numbers" : warnings.length + " notes on how to read these numbers" })]),
        el("ul", null, warnings.map(function (w) { return el("li", { text: w }); })),
      ]);
      notes.open = !!S.notesOpen;  // stays open across the second's redraw
      notes.addEventListener("toggle", function () { S.notesOpen = notes.open; });
      box.appendChild(notes);
    }
  }

  // ---------------------------------------------------------------- progress
  function renderProgress() {
    var snap = S.snap;
    var p = snap.progress, btn = byId("p-pct");
    btn.textContent = isNum(p) ? pct(p) : "n/a";
    if (isNum(p)) btn.setAttribute("data-value", String(p)); else btn.removeAttribute("data-value");
    btn.appendChild(el("span", { class: "q", text: "?" }));
    byId("p-fill").style.width = isNum(p) ? Math.min(100, Math.max(0, p * 100)) + "%" : "0";
    var facts = clear(byId("p-facts"));
    function fact(k, v, sub, explain) {
      var inner = [el("div", { class: "k", text: k }), el("div", { class: "v num" }, [v, sub ? el("small", { text: " " + sub }) : null])];
      facts.appendChild(explain ? el("button", { class: "fact derived", "data-explain": explain }, inner) : el("div", { class: "fact" }, inner));
    }
    var b = snap.budget || {};
    if (b.unit === "steps") fact("Steps", count(snap.steps), "of " + count(b.value));
    else fact("Steps", isNum(snap.steps) ? count(snap.steps) : "—");
    fact("Tokens", isNum(snap.tokens_seen) ? count(snap.tokens_seen) : "—", isNum(snap.budget_tokens) ? "of " + count(snap.budget_tokens) : null);
    if (isNum(snap.flops_spent)) fact("FLOPs spent", si(snap.flops_spent, "FLOP"), isNum(snap.flops_required) ? "of " + si(snap.flops_required, "FLOP") : null);
    var done = S.finished || (snap.time && snap.time.finished);
    fact("ETA", done ? "done" : (isNum(snap.eta_s) ? dur(snap.eta_s) : "n/a"), null, "eta_s");
    fact("Elapsed", isNum(snap.time && snap.time.elapsed_s) ? dur(snap.time.elapsed_s) : "—");
    var models = snap.models && snap.models.trained;
    if (models && models.length > 1) fact("Models trained", models.map(function (m) { return m.name; }).join(" + "), count(snap.models.total_params) + " parameters", "models");
    var why = byId("p-absent");
    var reason = absentReason("progress") || absentReason("budget") || absentReason("eta_s");
    why.hidden = isNum(p) || !reason;
    why.textContent = reason ? "Progress and ETA: " + reason : "";
    var plan = clear(byId("plan"));
    var pl = snap.plan;
    plan.hidden = !pl;
    if (pl) {
      plan.appendChild(el("div", { class: "fact" }, [el("div", { class: "k", text: "Plan vs actual" }), el("div", { class: "v", text: " " })]));
      Object.keys(pl).forEach(function (k) {
        var e = pl[k];
        if (e && typeof e === "object" && ("planned" in e || "measured" in e)) {
          var f = k === "mfu" ? pct : (k.indexOf("hours") >= 0 ? function (x) { return isNum(x) ? F.metric(x) + " h" : "—"; } : function (x) { return isNum(x) ? si(x, "") : "—"; });
          plan.appendChild(el("button", { class: "fact derived", "data-explain": "plan" }, [
            el("div", { class: "k", text: k.replace(/_/g, " ") }),
            el("div", { class: "v num" }, [f(e.planned), el("small", { text: " planned · " + f(e.measured) + " measured" })]),
          ]));
        }
      });
    }
  }

  // ---------------------------------------------------------------- tiles
  // Which window the rates are over (docs/rates.md), as the terminal views say it:
  // "last 30 s" while the run goes on, "steady" once it has ended.
  function rateWindowLabel(w) {
    if (!w || typeof w !== "object") return null;
    if (w.kind === "steady") return "steady";
    if (w.kind !== "trailing" || !isNum(w.seconds)) return null;
    var shown = isNum(w.span_s) && w.seconds >= w.span_s ? w.span_s : w.seconds;
    return "last " + (shown >= 10 ? shown.toFixed(0) : String(Number(shown.toPrecision(2)))) + " s";  // views/terminal.py's words
  }

  // A number known only as a range over the FLOPs conventions (none chosen): "601–748 kFLOP".
  function spanOf(rng, f) {
    if (!rng || rng.length !== 2 || !isNum(rng[0]) || !isNum(rng[1])) return null;
    var lo = f(rng[0]), hi = f(rng[1]);
    if (lo === hi) return lo;
    var cut = lo.lastIndexOf(" ");  // one unit for both ends: "601–748 kFLOP"
    if (cut > 0 && hi.slice(hi.lastIndexOf(" ")) === lo.slice(cut)) return lo.slice(0, cut) + "–" + hi;
    return lo + "–" + hi;
  }
  // The conventions a range spans, lowest first: "range over hf, megatron, titan, all_params".
  function conventionsNote(conv) {
    var names = Object.keys(conv || {}).sort(function (a, b) { return conv[a] - conv[b]; });
    return "no convention chosen: range over " + (names.length ? names.join(", ") : "every convention");
  }

  function tileSpecs() {
    var snap = S.snap;
    var mfu = snap.mfu || {}, ofu = snap.ofu || {}, energy = snap.energy || {}, time = snap.time || {};
    var alertKinds = (snap.alerts || []).map(function (a) { return a.kind || ""; }).join(" ");
    var tiles = [];
    tiles.push({
      id: "tokens_per_s", label: "Tokens / s" + (rateWindowLabel(snap.rate_window) ? " (" + rateWindowLabel(snap.rate_window) + ")" : ""), explain: "tokens_per_s",
      raw: snap.tokens_per_s, value: isNum(snap.tokens_per_s) ? si(snap.tokens_per_s, "") : null,
      sub: isNum(snap.tokens_per_s) ? (snap.padding && isNum(snap.padding.share) ? "real tokens only; " + pct(snap.padding.share) + " of the batch was padding" : (snap.tokens_counted ? "tokens counted: " + snap.tokens_counted : "")) : null,
      absent: absentReason("tokens_per_s"),
    });
    // A model without tokens is measured in samples (the engine's `samples`).
    var smp = snap.samples, noTokens = !isNum(snap.tokens_per_s);
    if (smp && noTokens) {
      tiles.push({
        id: "samples_per_s", label: "Samples / s", explain: "samples_per_s",
        raw: smp.per_s, value: isNum(smp.per_s) ? si(smp.per_s, "") : null,
        sub: isNum(smp.per_step) ? count(smp.per_step) + " samples a step (" + (smp.source || "?") + ")" : null,
        absent: absentReason("samples_per_s"),
      });
    }
    tiles.push({
      id: "step_time_s", label: "Step time", explain: "step_time_s",
      raw: snap.step_time_s, value: isNum(snap.step_time_s) ? dur(snap.step_time_s) : null,
      sub: isNum(snap.steps) ? count(snap.steps) + ((S.finished || (snap.time && snap.time.finished)) ? " steps" : " steps so far") : null,
      absent: absentReason("step_time_s"),
    });
    var mfuRange = spanOf(mfu.range, pct);
    tiles.push({
      id: "mfu", label: "MFU", explain: "mfu",
      raw: mfu.value, value: isNum(mfu.value) ? pct(mfu.value) : mfuRange,
      sub: isNum(mfu.value) ? (mfu.convention || "") + " convention" + (mfu.peak ? " · " + mfu.peak : "") : (mfuRange ? conventionsNote(snap.conventions) : null),
      absent: absentReason("mfu"), alerting: /mfu_impossible/.test(alertKinds),
    });
    if (smp && noTokens) {
      var sm = smp.mfu || {};
      tiles.push({
        id: "samples_mfu", label: "MFU (counted)", explain: "samples_mfu",
        raw: sm.value, value: isNum(sm.value) ? pct(sm.value) : null,
        sub: isNum(sm.value) ? "counted convention: FLOPs per step" + (isNum(smp.flops_per_step) ? " " + si(smp.flops_per_step, "FLOP") : "") + " × steps/s" : null,
        absent: absentReason("samples_mfu") || absentReason("flops_per_step"),
      });
    }
    tiles.push({
      id: "ofu", label: "OFU", explain: "ofu",
      raw: ofu.value, value: isNum(ofu.value) ? pct(ofu.value) : null,
      sub: isNum(ofu.value) ? "FLOPs the tensor counters saw" : null,
      absent: absentReason("ofu"),
    });
    tiles.push({
      id: "goodput", label: "Goodput", explain: "goodput",
      raw: time.goodput, value: isNum(time.goodput) ? pct(time.goodput) : null,
      sub: isNum(time.goodput) ? "of wall time in training steps" : null,
      absent: absentReason("goodput"),
    });
    var jpt = energy.joules_per_token;
    tiles.push({
      id: "energy", label: "Energy", explain: "energy_per_token",
      raw: energy.joules, value: isNum(energy.joules) ? si(energy.joules, "J") : null,
      sub: isNum(jpt) ? F.si_unit(jpt, "J") + " per token" : (isNum(energy.joules) ? "per token: " + (absentReason("energy_per_token") || "no tokens yet") : null),
      absent: absentReason("energy") || absentReason("energy_per_token"),
    });
    var mem = snap.memory || {};
    var memPeak = isNum(mem.reserved_peak_b) ? mem.reserved_peak_b : mem.rss_peak_b;
    tiles.push({
      id: "memory", label: isNum(mem.reserved_peak_b) ? "Memory peak (reserved)" : "Memory peak (RSS)", explain: "memory",
      raw: memPeak, value: isNum(memPeak) ? bytes(memPeak) : null,
      sub: isNum(memPeak) ? (isNum(mem.total_b) ? pct(memPeak / mem.total_b) + " of " + bytes(mem.total_b) : "no caching allocator on " + (mem.device || "this device")) + (isNum(mem.alloc_retries) ? " · " + mem.alloc_retries + " retries · " + (mem.ooms || 0) + " OOMs" : "") : null,
      absent: absentReason("memory"), alerting: /memory_/.test(alertKinds),
    });
    var fpt = snap.flops_per_token || {};
    var fptRange = isNum(fpt.value) ? null : spanOf(fpt.range, function (v) { return si(v, "FLOP"); });
    tiles.push({
      id: "flops_per_token", label: "FLOPs / token", explain: "flops_per_token",
      raw: fpt.value, value: isNum(fpt.value) ? si(fpt.value, "FLOP") : fptRange,
      sub: isNum(fpt.value) ? (fpt.convention || "") + ": " + (fpt.formula || "") : (fptRange ? conventionsNote(snap.conventions) : null),
      absent: absentReason("flops_per_token"),
    });
    return tiles;
  }

  // A tile's trend: the last points of its series as a small line (the engine's own values).
  var SPARK = { tokens_per_s: "tokens_per_s", step_time_s: "step_time_s", mfu: "mfu", ofu: "ofu", goodput: "goodput" };
  function sparkline(name) {
    var s = S.series[SPARK[name]];
    if (!s || s.last.length < 2) return null;
    var ys = s.last.slice(-120), lo = Math.min.apply(null, ys), hi = Math.max.apply(null, ys);
    var w = 100, h = 22, span = hi - lo || 1;
    var pts = ys.map(function (y, i) { return (i / (ys.length - 1) * w).toFixed(1) + "," + (h - 1 - (y - lo) / span * (h - 2)).toFixed(1); }).join(" ");
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("class", "spark");
    svg.setAttribute("aria-hidden", "true");
    var line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts);
    svg.appendChild(line);
    return svg;
  }

  // Rows of tiles as even as the width allows, no tile alone on a row (TMCharts.evenTiles).
  function layoutTiles() { K.evenTiles(byId("tiles"), 160, 12); }
  // A tile's value with its unit in small type ("27.9 ms", "601–748 kFLOP"): the number stays
  // large and the whole still fits a narrow tile on one line.
  function valueParts(text) {
    var cut = text.lastIndexOf(" ");
    if (cut > 0 && /^[A-Za-zµ°]/.test(text.slice(cut + 1))) return [text.slice(0, cut), el("small", { text: text.slice(cut) })];
    return [text];
  }
  var GPU_ONLY_TILES = { ofu: 1, energy: 1 };
  function renderTiles() {
    var box = clear(byId("tiles"));
    var folded = noGpu();
    tileSpecs().forEach(function (t) {
      if (folded && GPU_ONLY_TILES[t.id] && t.value == null) return;  // said once, in the no-GPU note
      var absent = t.value == null;
      var cls = "tile derived" + (absent ? " absent" : "") + (t.alerting ? " alerting" : "");
      box.appendChild(el("button", { class: cls, "data-explain": t.explain, "data-tile": t.id, "data-value": isNum(t.raw) ? String(t.raw) : null, type: "button" }, [
        el("div", { class: "label" }, [t.label, el("span", { class: "q", text: "?" })]),
        el("div", { class: "value num" }, absent ? ["n/a"] : valueParts(t.value)),
        el("div", { class: "sub", "data-reason": absent ? "1" : null, title: absent ? (t.absent || null) : null, text: absent ? (t.absent ? shortReason(t.absent) : "not measured in this run") : (t.sub || "") }),
        absent ? null : sparkline(t.id),
      ]));
    });
    layoutTiles();
  }

  // ---------------------------------------------------------------- ladder
  var RUNGS = [
    ["gpu_util", "GPU busy", "--c6"],
    ["sm_active", "SM active", "--c1"],
    ["tensor_active", "Tensor active", "--c3"],
    ["ofu", "OFU", "--c4"],
    ["mfu", "MFU", "--c2"],
  ];
  function renderLadder() {
    var box = clear(byId("ladder"));
    var lad = S.snap.ladder;
    if (!lad || !lad.gpus) {
      box.appendChild(el("p", { class: "empty", text: absentReason("ladder") || "No GPU counters yet." }));
      return;
    }
    var groups = [];
    var ids = Object.keys(lad.gpus);
    if (ids.length > 1 && lad.mean) groups.push(["All GPUs (mean)", lad.mean]);
    ids.forEach(function (g) { groups.push(["GPU " + g, lad.gpus[g]]); });
    groups.forEach(function (gr) {
      var wrap = el("div", { class: "ladder-gpu" }, [el("h3", { text: gr[0] })]);
      RUNGS.forEach(function (r) {
        var v = gr[1][r[0]];
        var na = !isNum(v);
        var w = na ? 0 : Math.max(0, Math.min(100, v * 100));
        var row = el("div", { class: "rung" + (na ? " na" : ""), title: na ? (absentReason(r[0]) || "not measured") : "" }, [
          el("span", { class: "name", text: r[1] }),
          el("div", { class: "track" }, [el("div", { class: "fill", style: "width:" + w + "%;background:var(" + r[2] + ")" })]),
          el("span", { class: "val num", text: na ? "n/a" : pct(v) }),
        ]);
        if (r[0] === "mfu" || r[0] === "ofu") {
          row.classList.add("derived"); row.setAttribute("data-explain", r[0]); row.setAttribute("tabindex", "0");
        }
        wrap.appendChild(row);
      });
      box.appendChild(wrap);
    });
    var extra = el("div", { class: "ladder-extra" });
    var ai = S.snap.arithmetic_intensity, peak = S.snap.peak || {};
    if (ai && isNum(ai.value)) {
      var bound = isNum(peak.ridge) ? (ai.value < peak.ridge ? "below the ridge of " + sig(peak.ridge) + ": memory-bound" : "above the ridge of " + sig(peak.ridge) + ": compute-bound") : "";
      extra.appendChild(el("button", { class: "fact derived", "data-explain": "arithmetic_intensity", type: "button" }, [
        el("div", { class: "k", text: "Arithmetic intensity" }),
        el("div", { class: "v num" }, [F.metric(ai.value) + " FLOP/byte", el("small", { text: " " + bound }), el("span", { class: "q", text: "?" })]),
      ]));
    }
    var fo = S.snap.flops_observed;
    if (fo && isNum(fo.value)) {
      extra.appendChild(el("button", { class: "fact derived", "data-explain": "flops_observed", type: "button" }, [
        el("div", { class: "k", text: "FLOPs the counters saw" }),
        el("div", { class: "v num" }, [si(fo.value, "FLOP"), el("small", { text: isNum(S.snap.flops_spent) ? " vs " + si(S.snap.flops_spent, "FLOP") + " the model needs" : "" }), el("span", { class: "q", text: "?" })]),
      ]));
    }
    if (extra.childNodes.length) box.appendChild(extra);
    var gap = S.snap.mfu_ofu_gap;
    if (gap && isNum(gap.value)) {
      box.appendChild(el("p", { class: "hint", text: "OFU − MFU = " + pct(gap.value) + ": FLOPs the GPU ran that the model's formula does not count (recompute, padding, attention the convention leaves out)." }));
    }
  }

  // ---------------------------------------------------------------- MFU waterfall
  // The engine's chain (docs/waterfall.md): the `run` factor takes the peak over the wall time
  // to the training window; the `steps` factors multiply to the MFU exactly. Each row is a
  // floating bar from the level before it to the level after; the page only places the bars.
  var WF_ORDER = ["time_outside_window", "time_outside_steps", "gpu_idle", "tensor_share", "clocks", "model_vs_executed"];
  var WF_LABELS = {
    time_outside_window: "Startup and compile, after the last step", time_outside_steps: "Data wait, eval, checkpoints between steps",
    gpu_idle: "GPU idle within steps", tensor_share: "SM work that is not tensor work", clocks: "Clocks below the tensor clock",
    model_vs_executed: "Executed vs model FLOPs",
  };
  function wfRow(opts) {
    // opts: {name, label, before, after, scale, value, loss, source, formula, note, absent, cls, explain, kind}
    var scale = opts.scale || 1;
    var track = el("div", { class: "track" });
    if (!opts.absent) {
      var lo = Math.min(opts.before, opts.after), hi = Math.max(opts.before, opts.after);
      var kept = el("div", { class: "wf-kept", style: "width:" + (Math.min(opts.before, opts.after) / scale * 100) + "%" });
      track.appendChild(kept);
      if (opts.kind === "factor") {
        var up = opts.after > opts.before;
        track.appendChild(el("div", { class: "wf-step" + (up ? " wf-up" : ""), style: "left:" + (lo / scale * 100) + "%;width:" + ((hi - lo) / scale * 100) + "%" }));
      } else {
        kept.className = "wf-total";
        kept.style.width = (opts.after / scale * 100) + "%";
      }
    }
    var valueCell = el("div", { class: "wf-val num" });
    if (opts.absent) valueCell.appendChild(el("span", { class: "na", text: "n/a" }));
    else if (opts.kind === "factor") {
      valueCell.appendChild(el("b", { text: "×" + F.mantissa(opts.value) }));
      var lossText = !isNum(opts.loss) ? "" : opts.loss >= 0 ? "−" + (opts.loss > 0.999 && opts.loss < 1 ? (opts.loss * 100).toFixed(Math.max(1, Math.ceil(-Math.log10(1 - opts.loss)) - 1)) + "%" : pct(opts.loss)) : "+" + pct(-opts.loss);
      valueCell.appendChild(el("small", { text: lossText }));
    } else valueCell.appendChild(el("b", { text: pct(opts.after) }));
    var head = [el("span", { class: "wf-label", text: opts.label })];
    if (opts.explain) head.push(el("span", { class: "q", text: "?" }));
    var meta = el("div", { class: "wf-meta" });
    if (opts.name) meta.appendChild(el("span", { class: "mono", text: opts.name }));
    if (opts.source) {
      // provenance: "measured: the time split" as a short badge and its detail
      var cut = opts.source.indexOf(":");
      meta.appendChild(srcBadge(cut > 0 ? opts.source.slice(0, cut) : opts.source));
      if (cut > 0) meta.appendChild(el("span", { class: "wf-src", text: opts.source.slice(cut + 1).trim() }));
    }
    var attrs = {
      class: "wf-row" + (opts.explain ? " derived" : "") + (opts.absent ? " na" : "") + (opts.cls ? " " + opts.cls : ""),
      "data-factor": opts.name || null, "data-value": isNum(opts.value) ? String(opts.value) : (isNum(opts.after) && opts.kind !== "factor" ? String(opts.after) : null),
      "data-explain": opts.explain || null, tabindex: opts.explain ? "0" : null,
      title: isNum(opts.after) && !opts.absent ? "level after: " + pct(opts.after) + " of the peak" : null,
    };
    var row = el("div", attrs, [el("div", { class: "wf-name" }, [el("div", null, head), meta]), track, valueCell]);
    var notes = [];
    if (opts.absent) notes.push(el("div", { class: "wf-note", "data-reason": "1", text: opts.absent }));
    if (opts.note) notes.push(el("div", { class: "wf-note wf-above", text: opts.note }));
    return notes.length ? el("div", { class: "wf-group" }, [row].concat(notes)) : row;
  }
  function renderWaterfall() {
    var box = clear(byId("waterfall"));
    var wf = S.snap.waterfall;
    if (!wf || !wf.factors) {
      var joined = S.snap.job && Array.isArray(S.snap.job.node_list);
      box.appendChild(el("p", { class: "empty", "data-reason": "1", text: absentReason("waterfall") || (joined ? "Several nodes joined as one job: each node's counters are its own, so the waterfall is per node (tm view of one node's run directory shows it)." : S.snap.mfu ? "This snapshot has no waterfall (an engine without it)." : "No MFU yet: the waterfall ends at the MFU.") }));
      return;
    }
    var factors = wf.factors.slice(), absent = wf.absent || {};
    var runF = factors.filter(function (f) { return f.scope === "run"; });
    var stepF = factors.filter(function (f) { return f.scope !== "run"; });
    // absent factors in their place along the chain, each with its reason
    var rows = [];
    WF_ORDER.forEach(function (n) {
      var f = stepF.filter(function (x) { return x.name === n; })[0];
      if (f) rows.push(f);
      else if (absent[n] && n !== "time_outside_window") rows.push({ name: n, absent: absent[n] });
    });
    stepF.forEach(function (f) { if (WF_ORDER.indexOf(f.name) < 0) rows.push(f); });
    var levels = [1], lvl = 1;
    rows.forEach(function (f) { if (!f.absent && isNum(f.value)) lvl *= f.value; levels.push(lvl); });
    var scale = Math.max(1, Math.max.apply(null, levels));
    var conv = wf.convention ? wf.convention + " convention" : "";
    if (runF.length || absent.time_outside_window) {
      box.appendChild(el("h3", { class: "wf-scope", text: "Over the whole run" }));
      runF.forEach(function (f) {
        box.appendChild(wfRow({ kind: "factor", name: f.name, label: f.label || WF_LABELS[f.name] || f.name, before: 1, after: f.value, value: f.value, loss: f.loss, scale: Math.max(1, f.value), source: f.source, explain: "waterfall", note: f.above_one }));
      });
      if (!runF.length) box.appendChild(wfRow({ kind: "factor", name: "time_outside_window", label: WF_LABELS.time_outside_window, absent: absent.time_outside_window }));
    }
    box.appendChild(el("h3", { class: "wf-scope", text: "Within the training window" }));
    box.appendChild(wfRow({ kind: "total", label: "Dense peak", before: 1, after: 1, scale: scale, cls: "wf-peak", source: S.snap.peak && S.snap.peak.name ? S.snap.peak.name : null }));
    rows.forEach(function (f, i) {
      if (f.absent) { box.appendChild(wfRow({ kind: "factor", name: f.name, label: WF_LABELS[f.name] || f.name, absent: f.absent })); return; }
      box.appendChild(wfRow({ kind: "factor", name: f.name, label: f.label || WF_LABELS[f.name] || f.name, before: levels[i], after: levels[i + 1], value: f.value, loss: f.loss, scale: scale, source: f.source, explain: "waterfall", note: f.above_one }));
    });
    var endLabel = wf.ends_at && wf.ends_at !== "mfu" ? (wf.ends_at_label || wf.ends_at) : "MFU" + (conv ? " (" + conv + ")" : "");
    box.appendChild(wfRow({ kind: "total", name: null, label: endLabel, before: wf.value, after: wf.value, scale: scale, cls: "wf-end", explain: "waterfall", absent: wf.mfu_absent ? "Ends at the " + endLabel + ", not at an MFU: " + wf.mfu_absent : null }));
    var foot = el("div", { class: "wf-foot" });
    var whole = wf.whole_run;
    if (whole && isNum(whole.value)) {
      foot.appendChild(el("button", { class: "fact derived", "data-explain": "waterfall", "data-whole-run": String(whole.value), type: "button" }, [
        el("div", { class: "k", text: "Whole run: " + (whole.formula || "window / elapsed × MFU") }),
        el("div", { class: "v num" }, [pct(whole.value), el("small", { text: whole.note ? " " + whole.note : "" }), el("span", { class: "q", text: "?" })]),
      ]));
    }
    if (foot.childNodes.length) box.appendChild(foot);
    if (wf.window) box.appendChild(el("p", { class: "hint", text: "Windows: " + wf.window + "." }));
  }

  // ---------------------------------------------------------------- advice
  var ADVICE_TITLES = {
    data_wait: "Data wait", non_tensor_work: "Work outside matmuls", clocks_held: "Clocks held down",
    slow_rank: "A slow rank", padding: "Padding", eval: "Evaluation time", checkpoint: "Checkpoint time",
  };
  function renderAdvice() {
    var box = clear(byId("advice"));
    var adv = S.snap.advice;
    if (!Array.isArray(adv)) {
      var joinedJob = S.snap.job && Array.isArray(S.snap.job.node_list);
      box.appendChild(el("p", { class: "empty", "data-reason": "1", text: absentReason("advice") || (joinedJob ? "Several nodes joined as one job: advice is per node (tm view of one node's run directory shows it)." : "This snapshot carries no advice (an engine without it).") }));
      return;
    }
    if (!adv.length) {
      box.appendChild(el("p", { class: "empty", "data-advice-none": "1", text: "Nothing to try: no measured number in this run points to a change." }));
      return;
    }
    adv.forEach(function (a) {
      var tb = el("tbody");
      (a.evidence || []).forEach(function (e) {
        tb.appendChild(el("tr", { "data-evidence": e.name }, [
          el("td", { class: "mono", text: e.name }),
          el("td", { class: "num", text: fmtUnit(e.value, e.unit) }),
          el("td", { class: "src-cell", text: e.source || "" }),
        ]));
      });
      box.appendChild(el("div", { class: "advice", "data-advice": a.kind || "" }, [
        el("div", { class: "advice-head" }, [el("span", { class: "advice-kind", text: ADVICE_TITLES[a.kind] || a.kind || "advice" }), el("span", { class: "mono hint", text: a.kind || "" })]),
        el("p", { class: "advice-msg", text: a.message || "" }),
        tb.childNodes.length ? el("div", { class: "table-wrap" }, [el("table", { class: "evidence" }, [
          el("thead", null, [el("tr", null, [el("th", { text: "Measured" }), el("th", { text: "Value" }), el("th", { style: "text-align:left", text: "Source" })])]), tb])]) : null,
      ]));
    });
  }

  // ---------------------------------------------------------------- time split
  var PART_COLORS = { startup: "--c6", data: "--c2", checkpoint: "--c4", eval: "--c3", compute: "--c1", after: "--faint" };
  function renderTimeSplit() {
    var box = clear(byId("timesplit"));
    var t = S.snap.time;
    if (!t || !t.parts) {
      box.appendChild(el("p", { class: "empty", text: absentReason("time") || "No steps reported yet." }));
      return;
    }
    var total = t.elapsed_s || t.parts.reduce(function (a, p) { return a + (p.s || 0); }, 0);
    var bar = el("div", { class: "split", role: "img", "aria-label": "time split" });
    var legend = el("div", { class: "legend" });
    t.parts.forEach(function (p, i) {
      var color = "var(" + (PART_COLORS[p.name] || ("--c" + ((i % 6) + 1))) + ")";
      var share = total > 0 && isNum(p.s) ? p.s / total : 0;
      var untimed = p.reason && !p.s;  // a zero nobody timed: say why, not "0.00 ms 0%"
      if (untimed) {
        legend.appendChild(el("div", { class: "item", "data-part": p.name, "data-reason": "1" }, [
          el("span", { class: "sw", style: "background:" + color }),
          el("div", null, [el("div", { class: "lbl", text: p.label }), el("div", { class: "est", title: p.reason, text: "not measured: " + p.reason })]),
        ]));
        return;
      }
      if (share > 0) bar.appendChild(el("div", { style: "width:" + (share * 100) + "%;background:" + color, title: p.label + ": " + dur(p.s) + " (" + pct(share) + ")" }));
      legend.appendChild(el("div", { class: "item", "data-part": p.name }, [
        el("span", { class: "sw", style: "background:" + color }),
        el("div", null, [
          el("div", { class: "lbl", text: p.label + (p.n ? " ×" + p.n : "") }),
          el("div", null, [el("span", { class: "secs num", text: dur(p.s) }), " ", el("span", { class: "est", text: pct(share) + (p.measured === false ? " · the rest, not timed directly" : "") })]),
        ]),
      ]));
    });
    box.appendChild(bar);
    box.appendChild(legend);
    if (t.remainder_includes && t.remainder_includes.length) {
      box.appendChild(el("p", { class: "hint", text: "Compute also holds: " + t.remainder_includes.join(", ") + " (not timed separately in this run)." }));
    }
    var gl = el("button", { class: "goodput-line derived", "data-explain": "goodput" }, [
      el("span", { class: "lbl hint", text: "Goodput" }),
      el("span", { class: "big num", text: isNum(t.goodput) ? pct(t.goodput) : "n/a" }),
      el("span", { class: "q", text: "?" }),
    ]);
    box.appendChild(gl);
  }

  // ---------------------------------------------------------------- conventions, ranks, GPUs, node
  function renderConventions() {
    var box = clear(byId("conventions"));
    var mfu = S.snap.mfu || {}, conv = S.snap.conventions || {}, forms = S.snap.convention_formulas || {};
    var by = mfu.by_convention || {};
    var names = Object.keys(forms).length ? Object.keys(forms) : Object.keys(by);
    if (!names.length) {
      box.appendChild(el("p", { class: "empty", text: absentReason("mfu") || "No FLOPs count yet." }));
      return;
    }
    var tb = el("tbody");
    names.forEach(function (n) {
      tb.appendChild(el("tr", { class: n === mfu.convention ? "chosen" : "" }, [
        el("td", null, [n, el("div", { class: "hint mono", text: forms[n] || "" })]),
        el("td", { class: "num", text: isNum(conv[n]) ? si(conv[n], "FLOP") : "—" }),
        el("td", { class: "num" + (isNum(by[n]) ? "" : " na"), text: isNum(by[n]) ? pct(by[n]) : "n/a" }),
      ]));
    });
    var c = S.snap.counted;
    if (c && isNum(c.per_token)) {
      tb.appendChild(el("tr", null, [
        el("td", null, ["counted", el("div", { class: "hint", text: c.note || "FLOPs the operators executed" })]),
        el("td", { class: "num", text: si(c.per_token, "FLOP") }),
        el("td", { class: "num", text: isNum(c.utilization) ? pct(c.utilization) : "n/a" }),
      ]));
    }
    box.appendChild(el("div", { class: "table-wrap" }, [el("table", null, [
      el("thead", null, [el("tr", null, [el("th", { text: "Convention" }), el("th", { text: "FLOPs / token" }), el("th", { text: "MFU" })])]),
      tb,
    ])]));
    if (mfu.peak_source) box.appendChild(peakCitation(mfu.peak_source, "hint", "conventions"));
  }

  // Who the others wait for, in words (views/straggler_text.py says the same on a terminal)
  function stragglerSentence(n) {
    var who = n.kind === "node" ? "Node " + n.node + " (ranks " + (n.ranks || []).join(", ") + ")" : "Rank " + n.rank;
    var others = n.others === 1 ? "the other rank waits" : "the other " + n.others + " ranks wait";
    var when = n.active ? "since step " + n.since_step : "from step " + n.since_step + " to step " + n.until_step;
    return who + " computes " + dur(n.extra_s) + " longer a step than the others " + when + "; " + others +
      " for it" + (isNum(n.extra_share) ? ": " + pct(n.extra_share) + " of the job's time." : ".");
  }
  function renderSplit(box, comm) {
    var rows = comm.ranks, ids = Object.keys(rows);
    var named = S.snap.straggler || null;
    var slow = named ? (named.ranks || []).map(String) : [];
    var max = Math.max.apply(null, ids.map(function (k) { return isNum(rows[k].step_s) ? rows[k].step_s : 0; }));
    var tb = el("tbody");
    ids.forEach(function (k) {
      var row = rows[k], c = row.compute_s, w = row.wait_s;
      var bar = el("span", { class: "split" }, [
        el("i", { class: "compute", style: "width:" + (max > 0 && isNum(c) ? c / max * 100 : 0) + "%" }),
        el("i", { class: "wait", style: "width:" + (max > 0 && isNum(w) ? w / max * 100 : 0) + "%" }),
      ]);
      tb.appendChild(el("tr", { class: slow.indexOf(k) >= 0 ? "slow" : "" }, [
        el("td", { text: "rank " + k + (slow.indexOf(k) >= 0 ? " (the others wait for it)" : "") }),
        el("td", { class: "num", text: dur(row.step_s) }),
        el("td", { class: "num", text: dur(c) }),
        el("td", { class: "num", text: dur(w) }),
        el("td", { class: "num" }, [bar]),
      ]));
    });
    box.appendChild(el("table", { id: "rank-split" }, [el("thead", null, [el("tr", null, [
      el("th", { text: "Rank" }), el("th", { text: "Step" }), el("th", { text: "Compute" }),
      el("th", { text: "Waiting" }), el("th", { text: "compute | waiting" })])]), tb]));
    var said = [];
    if (named) said.push(stragglerSentence(named));
    (comm.episodes || []).forEach(function (e) { if (!e.active) said.push(stragglerSentence(e)); });
    if (!said.length) said.push(absentReason("straggler") ? "No straggler named: " + absentReason("straggler") : "No rank is slower than the others: " + comm.rule + ".");
    said.forEach(function (t, i) { box.appendChild(el("p", { class: i === 0 && named ? "hint slow-said" : "hint", text: t })); });
  }

  function renderRanks() {
    var box = clear(byId("ranks"));
    var comm = S.snap.comm;
    if (comm && comm.ranks && Object.keys(comm.ranks).length) { renderSplit(box, comm); return; }
    var r = S.snap.ranks;
    if (!r || !r.step_time_s) {
      var ws = S.snap.agent && S.snap.agent.world_size;
      box.appendChild(el("p", { class: "empty", text: absentReason("ranks") || (ws === 1 ? "One training process: nothing to compare." : "Per-rank step times need two or more ranks reporting steps.") }));
      return;
    }
    var times = r.step_time_s, ids = Object.keys(times);
    var max = Math.max.apply(null, ids.map(function (k) { return times[k]; }));
    var tb = el("tbody");
    ids.forEach(function (k) {
      var v = times[k];
      tb.appendChild(el("tr", { class: k === r.slowest && ids.length > 1 ? "slow" : "" }, [
        el("td", { text: "rank " + k + (k === r.slowest ? " (slowest)" : k === r.fastest ? " (fastest)" : "") }),
        el("td", { class: "num" }, [dur(v), el("span", { class: "mini" }, [el("i", { style: "width:" + (max > 0 ? v / max * 100 : 0) + "%" })])]),
      ]));
    });
    box.appendChild(el("table", null, [el("thead", null, [el("tr", null, [el("th", { text: "Rank" }), el("th", { text: "Step time" })])]), tb]));
    if (isNum(r.spread)) box.appendChild(el("p", { class: "hint", text: "Spread: the slowest rank takes " + pct(r.spread) + " longer a step than the fastest." }));
  }

  var GPU_COLS = [
    ["gpu_util", "GPU util", pct], ["sm_active", "SM active", pct], ["tensor_active", "Tensor", pct],
    ["dram_active", "DRAM", pct], ["memory_used_b", "Memory", null], ["power_w", "Power", null],
    ["sm_clock_mhz", "SM clock", null], ["temperature_c", "Temp", function (v) { return F.amount(v, "°C"); }],
    ["pcie_tx_b_s", "PCIe tx", function (v) { return bytes(v) + "/s"; }], ["nvlink_tx_b_s", "NVLink tx", function (v) { return bytes(v) + "/s"; }],
  ];
  function renderGpus() {
    var box = clear(byId("gpus"));
    var gpus = S.snap.gpus;
    if (!gpus || !Object.keys(gpus).length) {
      box.appendChild(el("p", { class: "empty", text: absentReason("gpus") || absentReason("gpu") || "No GPU samples (no NVIDIA driver seen, or none sampled yet)." }));
      return;
    }
    var head = el("tr", null, [el("th", { text: "GPU" })].concat(GPU_COLS.map(function (c) { return el("th", { text: c[1] }); })));
    var tb = el("tbody");
    Object.keys(gpus).forEach(function (g) {
      var row = gpus[g];
      var cells = [el("td", null, [g, el("div", { class: "hint", text: row.name || "" })])];
      GPU_COLS.forEach(function (c) {
        var v = row[c[0]], text;
        if (!isNum(v)) { cells.push(el("td", { class: "na", text: "n/a" })); return; }
        if (c[0] === "memory_used_b") text = bytes(v) + (isNum(row.memory_total_b) ? " / " + bytes(row.memory_total_b) : "");
        else if (c[0] === "power_w") text = F.amount(v, "W") + (isNum(row.power_limit_w) ? " / " + F.amount(row.power_limit_w, "W") : "");
        else if (c[0] === "sm_clock_mhz") text = v + (isNum(row.max_sm_clock_mhz) ? " / " + row.max_sm_clock_mhz : "") + " MHz";
        else text = c[2](v);
        var td = el("td", { class: "num", text: text });
        if (c[2] === pct) td.appendChild(el("span", { class: "mini" }, [el("i", { style: "width:" + Math.min(100, v * 100) + "%" })]));
        cells.push(td);
      });
      tb.appendChild(el("tr", null, cells));
    });
    box.appendChild(el("table", null, [el("thead", null, [head]), tb]));
  }

  function renderNode() {
    var box = clear(byId("node"));
    var n = S.snap.node, h = S.snap.host;
    if (!n && !h && !S.snap.memory) { box.appendChild(el("p", { class: "empty", text: absentReason("node") || "No node sample yet." })); return; }
    var kv = el("div", { class: "kv" });
    function row(k, v, share) {
      var vv = el("div", { class: "v num" }, [v]);
      if (isNum(share)) vv.appendChild(el("div", { class: "meter" }, [el("i", { style: "width:" + Math.min(100, share * 100) + "%" })]));
      kv.appendChild(el("div", { class: "k", text: k })); kv.appendChild(vv);
    }
    if (n) {
      var cpu = n.cpu || {};
      if (isNum(cpu.idle)) row("CPU busy", pct(1 - cpu.idle) + " of " + (n.cores || "?") + " cores" + (isNum(cpu.iowait) && cpu.iowait > 0.01 ? " · iowait " + pct(cpu.iowait) : ""), 1 - cpu.idle);
      if (n.load) row("Load (1, 5, 15 min)", n.load.map(function (x) { return F.metric(x); }).join("  "));
      var mem = n.memory || {};
      if (isNum(mem.total_b)) row("Memory", bytes(mem.total_b - (mem.available_b || 0)) + " used of " + bytes(mem.total_b), mem.available_b != null ? 1 - mem.available_b / mem.total_b : null);
      if (isNum(mem.swap_used_b) && mem.swap_used_b > 0) row("Swap used", bytes(mem.swap_used_b));
      var disk = n.disk || {};
      if (isNum(disk.total_b)) row("Run disk", bytes(disk.free_b) + " free of " + bytes(disk.total_b), 1 - disk.free_b / disk.total_b);
      var rates = n.rates_b_s || {};
      if (isNum(rates.disk_io_read_b) || isNum(rates.disk_io_write_b)) row("Disk I/O", "read " + bytes(rates.disk_io_read_b) + "/s · write " + bytes(rates.disk_io_write_b) + "/s");
      if (isNum(rates.net_rx_b) || isNum(rates.net_tx_b)) row("Network", "received " + bytes(rates.net_rx_b) + "/s · sent " + bytes(rates.net_tx_b) + "/s");
    }
    var ranksMem = (S.snap.memory || {}).ranks || {};
    Object.keys(ranksMem).forEach(function (r) {
      var m = ranksMem[r], bits = [];
      if (isNum(m.allocated_b)) bits.push("allocated " + bytes(m.allocated_b) + " (peak " + bytes(m.allocated_peak_b) + ")");
      if (isNum(m.reserved_b)) bits.push("reserved " + bytes(m.reserved_b) + (isNum(m.total_b) ? " of " + bytes(m.total_b) : ""));
      if (isNum(m.fragmentation)) bits.push("cached, not allocated " + pct(m.fragmentation));
      if (isNum(m.alloc_retries)) bits.push(m.alloc_retries + " retries");
      if (isNum(m.rss_b)) bits.push("RSS " + bytes(m.rss_b));
      row("Memory, rank " + r + " (" + (m.device || "?") + (m.index != null ? ":" + m.index : "") + ")", bits.join(" · "), isNum(m.reserved_share) ? m.reserved_share : null);
    });
    if (h) {
      row("Training processes", (h.procs || "?") + " · " + (isNum(h.cpu_cores) ? F.amount(h.cpu_cores, "cores") + " · " : "") + bytes(h.rss_b) + " RSS");
    }
    var t = S.snap.time || {};
    if (isNum(t.node_uptime_s)) row("Node up for", dur(t.node_uptime_s));
    box.appendChild(kv);
  }

  // ---------------------------------------------------------------- a run without a GPU
  // No GPU sample and NVML absent: the GPU cards would each hold one "absent" sentence, so they
  // fold into one note that says why and what would give them.
  function noGpu() {
    var g = S.snap.gpus;
    return !(g && Object.keys(g).length) && !!(absentReason("ladder") || absentReason("ofu")) && S.seq > 0;
  }
  function renderNoGpu() {
    var box = clear(byId("no-gpu")), none = noGpu();
    box.hidden = !none;
    ["ladder-card", "waterfall-card", "gpus-card"].forEach(function (id) { byId(id).hidden = none; });
    document.body.classList.toggle("cpu-only", none);
    if (!none) return;
    var why = absentReason("ofu") || absentReason("ladder");
    var mfu = absentReason("mfu");
    box.appendChild(el("span", { class: "icon", text: "i" }));
    box.appendChild(el("div", null, [
      el("div", { class: "msg", text: "No GPU in this run: " + why + "." }),
      el("div", { class: "kind-text", text: "The utilization ladder, MFU waterfall, GPU counters, OFU and energy would show here with an NVIDIA GPU and its driver visible to tm (tm doctor checks). " +
        (mfu ? "MFU on this CPU would need a peak: measure one (python -m trainmeter.hardware.measure_peak) or declare --peak-tflops with --peak-source." : "") }),
    ]));
  }
  // The host's CPU by kind (one stacked bar) and busy per core, beside the node's rows.
  var CPU_KINDS = [["user", "user", "--c1"], ["system", "system", "--c2"], ["iowait", "I/O wait", "--c4"], ["steal", "steal", "--c5"]];
  function renderHostCpu() {
    var box = clear(byId("host-cpu"));
    var n = S.snap.node || {}, cpu = n.cpu, cores = n.cpu_per_core;
    if (!cpu && !cores) return;
    if (cpu) {
      var bar = el("div", { class: "split cpu-split", role: "img", "aria-label": "CPU time by kind" });
      var legend = el("div", { class: "legend" });
      CPU_KINDS.concat([["idle", "idle", "--track"]]).forEach(function (k) {
        var v = cpu[k[0]];
        if (!isNum(v)) return;
        if (v > 0) bar.appendChild(el("div", { style: "width:" + (v * 100) + "%;background:var(" + k[2] + ")", title: k[1] + " " + pct(v) }));
        legend.appendChild(el("div", { class: "item", "data-cpu-kind": k[0] }, [el("span", { class: "sw", style: "background:var(" + k[2] + ")" }),
          el("span", { class: "lbl", text: "CPU " + k[1] }), el("span", { class: "secs num", text: pct(v) })]));
      });
      box.appendChild(bar);
      box.appendChild(legend);
    }
    if (Array.isArray(cores) && cores.length) {
      var grid = el("div", { class: "cores", role: "list", "aria-label": "busy share of each core" });
      cores.forEach(function (c, i) {
        grid.appendChild(el("div", { class: "core", role: "listitem", "data-core": String(i), title: "core " + i + ": " + pct(c) + " busy" }, [
          el("div", { class: "core-bar" }, [el("i", { style: "height:" + Math.min(100, Math.max(0, c * 100)) + "%" })]),
          el("span", { class: "core-label num", text: String(i) }),
        ]));
      });
      box.appendChild(el("div", { class: "cores-head hint", text: "Busy per core (" + cores.length + ")" }));
      box.appendChild(grid);
    }
  }

  function renderAbsent() {
    var box = clear(byId("absent"));
    var a = S.snap.absent || {};
    var keys = Object.keys(a).sort();
    if (!keys.length) { box.appendChild(el("li", { class: "none" }, [el("span", { class: "why", text: "Every number was measured." })])); return; }
    // numbers absent for one cause are one row (a CPU run: five NVML numbers, one reason), the
    // same wording with a different lead too ("no GPU counters: NVML ..." and "NVML ..."),
    // shown with its shortest wording: the rule of views/absent_text.py
    var groups = [], byReason = {};
    keys.forEach(function (k) {
      var text = String(a[k]).split(/\s+/).join(" "), cut = text.indexOf(": ");
      var core = cut >= 0 && text.length - cut - 2 >= 20 ? text.slice(cut + 2) : text;
      var g = byReason[text] || byReason[core];
      if (!g) { g = { names: [], why: text }; groups.push(g); }
      if (text.length < g.why.length) g.why = text;
      byReason[text] = byReason[text] || g;
      byReason[core] = byReason[core] || g;
      g.names.push(k);
    });
    groups.forEach(function (g) {
      box.appendChild(el("li", { "data-absent": g.names.join(" ") }, [el("span", { class: "name", text: g.names.join(", ") }), el("span", { class: "why", text: g.why })]));
    });
  }

  function renderDetails() {
    var box = clear(byId("details"));
    var snap = S.snap, run = snap.run || {};
    var kv = el("div", { class: "kv" });
    function row(k, v) { kv.appendChild(el("div", { class: "k", text: k })); kv.appendChild(el("div", { class: "v" }, [v])); }
    if (run.argv) row("Command", el("code", { text: run.argv.join(" ") }));
    if (run.tm_version) row("tm", run.tm_version);
    if (run.python) row("Python", run.python);
    var ag = snap.agent || {};
    if (ag.versions) row("Libraries", Object.keys(ag.versions).map(function (k) { return k + " " + ag.versions[k]; }).join(", ") || "—");
    if (ag.probes) row("Agent probes", ag.probes.join(", ") || "none");
    if (snap.gpu_versions) row("Driver", Object.keys(snap.gpu_versions).map(function (k) { return k + " " + snap.gpu_versions[k]; }).join(" · "));
    if (snap.records) row("Records", (snap.records.fed || 0) + " fed, " + (snap.records.ignored || 0) + " ignored");
    box.appendChild(kv);
    var facts = snap.facts || {};
    var fk = Object.keys(facts);
    if (fk.length) {
      var tb = el("tbody");
      fk.forEach(function (k) {
        var f = facts[k] || {};
        tb.appendChild(el("tr", null, [
          el("td", { class: "mono", text: k }),
          el("td", { class: "num", text: isNum(f.value) ? (Math.abs(f.value) >= 1e4 ? F.si(f.value) : String(f.value)) : String(f.value) }),
          el("td", { style: "text-align:left" }, [srcBadge(f.source)]),
          el("td", { style: "text-align:left;white-space:normal", class: "hint", text: (f.note || "") + (f.conflicts && f.conflicts.length ? " · conflicts: " + JSON.stringify(f.conflicts) : "") }),
        ]));
      });
      box.appendChild(el("div", { class: "table-wrap" }, [el("table", null, [
        el("thead", null, [el("tr", null, [el("th", { text: "Fact" }), el("th", { text: "Value" }), el("th", { style: "text-align:left", text: "From" }), el("th", { style: "text-align:left", text: "Note" })])]),
        tb,
      ])]));
    }
    var w = snap.warnings || [];
    if (w.length) box.appendChild(el("div", null, [el("h3", { class: "ex-section", text: "Warnings" })].concat(w.map(function (x) { return el("p", { class: "hint", text: x }); }))));
  }

  // ---------------------------------------------------------------- the peak's citation
  // One line (card, dense figure, the document it comes from); the whole citation, which says
  // where each figure was read and how it was checked, behind a fold.
  function citedDocument(source) {
    var text = String(source).replace(/\s+/g, " "), cut = text.length;
    [": ", " (stored", ". "].forEach(function (m) { var at = text.indexOf(m); if (at > 0 && at < cut) cut = at; });
    var doc = text.slice(0, cut).replace(/[ ,;.]+$/, "");
    return doc.length > 110 ? doc.slice(0, 109) + "…" : doc;
  }
  // `keep`: a name under which the full citation's open state outlives the card's redraw
  function peakCitation(source, cls, keep) {
    var peak = S.snap.peak || {};
    var figure = isNum(peak.bf16_dense_flops) ? String(+(peak.bf16_dense_flops / 1e12).toPrecision(5)) + " TFLOP/s dense BF16" : "dense BF16 peak";
    var line = (peak.name ? peak.name + ": " : "") + figure + ", from " + citedDocument(source);
    var full = el("details", { class: "peak-full" }, [el("summary", { text: "full citation" }), el("p", { text: source })]);
    if (keep) {
      full.open = !!S.opened[keep];
      full.addEventListener("toggle", function () { S.opened[keep] = full.open; });
    }
    return el("div", { class: "ex-peak" + (cls ? " " + cls : ""), "data-peak-line": "1" }, [el("div", { text: line }), full]);
  }

  // ---------------------------------------------------------------- explain drawer
  var EXPLAIN_TITLES = {
    tokens_per_s: "Tokens per second", step_time_s: "Step time", flops_per_token: "FLOPs per token",
    mfu: "Model FLOPs utilization (MFU)", ofu: "Observed FLOPs utilization (OFU)", arithmetic_intensity: "Arithmetic intensity",
    flops_observed: "FLOPs observed", energy_per_token: "Energy per token", progress: "Progress", eta_s: "Time to finish (ETA)",
    goodput: "Goodput", plan: "Plan vs actual", waterfall: "Where the peak went (the MFU waterfall)",
    samples_per_s: "Samples per second", samples_mfu: "MFU from counted FLOPs per step",
    models: "Models trained together",
  };
  var EXPLAIN_UNITS = { tokens_per_s: "tokens/s", step_time_s: "s", mfu: "ratio", ofu: "ratio", goodput: "ratio", progress: "ratio", eta_s: "s", energy_per_token: "J", flops_per_token: "FLOP" };
  // Where the number itself sits in the snapshot, for the fallback when no explanation came.
  function rawEntry(name) {
    var s = S.snap;
    switch (name) {
      case "goodput": return s.time ? { value: s.time.goodput, parts: s.time.parts } : null;
      case "samples_per_s": return s.samples ? { value: s.samples.per_s, per_step: s.samples.per_step, source: s.samples.source } : null;
      case "samples_mfu": return s.samples ? s.samples.mfu || null : null;
      case "energy_per_token": return s.energy ? { value: s.energy.joules_per_token, joules: s.energy.joules, source: s.energy.source } : null;
      default: return s[name] !== undefined ? s[name] : null;
    }
  }
  // A live page redraws the open explanation with each snapshot (`again`): the details the
  // reader opened stay open, the element they had focused keeps the focus, and the drawer is
  // not scrolled back to its close button, which only a first opening focuses.
  function openExplain(name, again) {
    var body = byId("explain-body"), kept = null;
    if (again) {
      var was = body.querySelectorAll("details, summary, a, button");
      kept = { open: Array.prototype.map.call(body.querySelectorAll("details"), function (d) { return d.open; }),
               focus: Array.prototype.indexOf.call(was, document.activeElement) };
    }
    clear(body);
    var ex = (S.snap.explain || {})[name];
    byId("explain-title").textContent = EXPLAIN_TITLES[name] || name;
    body.setAttribute("data-name", name);
    if (ex) {
      body.appendChild(el("div", { class: "ex-value num", text: fmtUnit(ex.value, ex.unit || EXPLAIN_UNITS[name]) }));
      if (ex.convention) body.appendChild(el("p", { class: "ex-note" }, ["Convention: ", el("b", { text: ex.convention })]));
      body.appendChild(el("div", { class: "ex-section", text: "Formula" }));
      body.appendChild(el("div", { class: "ex-formula", "data-formula": "1", text: ex.formula || "—" }));
      var inputs = ex.inputs || [];
      if (inputs.length) {
        body.appendChild(el("div", { class: "ex-section", text: "Inputs, and where each comes from" }));
        var tb = el("tbody");
        inputs.forEach(function (i) {
          tb.appendChild(el("tr", { "data-input": i.name }, [
            el("td", { class: "mono", text: i.name }),
            el("td", { class: "num", text: fmtUnit(i.value, i.unit) + (typeof i.value === "number" && i.unit && ["ratio", "s", "B", "W", "J", "FLOP", "FLOPs", "FLOP/s", "tokens/s"].indexOf(i.unit) < 0 ? "" : "") }),
            el("td", { class: "src-cell", text: i.source || "" }),
          ]));
        });
        body.appendChild(el("table", { class: "ex-inputs" }, [el("thead", null, [el("tr", null, [el("th", { text: "Input" }), el("th", { text: "Value" }), el("th", { style: "text-align:left", text: "Source" })])]), tb]));
        body.appendChild(el("p", { class: "ex-note", text: "Exact values, to redo the arithmetic by hand: " + inputs.map(function (i) { return i.name + " = " + (typeof i.value === "number" ? i.value : JSON.stringify(i.value)) + (i.unit ? " " + i.unit : ""); }).join("; ") + "; result = " + ex.value + (ex.unit ? " " + ex.unit : "") + "." }));
      }
      if (ex.peak_source) {
        body.appendChild(el("div", { class: "ex-section", text: "The peak, from its datasheet" }));
        body.appendChild(peakCitation(ex.peak_source));
      }
      if (ex.note) body.appendChild(el("p", { class: "ex-note", text: ex.note }));
    } else {
      var reason = absentReason(name);
      if (reason) {
        body.appendChild(el("div", { class: "ex-value", text: "n/a" }));
        body.appendChild(el("p", { "data-reason": "1" }, ["Not measured in this run: ", el("b", { text: reason })]));
      } else {
        body.appendChild(el("p", { class: "ex-note", text: "The engine sent no worked explanation for this number with this snapshot. What the snapshot holds for it:" }));
        var raw = rawEntry(name);
        var rows = el("tbody");
        (function flat(obj, prefix) {
          if (obj === null || typeof obj !== "object") { rows.appendChild(el("tr", null, [el("td", { class: "mono", text: prefix || name }), el("td", { class: "src-cell", text: typeof obj === "number" ? String(obj) : JSON.stringify(obj) })])); return; }
          Object.keys(obj).forEach(function (k) {
            var v = obj[k], key = prefix ? prefix + "." + k : k;
            if (v && typeof v === "object" && !Array.isArray(v)) flat(v, key);
            else rows.appendChild(el("tr", { "data-raw": key }, [el("td", { class: "mono", text: key }), el("td", { class: "src-cell", text: typeof v === "string" ? v : JSON.stringify(v) })]));
          });
        })(raw, "");
        body.appendChild(el("table", { class: "ex-inputs" }, [rows]));
      }
    }
    byId("explain").hidden = false;
    byId("explain-backdrop").hidden = false;
    if (kept) {
      var details = body.querySelectorAll("details");
      kept.open.forEach(function (o, i) { if (details[i] && o) details[i].open = true; });
      var now = body.querySelectorAll("details, summary, a, button");
      if (kept.focus >= 0 && now[kept.focus]) now[kept.focus].focus({ preventScroll: true });
    } else byId("explain-close").focus();
    S.explainOpen = name;
  }
  function closeExplain() {
    byId("explain").hidden = true;
    byId("explain-backdrop").hidden = true;
    S.explainOpen = null;
  }
  document.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-explain]") : null;
    if (t) { openExplain(t.getAttribute("data-explain")); }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") closeExplain();
    if ((ev.key === "Enter" || ev.key === " ") && ev.target.getAttribute && ev.target.getAttribute("data-explain") && ev.target.tagName !== "BUTTON") {
      ev.preventDefault(); openExplain(ev.target.getAttribute("data-explain"));
    }
  });
  byId("explain-close").addEventListener("click", closeExplain);
  byId("explain-backdrop").addEventListener("click", closeExplain);

  // ---------------------------------------------------------------- history
  var COLS = ["step", "tokens", "flops", "time", "min", "max", "last"];
  function mergeHistory(h) {
    if (!h) return;
    S.axesAbsent = h.axes_absent || {};
    S.flopsConvention = h.flops_convention;
    var incoming = h.series || {};
    Object.keys(incoming).forEach(function (name) {
      var e = incoming[name];
      var cur = S.series[name];
      if (!cur || e.reset) {
        cur = S.series[name] = {};
        COLS.forEach(function (c) { cur[c] = e[c].slice(); });
      } else {
        COLS.forEach(function (c) { cur[c].length = e.start; Array.prototype.push.apply(cur[c], e[c]); });
      }
      ["name", "group", "unit", "label", "points", "span", "epoch"].forEach(function (k) { cur[k] = e[k]; });
    });
  }

  // ---------------------------------------------------------------- charts
  var LOSS_NAMES = ["train_loss", "val_loss", "loss", "eval_loss"];
  var SYSTEM_CHARTS = [
    { id: "throughput", title: "Tokens per second", names: ["tokens_per_s"], unit: "tokens/s" },
    { id: "step_time", title: "Step time", names: ["step_time_s"], unit: "s" },
    { id: "utilization", title: "Utilization over the run", names: ["mfu", "ofu", "gpu_util", "sm_active", "tensor_active"], unit: "ratio" },
    { id: "goodput", title: "Goodput", names: ["goodput"], unit: "ratio" },
    { id: "power", title: "GPU power", names: ["power_w"], unit: "W" },
    { id: "gpu_memory", title: "GPU memory used", names: ["gpu_memory_used_b"], unit: "B" },
    { id: "allocator", title: "Caching allocator: reserved and allocated", names: ["memory_reserved_b", "memory_allocated_b"], unit: "B" },
    { id: "host", title: "Training processes' memory (RSS)", names: ["host_rss_b"], unit: "B" },
    { id: "host_cpu", title: "Training processes' CPU (cores)", names: ["host_cpu_cores"], unit: "cores" },
    { id: "node_cpu", title: "Node CPU busy", names: ["node_cpu_busy"], unit: "ratio" },
    { id: "node_memory", title: "Node memory used", names: ["node_memory_used_b"], unit: "B" },
    { id: "node_io", title: "Node disk and network", names: ["node_disk_read_b_s", "node_disk_write_b_s", "node_net_rx_b_s", "node_net_tx_b_s"], unit: "B/s" },
  ];
  function chartSpecs() {
    var specs = [];
    var names = Object.keys(S.series);
    var loop = names.filter(function (n) { return S.series[n].group === "loop"; });
    var loss = loop.filter(function (n) { return LOSS_NAMES.indexOf(n) >= 0 || /loss/i.test(n); });
    // linear by default, fitted to the data; log one click away
    if (loss.length) specs.push({ id: "loss", title: "Loss", names: loss, unit: "", logToggle: true, defaultLog: false, smooth: true });
    var quantities = {};
    loop.filter(function (n) { return loss.indexOf(n) < 0; }).sort().forEach(function (n) {
      var q = quantityOf(n);   // train_acc and val_acc share one chart
      if (!quantities[q]) specs.push(quantities[q] = { id: "loop:" + q, title: q === n ? n : q, names: [], unit: "", logToggle: true, defaultLog: false, smooth: true });
      quantities[q].names.push(n);
    });
    SYSTEM_CHARTS.forEach(function (c) {
      var have = c.names.filter(function (n) { return S.series[n]; });
      if (have.length) specs.push({ id: c.id, title: c.title, names: have, unit: c.unit });
    });
    // each rank's compute a step: the rank the others wait for is the highest line
    var ranks = names.filter(function (n) { return S.series[n].group === "ranks"; });
    if (ranks.length) specs.push({ id: "rank_compute", title: "Compute a step, per rank (the others wait for the highest)", names: ranks, unit: "s" });
    // the ones read first come first: loss, tokens/s, MFU, memory; then the rest as they were
    var at = function (sp) { var i = CHART_FIRST.indexOf(sp.id); return i < 0 ? CHART_FIRST.length : i; };
    specs.forEach(function (sp, i) { sp.order = i; });
    specs.sort(function (a, b) { return at(a) - at(b) || a.order - b.order; });
    return specs;
  }
  var CHART_H = 260;   // tall enough to read a curve on a laptop screen
  var CHART_FIRST = ["loss", "throughput", "utilization", "gpu_memory"];
  function quantityOf(name) {
    var m = /^(train|val|valid|eval|test)_(.+)$/.exec(name);
    return m ? m[2] : name;
  }
  var AXIS_UNITS = K.AXIS_UNITS, cssVar = K.cssVar, PALETTE = K.PALETTE;
  var X_TITLES = { step: "step", tokens: "tokens", flops: "FLOPs spent", time: "time since start" };
  var NAMED_COLORS = { train_loss: "--c1", val_loss: "--c2", mfu: "--c2", ofu: "--c4", gpu_util: "--c6", sm_active: "--c1", tensor_active: "--c3" };

  function xFormat(v) {
    if (!isNum(v)) return "";
    if (S.axis === "time") return dur(v);
    if (S.axis === "flops") return si(v, "");
    return Math.abs(v) >= 1e4 ? F.si(v) : String(Math.round(v * 100) / 100);
  }
  // Shares, bytes, watts and cores start at zero (a flat 100% reads as full, not as noise);
  // shares go to 100% at least. Throughput and step time keep uPlot's own range, to show change.
  var FROM_ZERO = { ratio: 1, B: 1, W: 1, "B/s": 1, cores: 1 };
  function yScale(unit) {
    if (!FROM_ZERO[unit]) return {};
    return { range: function (u, min, max) {
      var top = unit === "ratio" ? Math.max(1, max) : (max > 0 ? max * 1.1 : 1);
      return [Math.min(0, min), top];
    } };
  }
  var axisSize = K.axisSize, ROUND_TICKS = K.ROUND_TICKS, roundAxis = K.roundAxis;
  var UNIT_TITLES = {};
  function yFormatter(unit) {
    return function (v) {
      if (!isNum(v)) return "";
      if (unit === "tokens/s" || unit === "cores" || unit === "") return F.metric(v);
      return fmtUnit(v, unit);
    };
  }
  function chartData(spec) {
    // Each series has its own x positions; uPlot.join aligns them on one sorted x.
    var tables = spec.names.map(function (n) {
      var s = S.series[n], xs = s[S.axis] || [];
      var x = [], lo = [], hi = [], last = [];
      for (var i = 0; i < xs.length; i++) {
        if (!isNum(xs[i])) continue;
        if (x.length && xs[i] <= x[x.length - 1]) {   // equal x: keep the later bucket's values
          if (xs[i] === x[x.length - 1]) { lo[lo.length - 1] = Math.min(lo[lo.length - 1], s.min[i]); hi[hi.length - 1] = Math.max(hi[hi.length - 1], s.max[i]); last[last.length - 1] = s.last[i]; }
          continue;
        }
        x.push(xs[i]); lo.push(s.min[i]); hi.push(s.max[i]); last.push(s.last[i]);
      }
      return [x, last, lo, hi];
    });
    var data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    if (!smoothing(spec)) return data;
    // a fourth array a series: its curve smoothed, drawn over the raw one (which goes faint)
    var out = [data[0]];
    for (var k = 1; k < data.length; k += 3) out.push(data[k], data[k + 1], data[k + 2], K.smooth(data[k], S.smooth));
    return out;
  }
  function smoothing(spec) { return !!spec.smooth && S.smooth > 0; }
  function stride(spec) { return smoothing(spec) ? 4 : 3; }
  function allPositive(spec) {
    return spec.names.every(function (n) { return S.series[n].min.every(function (v) { return !isNum(v) || v > 0; }); });
  }
  // A chart's data for its text alternative and CSV: the x, then each series' value (the last
  // of its span), its lowest and highest when a point spans several, and smoothed when shown.
  function chartTable(spec) {
    var data = chartData(spec), step = stride(spec), header = [X_TITLES[S.axis] || S.axis], cols = [];
    spec.names.forEach(function (n, k) {
      var label = (S.series[n] && S.series[n].label) || n, base = 1 + k * step, span = (S.series[n].span || 1) > 1;
      header.push(label); cols.push([base, fmtUnit]);
      if (span) { header.push(label + " (lowest)", label + " (highest)"); cols.push([base + 1, fmtUnit], [base + 2, fmtUnit]); }
      if (step === 4) { header.push(label + " (smoothed)"); cols.push([base + 3, fmtUnit]); }
    });
    var rows = [], shown = [];
    for (var i = 0; i < data[0].length; i++) {
      var row = [data[0][i]], text = [xFormat(data[0][i])];
      cols.forEach(function (c) { var v = data[c[0]][i]; row.push(isNum(v) ? v : null); text.push(isNum(v) ? c[1](v, spec.unit) : ""); });
      rows.push(row); shown.push(text);
    }
    return { header: header, rows: rows, shown: shown };
  }
  function buildChart(spec, holder) {
    var state = S.charts[spec.id];
    var log = state.log && allPositive(spec);
    var series = [{ value: function (u, v) { return xFormat(v); } }];
    var bands = [];
    spec.names.forEach(function (n, k) {
      var color = cssVar(NAMED_COLORS[n] || PALETTE[k % PALETTE.length]);
      var label = (S.series[n] && S.series[n].label) || n;
      var base = series.length, smoothed = smoothing(spec);
      // smoothed: the raw curve faint behind the smoothed one, as TensorBoard draws it
      series.push({ label: label, stroke: smoothed ? color + "55" : color, width: smoothed ? 1 : 1.6, spanGaps: true, points: { show: false }, value: function (u, v) { return isNum(v) ? fmtUnit(v, spec.unit) : "—"; } });
      series.push({ label: label + " min", stroke: "transparent", spanGaps: true, points: { show: false }, show: true, value: function () { return ""; } });
      series.push({ label: label + " max", stroke: "transparent", spanGaps: true, points: { show: false }, show: true, value: function () { return ""; } });
      if (smoothed) series.push({ label: label + " smoothed", stroke: color, width: 1.8, spanGaps: true, points: { show: false }, value: function (u, v) { return isNum(v) ? fmtUnit(v, spec.unit) : "—"; } });
      // the min-max band only once buckets hold several points (before, it would be a line)
      if ((S.series[n].span || 1) > 1) bands.push({ series: [base + 2, base + 1], fill: color + (smoothed ? "18" : "30") });
    });
    var grid = cssVar("--line"), ink = cssVar("--muted");
    var axisX = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, label: X_TITLES[S.axis] || S.axis, labelSize: 20, values: function (u, vals) { return vals.map(xFormat); } };
    var axisY = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, size: axisSize, values: function (u, vals) { return vals.map(yFormatter(spec.unit)); } };
    var yTitle = AXIS_UNITS[spec.unit] || (spec.id === "loss" ? "loss" : "");
    if (yTitle) { axisY.label = yTitle; axisY.labelSize = 20; }
    if (!log && ROUND_TICKS[spec.unit]) roundAxis(axisY, spec.unit);
    var opts = {
      width: Math.max(280, holder.clientWidth - 4),
      height: CHART_H,
      series: series,
      bands: bands,
      // log: fitted to the data too (not snapped out to whole decades, which squashes a curve)
      scales: { x: { time: false }, y: log ? { distr: 3, range: function (u, min, max) { return [min / 1.02, max * 1.02]; } } : yScale(spec.unit) },
      axes: [axisX, axisY],
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: true } },
      hooks: {
        setSelect: [function (u) { if (u.select.width > 2) state.zoomed = true; }],
        // hovering reads the values under the cursor into the card's header
        setCursor: [function (u) {
          var i = u.cursor.idx;
          state.hover = i != null;
          if (i == null) { showLatest(spec, state); return; }
          var parts = [], step = stride(spec);
          for (var k = 1; k < u.series.length; k += step) {
            var v = u.data[k][i];
            if (v == null) continue;
            var lo = u.data[k + 1][i], hi = u.data[k + 2][i];
            var txt = fmtUnit(v, spec.unit);
            if (isNum(lo) && isNum(hi) && lo !== hi) txt += " (" + fmtUnit(lo, spec.unit) + "–" + fmtUnit(hi, spec.unit) + ")";
            if (step === 4 && isNum(u.data[k + 3][i])) txt += ", smoothed " + fmtUnit(u.data[k + 3][i], spec.unit);
            parts.push((spec.names.length > 1 ? u.series[k].label + " " : "") + txt);
          }
          state.now.textContent = S.axis + " " + xFormat(u.data[0][i]) + ": " + parts.join(" · ");
        }],
      },
    };
    var data = chartData(spec);
    clear(holder);
    var plot = new uPlot(opts, data, holder);
    var keys = clear(state.keys);
    if (spec.names.length > 1) {
      spec.names.forEach(function (n, k) {
        var color = cssVar(NAMED_COLORS[n] || PALETTE[k % PALETTE.length]);
        keys.appendChild(el("span", { class: "key" }, [el("i", { style: "background:" + color }), (S.series[n] && S.series[n].label) || n]));
      });
    }
    holder.addEventListener("dblclick", function () { state.zoomed = false; });
    state.plot = plot;
    state.axis = S.axis;
    state.builtLog = log;
    state.names = spec.names.join(",");
    state.points = data[0].length;
  }
  // The latest value, beside the title (unless the cursor is reading a point).
  function showLatest(spec, st) {
    var s0 = S.series[spec.names[0]];
    st.now.textContent = s0 && s0.last.length ? "now " + fmtUnit(s0.last[s0.last.length - 1], spec.unit) : "";
  }
  function renderCharts() {
    var box = byId("charts");
    var specs = chartSpecs();
    byId("charts-empty").hidden = specs.length > 0;
    var seen = {}, order = 0;
    specs.forEach(function (spec) {
      seen[spec.id] = true;
      var st = S.charts[spec.id];
      if (!st) {
        st = S.charts[spec.id] = { log: !!spec.defaultLog, zoomed: false };
        var now = el("span", { class: "now num" });
        var tools = el("div", { class: "chart-tools" });
        if (spec.logToggle) {
          var cb = el("input", { type: "checkbox" });
          cb.checked = st.log;
          cb.addEventListener("change", function () { st.log = cb.checked; st.plot && st.plot.destroy(); st.plot = null; renderCharts(); });
          tools.appendChild(el("label", { title: "logarithmic y axis" }, [cb, el("span", { text: "log" })]));
          st.logBox = cb;
        }
        var plotBox = el("div", { class: "plot", role: "img", "aria-label": spec.title + ": a chart; its data is in the table below it" });
        var note = el("p", { class: "chart-note" });
        var keys = el("div", { class: "keys" });
        var alt = K.textAlternative(spec.title, (function (sp) { return function () { return chartTable(sp); }; })(spec));
        st.el = el("div", { class: "chart", "data-chart": spec.id }, [
          el("div", { class: "chart-head" }, [el("h3", { text: spec.title + (UNIT_TITLES[spec.unit] ? " (" + UNIT_TITLES[spec.unit] + ")" : "") }), el("div", { class: "chart-tools" }, [now, tools])]),
          keys, plotBox, note, alt,
        ]);
        st.plotBox = plotBox; st.now = now; st.note = note; st.keys = keys; st.alt = alt;
        box.appendChild(st.el);
      }
      if (!st.hover) showLatest(spec, st);
      var axisMissing = S.axesAbsent[S.axis];
      var span = Math.max.apply(null, spec.names.map(function (n) { return S.series[n].span || 1; }));
      var totalPts = spec.names.reduce(function (a, n) { return a + (S.series[n].points || 0); }, 0);
      st.note.textContent = axisMissing ? "No " + S.axis + " axis: " + axisMissing : (span > 1 ? totalPts.toLocaleString() + " points, each drawn point spans " + span + ": the band shows their range" : "");
      if (st.logBox) {
        var pos = allPositive(spec);
        st.logBox.disabled = !pos;
        st.logBox.parentNode.title = pos ? "logarithmic y axis" : "log scale needs values above zero";
      }
      var spans = spec.names.map(function (n) { return (S.series[n].span || 1) > 1 ? 1 : 0; }).join("");
      var rebuild = !st.plot || st.spans !== spans || st.axis !== S.axis || st.builtLog !== (st.log && allPositive(spec)) || st.names !== spec.names.join(",") || st.smoothed !== (smoothing(spec) ? S.smooth : 0);
      if (rebuild) {
        st.spans = spans;
        st.smoothed = smoothing(spec) ? S.smooth : 0;
        if (spec.smooth) st.el.setAttribute("data-smooth", String(st.smoothed));
        if (st.plot) st.plot.destroy();
        st.zoomed = false;
        buildChart(spec, st.plotBox);
      } else {
        var data = chartData(spec);
        st.plot.setData(data, !st.zoomed);
        st.points = data[0].length;
      }
      st.el.setAttribute("data-points", String(st.points));
      if (st.alt.open && (st.tableAt || 0) < Date.now() - 5000) { st.tableAt = Date.now(); st.alt.refresh(); }
      // keep the cards in the specs' order (the loss first), moving only a misplaced one
      if (box.children[order] !== st.el) box.insertBefore(st.el, box.children[order] || null);
      order++;
    });
    Object.keys(S.charts).forEach(function (id) {
      if (!seen[id]) { var st = S.charts[id]; if (st.plot) st.plot.destroy(); if (st.el) st.el.remove(); delete S.charts[id]; }
    });
    var sel = byId("axis");
    for (var i = 0; i < sel.options.length; i++) {
      var o = sel.options[i], why = S.axesAbsent[o.value];
      o.disabled = !!why && o.value !== S.axis;
      o.title = why || "";
      o.textContent = o.value === "flops" ? "FLOPs spent" + (S.flopsConvention ? " (" + S.flopsConvention + ")" : "") : o.textContent;
    }
  }
  function rebuildAllCharts() {
    Object.keys(S.charts).forEach(function (id) { var st = S.charts[id]; if (st.plot) { st.plot.destroy(); st.plot = null; } });
    renderCharts();
  }
  // The loss smoothing, one slider for the loop's curves (remembered like the axis).
  K.smoothSlider(S, renderCharts);
  byId("axis").value = S.axis;
  byId("axis").addEventListener("change", function (ev) {
    S.axis = ev.target.value;
    try { localStorage.setItem("trainmeter.axis", S.axis); } catch (e) { /* storage off */ }
    renderCharts();
  });
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    layoutTiles();  // at once: a grid of the old width's columns would overflow the new width
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      Object.keys(S.charts).forEach(function (id) {
        var st = S.charts[id];
        if (st.plot) st.plot.setSize({ width: Math.max(280, st.plotBox.clientWidth - 4), height: CHART_H });
      });
    }, 150);
  });
  // theme.js sets the theme (the system's, or the switch's); the charts redraw in its colours
  document.addEventListener("tm-theme", function () { rebuildAllCharts(); });

  // ---------------------------------------------------------------- wiring
  function renderAll() {
    var parts = [renderHeader, renderAlerts, renderProgress, renderTiles, renderLadder, renderTimeSplit, renderWaterfall, renderAdvice,
      renderConventions, renderRanks, renderGpus, renderNode, renderHostCpu, renderNoGpu, renderAbsent, renderDetails, renderCharts];
    parts.forEach(function (f) {
      try { f(); } catch (e) { if (window.console) console.error(f.name, e); }
    });
    if (S.explainOpen) openExplain(S.explainOpen, true);
    document.body.setAttribute("data-seq", String(S.seq));
    if (S.snap.explain && Object.keys(S.snap.explain).length) document.body.setAttribute("data-explained", "1");
  }
  function apply(msg) {
    var fptBefore = S.flopsPerToken;
    S.mode = msg.mode || S.mode;
    S.finished = !!msg.finished;
    S.seq = msg.seq || 0;
    S.runDir = msg.run_dir || null;
    if (msg.snapshot) S.snap = msg.snapshot;
    var fpt = S.snap.flops_per_token && S.snap.flops_per_token.value;
    S.flopsPerToken = fpt;
    mergeHistory(msg.history);
    if (fptBefore !== undefined && fpt !== fptBefore && isNum(fpt)) {
      Object.keys(S.series).forEach(function (n) { var s = S.series[n]; s.flops = s.tokens.map(function (t) { return isNum(t) ? t * fpt : null; }); });
    }
    if (S.pressed) { S.renderHeld = true; return; }
    renderAll();
  }
  // A snapshot that lands between a press and its release would rebuild the row or tile under
  // the pointer, and the browser then sends the click to no element: the explanation asked for
  // never opens (and a chart's drag-to-zoom would end on rescaled axes). While a button is
  // down the page keeps what it shows; the release draws the newest snapshot, after its click.
  window.addEventListener("pointerdown", function (ev) { if (ev.isPrimary) S.pressed = true; }, true);
  function release() {
    if (!S.pressed) return;
    S.pressed = false;
    if (S.renderHeld) { S.renderHeld = false; setTimeout(renderAll, 0); }
  }
  ["pointerup", "pointercancel"].forEach(function (t) { window.addEventListener(t, function (ev) { if (ev.isPrimary) release(); }, true); });
  window.addEventListener("blur", release);
  function connect() {
    if (!window.EventSource) {
      fetch("api/state").then(function (r) { return r.json(); }).then(function (m) { S.connected = true; apply(m); });
      return;
    }
    var es = new EventSource("api/events");
    es.onopen = function () { S.connected = true; renderHeader(); };
    es.onmessage = function (ev) {
      S.connected = true;
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      apply(msg);
    };
    es.onerror = function () {
      S.connected = false;
      // a finished run whose tm has exited: nothing more will come, stop asking
      if (S.finished && S.mode === "live") es.close();
      renderHeader();
    };
  }
  renderAll();
  connect();
})();
