/* trainmeter: how a number reads, the same rule as the terminal's (views/format.py).
 *
 * Both are checked against one table of cases (tests/views/format_cases.json), so a value
 * reads the same on the page, in `tm summary`, the passport, the report and `tm compare`:
 * a count with k, M, B, T (2.5B); a quantity with the SI prefix on its unit (2.5 GFLOP, 1.4 kJ)
 * and bytes with the binary one (2.0 GiB); one decimal below 100 and none above once scaled;
 * percentages with one decimal (a tiny one two significant digits); durations as 83.9 ms, 2.5 s,
 * 5m03s, 2h05m, 2d07h; an absent number as "?". Loaded before app.js and the report's script.
 */
(function (root) {
  "use strict";
  var ABSENT = "?";
  var ROUNDS_UP = 0.9995;
  var COUNT = [[1e15, "P"], [1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]];
  var UNIT = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""], [1e-3, "m"], [1e-6, "µ"], [1e-9, "n"]];
  var BYTES = [[Math.pow(2, 40), "Ti"], [Math.pow(2, 30), "Gi"], [Math.pow(2, 20), "Mi"], [Math.pow(2, 10), "Ki"]];

  function number(v) { return typeof v === "number" && isFinite(v) ? v : null; }
  // toFixed rounds a tie away from zero on the exact binary value; Python's side does the same.
  function fixedPlaces(x, places) {
    var text = x.toFixed(places);
    return text.charAt(0) === "-" && Number(text) === 0 ? text.slice(1) : text;
  }
  function belowOne(x) {
    var text = fixedPlaces(x, 2 - Math.floor(Math.log10(Math.abs(x))));
    if (text.indexOf(".") >= 0) text = text.replace(/0+$/, "").replace(/\.$/, "");
    return text;
  }
  function mantissa(x) {
    var a = Math.abs(x);
    if (a === 0) return "0";
    if (a >= 99.95) return fixedPlaces(x, 0);
    if (a >= 0.95) return fixedPlaces(x, 1);
    return belowOne(x);
  }
  function si(value) {
    var v = number(value);
    if (v === null) return ABSENT;
    for (var i = 0; i < COUNT.length; i++) {
      if (Math.abs(v) >= COUNT[i][0] * ROUNDS_UP) return mantissa(v / COUNT[i][0]) + COUNT[i][1];
    }
    if (v === Math.trunc(v)) return String(v);
    return mantissa(v);
  }
  function siUnit(value, unit) {
    var v = number(value), i;
    if (v === null) return ABSENT;
    if (v === 0) return "0 " + unit;
    if (unit === "B" || unit.indexOf("B/") === 0) {
      for (i = 0; i < BYTES.length; i++) {
        if (Math.abs(v) >= BYTES[i][0] * ROUNDS_UP) return mantissa(v / BYTES[i][0]) + " " + BYTES[i][1] + unit;
      }
      return fixedPlaces(v, 0) + " " + unit;
    }
    for (i = 0; i < UNIT.length; i++) {
      if (Math.abs(v) >= UNIT[i][0] * ROUNDS_UP) return mantissa(v / UNIT[i][0]) + " " + UNIT[i][1] + unit;
    }
    return mantissa(v / 1e-9) + " n" + unit;
  }
  function percent(fraction) {
    var f = number(fraction);
    if (f === null) return ABSENT;
    var value = 100 * f, a = Math.abs(value);
    if (a === 0 || a >= 0.095) return fixedPlaces(value, 1) + "%";
    if (a < 0.0001) return exponent(value) + "%";
    var text = fixedPlaces(value, 1 - Math.floor(Math.log10(a)));
    return text.replace(/0+$/, "").replace(/\.$/, "") + "%";
  }
  function pad2(n) { return (n < 10 ? "0" : "") + n; }
  function duration(seconds) {
    var s = number(seconds);
    if (s === null) return ABSENT;
    s = Math.max(s, 0);
    if (s === 0) return "0 s";
    if (s >= 0.9995 && s < 59.95) return mantissa(s) + " s";
    if (s < 1) return siUnit(s, "s");
    var whole = Math.floor(s + 0.5);
    if (whole < 3600) return Math.floor(whole / 60) + "m" + pad2(whole % 60) + "s";
    if (whole < 86400) return Math.floor(whole / 3600) + "h" + pad2(Math.floor((whole % 3600) / 60)) + "m";
    return Math.floor(whole / 86400) + "d" + pad2(Math.floor((whole % 86400) / 3600)) + "h";
  }
  function metric(value) {
    var v = number(value);
    if (v === null) return ABSENT;
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 9999.5) return si(v);
    if (a >= 0.00099995) {
      var text = fixedPlaces(v, Math.max(0, 3 - Math.floor(Math.log10(a))));
      return text.indexOf(".") >= 0 ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
    }
    return exponent(v);
  }
  function exponent(v) {
    var power = Math.floor(Math.log10(Math.abs(v)));
    var digits = fixedPlaces(v / Math.pow(10, power), 1);
    if (Math.abs(Number(digits)) >= 10) { power += 1; digits = fixedPlaces(v / Math.pow(10, power), 1); }
    return digits + "e" + power;
  }
  var PREFIXED = { FLOP: 1, FLOPs: 1, J: 1, W: 1, B: 1, Wh: 1, Hz: 1, byte: 1 };
  var PLAIN = { MHz: 1, GHz: 1, "°C": 1, C: 1, cores: 1, "%": 1 };
  function amount(value, unit) {
    var v = number(value);
    unit = unit || "";
    if (v === null) return ABSENT;
    if (unit === "fraction" || unit === "ratio" || unit === "fraction of dense peak") return percent(v);
    if (unit === "s") return duration(v);
    if (unit === "factor") return "×" + mantissa(v);
    if (PREFIXED[unit.split("/")[0].split(" ")[0]]) return siUnit(v, unit);
    if (PLAIN[unit]) return (v === Math.trunc(v) ? String(v) : mantissa(v)) + " " + unit;
    return si(v) + (unit && unit !== "1" ? " " + unit : "");
  }
  root.TMFormat = { amount: amount, metric: metric,  ABSENT: ABSENT, fixedPlaces: fixedPlaces, mantissa: mantissa, si: si, si_unit: siUnit, percent: percent, duration: duration };
})(typeof window !== "undefined" ? window : globalThis);
