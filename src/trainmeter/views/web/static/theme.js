/* trainmeter dashboard: the theme, set before the page paints (loaded in <head>).
 *
 * <html data-theme="light|dark"> is what the style sheet reads. It follows the system setting
 * (prefers-color-scheme) unless the reader picked one in the header's switch; that choice is
 * remembered in localStorage ("trainmeter.theme": "light", "dark"; absent means the system).
 * A change fires "tm-theme" on document, so the charts redraw in the theme's colours.
 */
(function () {
  "use strict";
  var KEY = "trainmeter.theme";
  var mq = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function chosen() {
    try { var v = localStorage.getItem(KEY); return v === "light" || v === "dark" ? v : "system"; } catch (e) { return "system"; }
  }
  function apply() {
    var pick = chosen();
    var theme = pick === "system" ? (mq && mq.matches ? "dark" : "light") : pick;
    var root = document.documentElement;
    if (root.getAttribute("data-theme") === theme) return;
    root.setAttribute("data-theme", theme);
    document.dispatchEvent(new CustomEvent("tm-theme", { detail: theme }));
  }
  function choose(pick) {
    try {
      if (pick === "light" || pick === "dark") localStorage.setItem(KEY, pick); else localStorage.removeItem(KEY);
    } catch (e) { /* storage off: the choice lasts this page only */ }
    apply();
  }
  apply();
  if (mq) {
    if (mq.addEventListener) mq.addEventListener("change", apply); else if (mq.addListener) mq.addListener(apply);
  }
  document.addEventListener("DOMContentLoaded", function () {
    var sel = document.getElementById("theme");
    if (!sel) return;
    sel.value = chosen();
    sel.addEventListener("change", function () { choose(sel.value); });
  });
})();
