"""The web dashboard: a loopback-only, read-only page over the engine's snapshot and history.

`live.WebDashboard` is the live view `tm` registers (an observer); `cli/view.py` serves the
same page for a finished run. The page itself is static (static/: HTML, CSS, JS and the
vendored uPlot), and reads `/api/state` and `/api/events`.
"""
