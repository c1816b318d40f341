"""`tm attach PID [--interval S]`: watch a program tm did not start, from outside only.

It records what the samplers see (the process tree's CPU and memory, its GPUs, the node) into a
run directory `.trainmeter/runs/<UTC>-attach-<pid>/events.jsonl`, with a `fact` saying the run
is observe-only (no agent is inside the program, so no steps, tokens or MFU), and shows one
compact status line: on a terminal it is one line redrawn in place every interval (as the status
line under `tm`), in a pipe or a file one line every interval (a log). It never signals, traces or otherwise touches the process: Ctrl-C
detaches and leaves it running (exit 0), and it stops on its own when the process exits.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import signal
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from trainmeter import __version__, payloads, records

OBSERVE_ONLY = "attached from outside: no agent in the program"


class _Log:
    """The run's events.jsonl, line-buffered so a killed `tm attach` leaves every sample."""

    def __init__(self, path: Path) -> None:
        self.path = path
        from ..runlog.rundir import RunDir

        raw = RunDir.at(path).append("events.jsonl", buffering=0)
        self._fh: TextIO = io.TextIOWrapper(raw, encoding="utf-8", line_buffering=True)
        self.dashboard: Any = None  # the web dashboard, shown each record written

    def write(self, kind: payloads.Kind, d: dict[str, Any]) -> None:
        """One record of `kind`, its payload built through the kind's table entry."""
        try:
            rec = records.make(kind.name, kind.build(**d), t=time.monotonic(), src="tm",
                               pid=os.getpid())
            self._fh.write(records.encode(rec) + "\n")
        except (records.RecordError, OSError, TypeError) as exc:
            print(f"tm attach: cannot record {kind.name}: {exc}", file=sys.stderr)
            return
        if self.dashboard is not None:
            self.dashboard.record(rec)

    def close(self) -> None:
        self._fh.close()


def _run_dir(pid: int, root: Path) -> Path:
    """A fresh run directory, the owner's alone, written through its descriptor like a run's
    (`runlog/rundir.py`: a runs directory another user owns is refused)."""
    from ..runlog.rundir import RunDir

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    folder = RunDir.make(root, f"{stamp}-attach-{pid}")
    for note in folder.notes:
        print(f"tm attach: {note}", file=sys.stderr)
    return folder.path


def _target_env(proc: Any) -> dict[str, str]:
    """The program's own environment (for CUDA_VISIBLE_DEVICES) when we may read it; else an
    environment without CUDA_VISIBLE_DEVICES, so the GPUs are found by its process list."""
    try:
        return dict(proc.environ())
    except Exception:  # noqa: BLE001 - another user's process: fall back to NVML's list
        return {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}


def status_line(pid: int, elapsed: float, host: dict, gpu: dict, prev: tuple | None) -> str:
    """`[attach 123] 12s  1.02 cores  rss 210 MiB  3 procs  gpu0 97% 37.3 GiB` (memory in GiB/MiB)."""
    parts = [f"[attach {pid}] {elapsed:5.0f}s"]
    if prev is not None and "cpu_s" in host and elapsed > prev[0]:
        parts.append(f"{(host['cpu_s'] - prev[1]) / (elapsed - prev[0]):.2f} cores")
    if "rss_kb" in host:
        parts.append(f"rss {host['rss_kb'] / 1024:.0f} MiB")
    parts.append(f"{host.get('procs', 0)} procs")
    if "unavailable" in gpu:
        parts.append("no GPU")
    for row in gpu.get("gpus", []):
        util = f"{row['gpu_util'] * 100:.0f}%" if "gpu_util" in row else "?"
        mem = f" {row['memory_used_b'] / 2**30:.1f} GiB" if "memory_used_b" in row else ""
        parts.append(f"gpu{row['index']} {util}{mem}")
    return "  ".join(parts)


class _StatusLine:
    """The status on `stream`: redrawn in place on a terminal, one line a sample elsewhere."""

    def __init__(self, stream: TextIO) -> None:
        from ..views.terminal_console import is_tty

        self.stream = stream
        self.tty = is_tty(stream) and os.environ.get("TERM", "") != "dumb"
        self.drawn = False

    def show(self, line: str) -> None:
        if not self.tty:
            print(line, file=self.stream, flush=True)
            return
        from ..views.terminal_console import terminal_width

        width = terminal_width(self.stream)
        if width < 20:  # a terminal that reports no size (0 columns): do not cut
            width = 1000
        if len(line) >= width:  # a wrapped line could not be redrawn in place
            line = line[: max(width - 2, 1)] + "…"
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Leave the last status on screen and end its line, before tm's own last words."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def _write_summary(run_dir: Path) -> None:
    """summary.json from the log, like a normal run (skipped if the replay is not built)."""
    try:
        from trainmeter.runlog.replay import replay

        snapshot = replay(run_dir / "events.jsonl").snapshot
        text = json.dumps(snapshot, allow_nan=False, indent=2)
        from trainmeter.runlog.rundir import write_file

        write_file(run_dir, "summary.json", text + "\n")
    except Exception as exc:  # noqa: BLE001 - the log is the source of truth; it is written
        print(f"tm attach: no summary.json ({type(exc).__name__}: {exc})", file=sys.stderr)


def _parse(argv: list[str]) -> argparse.Namespace | None:
    """The command line, or None when it was refused (the one line said on stderr)."""
    parser = argparse.ArgumentParser(prog="tm attach", description=__doc__.splitlines()[0])
    parser.add_argument("pid", type=int)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--gpus", help="GPU indices or UUIDs to watch (default: the program's)")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    parser.add_argument("-q", "--quiet", action="store_true", help="no live line")
    parser.add_argument("--port", type=int, help="the dashboard's first port (default 8765; 0: any)")
    parser.add_argument("--no-web", action="store_true", help="no dashboard")
    args = parser.parse_args(argv)
    if args.port is not None and not 0 <= args.port <= 65535:
        why = f"--port: {args.port} is not a port number (0-65535)"
    elif args.pid <= 0:  # 0 and -1 name process groups and "every process", not one program
        why = f"{args.pid} is not a process id"
    elif not 0 < args.interval < 86400:  # also NaN and infinity
        why = "--interval must be a number of seconds above 0"
    elif args.duration is not None and not 0 < args.duration < float("inf"):
        why = "--duration must be a number of seconds above 0"
    else:
        return args
    print(f"tm attach: {why}", file=sys.stderr)
    return None


def _open(args: argparse.Namespace) -> tuple[Any, list[str], Path, _Log] | None:
    """(the process, its command line, the run directory, its log with the dashboard), or None
    when there is no such process or no run directory (said on stderr)."""
    import psutil

    try:
        proc = psutil.Process(args.pid)
        cmdline = proc.cmdline()
    except psutil.NoSuchProcess:
        print(f"tm attach: no process {args.pid}", file=sys.stderr)
        return None
    except psutil.AccessDenied:
        cmdline = []
    try:
        run_dir = _run_dir(args.pid, Path.cwd() / ".trainmeter" / "runs")
        log = _Log(run_dir)
    except OSError as exc:
        print(f"tm attach: cannot create the run directory: {exc}", file=sys.stderr)
        return None
    if not args.no_web:
        try:
            from trainmeter.views.web.attached import AttachedDashboard

            log.dashboard = AttachedDashboard(args.port, run_dir)
        except Exception as exc:  # noqa: BLE001 - watching goes on without the page
            print(f"tm attach: no dashboard ({exc})", file=sys.stderr)
    return proc, cmdline, run_dir, log


def _begin(log: _Log, pid: int, cmdline: list[str]) -> None:
    """`run.start` and the observe-only fact: what a run started by tm logs first."""
    import psutil

    log.write(
        payloads.RUN_START,
        {
            "argv": records.redact_argv(cmdline),
            "tm_version": __version__,
            "name": f"attach-{pid}",
            "declared": {},
            "attached_pid": pid,
            "node_uptime_s": round(time.time() - psutil.boot_time(), 1),
            "unix_time": time.time(),
            "hostname": socket.gethostname(),
            "python": platform.python_version(),
        },
    )
    log.write(
        payloads.FACT,
        {"key": "observe_only", "value": OBSERVE_ONLY, "source": "detected", "note": "tm attach"},
    )


def _watch(args: argparse.Namespace, samplers: list[Any], log: _Log, start: float) -> str:
    """Sample every interval until the program exits (`exited`), --duration passes or Ctrl-C
    or SIGTERM detaches (`detached`); each sample is logged and shown."""
    ended = "detached"
    prev: tuple[float, float] | None = None
    status = _StatusLine(sys.stdout)

    def _stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        while True:
            latest: dict[str, dict] = {}
            for sampler in samplers:
                d = sampler.sample()
                latest[sampler.kind] = d
                log.write(payloads.KINDS[sampler.kind], d)
            host = latest.get(payloads.SAMPLE_HOST.name, {})
            elapsed = time.monotonic() - start
            if log.dashboard is not None:
                log.dashboard.tick(time.monotonic())
            if not args.quiet:
                gpu = latest.get(payloads.SAMPLE_GPU.name, {})
                line = status_line(args.pid, elapsed, host, gpu, prev)
                status.show(line)
            if "cpu_s" in host:
                prev = (elapsed, host["cpu_s"])
            if not host.get("procs"):
                ended = "exited"
                break
            if args.duration is not None and elapsed >= args.duration:
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        ended = "detached"
    finally:
        status.close()
    return ended


def _end(log: _Log, run_dir: Path, pid: int, cmdline: list[str], ended: str, start: float) -> None:
    """`run.end` (the exit status unknown: not tm's child), the dashboard's end, meta.json."""
    end = {
        "exit_status": None,
        "elapsed_s": round(time.monotonic() - start, 3),
        "attach_end": ended,
    }
    if ended == "exited":
        end["note"] = "the program exited; not tm's child, so its exit status is unknown"
    log.write(payloads.RUN_END, end)
    if log.dashboard is not None:
        log.dashboard.finish()
    log.close()
    from ..runlog.rundir import write_file

    write_file(run_dir, "meta.json", json.dumps(
        {"attached_pid": pid, "argv": records.redact_argv(cmdline), "ended": ended}, indent=2,
    ) + "\n")


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args is None:
        return 2
    from trainmeter.sources import default_samplers

    opened = _open(args)
    if opened is None:
        return 2
    proc, cmdline, run_dir, log = opened
    start = time.monotonic()
    _begin(log, args.pid, cmdline)
    samplers = default_samplers(args.pid, run_dir, args.gpus, _target_env(proc))
    from ..visible import visible

    shown = visible(" ".join(records.redact_argv(cmdline)), newlines=False)[:80]
    print(
        f"tm attach: watching pid {args.pid} ({shown}); run dir {run_dir}; "
        "Ctrl-C detaches and leaves it running",
        file=sys.stderr,
    )
    ended = "detached"
    try:
        ended = _watch(args, samplers, log, start)
    finally:
        for sampler in samplers:
            sampler.close()
        _end(log, run_dir, args.pid, cmdline, ended, start)
    _write_summary(run_dir)
    print(
        f"tm attach: {ended} after {time.monotonic() - start:.0f}s; log in {run_dir}",
        file=sys.stderr,
    )
    return 0
