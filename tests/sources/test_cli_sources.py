"""`tm doctor`, `tm hardware` (text, --json, --dump/--from) and `tm attach`, run for real."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmeter.hardware.measure_peak import build_record
from trainmeter.hardware.measured_peaks import write_peak
from trainmeter.sources.gpu.fake import FakeBackend
from trainmeter.sources.gpu.sampler import GpuSampler

from ..conftest import default_signals, run_tm, tm_env
from .nvml_testkit import fixture_path


def test_doctor_names_every_missing_part_here(tmp_path):
    res = run_tm(["doctor"], cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "psutil" in out and "cgroup" in out and "agent" in out
    # this machine has no NVIDIA driver: doctor says so, and what is lost by it
    assert "NVML library not found" in out and "no OFU" in out


def test_doctor_over_a_fake_card_without_spec_or_gpm(tmp_path):
    env = tm_env(TRAINMETER_FAKE_NVML=str(fixture_path("geforce_gt1030_unknown")))
    res = run_tm(["doctor", "--json"], cwd=tmp_path, env=env, timeout=120)
    checks = {c["check"]: c for c in json.loads(res.stdout)}
    assert checks["nvml"]["status"] == "ok" and "535.183.01" in checks["nvml"]["detail"]
    assert checks["gpu0 gpm"]["status"] == "no" and "no GPM" in checks["gpu0 gpm"]["detail"]
    assert checks["gpu0 spec"]["status"] == "no"
    assert "GeForce GT 1030" in checks["gpu0 spec"]["detail"]


def test_hardware_text_and_json_here(tmp_path):
    res = run_tm(["hardware"], cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "GPUs    none visible: NVML library not found" in res.stdout
    assert "limits" in res.stdout and "CPU" in res.stdout
    inv = json.loads(run_tm(["hardware", "--json"], cwd=tmp_path, timeout=120).stdout)
    assert inv["unavailable"].startswith("NVML library not found")
    assert inv["cpu"]["cores"] == os.cpu_count()
    assert inv["memory"]["total_b"] > 0 and inv["disks"]
    assert "limits" in inv["container"] or inv["container"]["limits_missing"]


def test_hardware_shows_spec_source_lines_for_a_cited_card(tmp_path):
    env = tm_env(TRAINMETER_FAKE_NVML=str(fixture_path("h100_sxm_gpm")))
    out = run_tm(["hardware"], cwd=tmp_path, env=env, timeout=120).stdout
    assert "[0] NVIDIA H100 80GB HBM3" in out and "GPM: yes" in out
    try:
        from trainmeter.hardware.specs import lookup
    except ImportError:
        assert "spec table" in out
        return
    if lookup("NVIDIA H100 80GB HBM3") is not None:
        assert "dense BF16 peak 990 TFLOP/s" in out  # by the one number rule; --sources quotes 989.5


def test_dump_round_trip(tmp_path):
    dump = tmp_path / "node.json"
    peaks = tmp_path / "peaks"
    env = tm_env(
        TRAINMETER_FAKE_NVML=str(fixture_path("h100_sxm_gpm")), TRAINMETER_PEAKS_DIR=str(peaks)
    )
    # a measured peak on this node for GPU 0 travels inside the dump
    write_peak(
        build_record(
            uuid="GPU-5f3b0c8e-91d2-4c6a-b0a7-1e2d3c4b5a60",
            device_name="NVIDIA H100 80GB HBM3",
            timings={8192: (400, 0.6)},
            torch_version="2.13.0",
            hostname=socket.gethostname(),
        ),
        {"TRAINMETER_PEAKS_DIR": str(peaks)},
    )
    live = run_tm(["hardware", "--json", "--dump", str(dump)], cwd=tmp_path, env=env, timeout=120)
    assert live.returncode == 0, live.stderr
    # shown from the dump on a machine without the fake: the same inventory
    again = run_tm(["hardware", "--json", "--from", str(dump)], cwd=tmp_path, timeout=120)
    assert json.loads(again.stdout) == json.loads(live.stdout)
    gpu0 = json.loads(live.stdout)["gpus"][0]
    assert gpu0["measured_peak_flops"] == pytest.approx(733.0e12, rel=1e-3)
    data = json.loads(dump.read_text())
    assert "/proc/meminfo" in data["node"]["files"]
    assert any(p.endswith("/cgroup") for p in data["node"]["files"])
    # and the fake backend loads the dump file itself as a fixture
    s = GpuSampler(backend=FakeBackend(dump), gpus="0", process_names=lambda: [])
    row = s.sample()["gpus"][0]
    assert row["uuid"] == "GPU-5f3b0c8e-91d2-4c6a-b0a7-1e2d3c4b5a60" and row["gpu_util"] == 0.0


TARGET = (
    "import sys, time\n"
    "block = b'\\x01' * (120 * 1024 * 1024)\n"
    "print('ready', flush=True)\n"
    "t0 = time.monotonic()\n"
    "while time.monotonic() - t0 < 60: pass\n"
)


def _events(cwd: Path) -> list[dict]:
    (run_dir,) = list((cwd / ".trainmeter" / "runs").iterdir())
    assert run_dir.name.split("-attach-")[1].isdigit()
    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def test_attach_watches_and_detaches_on_sigint(tmp_path):
    target = subprocess.Popen([sys.executable, "-c", TARGET], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        tm = subprocess.Popen(
            [sys.executable, "-m", "trainmeter", "attach", str(target.pid), "--interval", "0.5"],
            cwd=tmp_path,
            env=tm_env(),
            preexec_fn=default_signals,  # detached by SIGINT: never inherit it ignored
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines = []
        while len(lines) < 4:
            line = tm.stdout.readline()
            assert line, tm.stderr.read()
            lines.append(line)
        tm.send_signal(signal.SIGINT)
        out, err = tm.communicate(timeout=120)
        assert tm.returncode == 0, err
        assert target.poll() is None  # left running
        assert "cores" in lines[-1] and "rss" in lines[-1] and "no GPU" in lines[-1]
        assert "detached" in err
        events = _events(tmp_path)
    finally:
        target.kill()
        target.wait()
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run.start" and kinds[-1] == "run.end"
    assert events[0]["d"]["attached_pid"] == target.pid
    fact = events[1]["d"]
    assert fact["key"] == "observe_only" and "no agent" in fact["value"]
    hosts = [e["d"] for e in events if e["kind"] == "sample.host"]
    assert len(hosts) >= 3 and all(h["pids"] == [target.pid] for h in hosts)
    assert hosts[-1]["rss_kb"] >= 120 * 1024
    assert hosts[-1]["cpu_s"] > hosts[0]["cpu_s"]  # it was burning CPU all along
    assert any(e["kind"] == "sample.node" for e in events)
    assert next(e["d"] for e in events if e["kind"] == "sample.gpu")["unavailable"]
    assert events[-1]["d"]["attach_end"] == "detached"
    (run_dir,) = list((tmp_path / ".trainmeter" / "runs").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["host"]["rss_b"] >= 120 * 2**20  # the engine read our sample.host


# A target that lives until the test closes its stdin: a fixed lifetime raced tm's start-up on
# a loaded machine (attach found no process, or too few samples).
UNTIL_STDIN = "import sys; print('ready', flush=True); sys.stdin.read()"


def _target() -> subprocess.Popen:
    target = subprocess.Popen(
        [sys.executable, "-c", UNTIL_STDIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )
    assert target.stdout.readline().strip() == "ready"
    return target


def test_attach_stops_when_the_process_exits(tmp_path):
    target = _target()
    tm = subprocess.Popen(
        [sys.executable, "-m", "trainmeter", "attach", str(target.pid), "--interval", "0.2", "-q"],
        cwd=tmp_path, env=tm_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        while "watching pid" not in (line := tm.stderr.readline()):  # attached, sampling
            assert line, "tm attach ended before it watched"
        target.stdin.close()  # the target exits now
        target.wait(timeout=60)
        start = time.monotonic()
        _, err = tm.communicate(timeout=60)
    finally:
        target.kill()
        target.wait()
        if tm.poll() is None:
            tm.kill()
            tm.wait()
    assert tm.returncode == 0 and "exited" in err, err
    # it samples every 0.2 s: it noticed the exit rather than running on until killed
    assert time.monotonic() - start < 30
    assert _events(tmp_path)[-1]["d"]["attach_end"] == "exited"


def test_attach_to_no_process_is_exit_2(tmp_path):
    res = run_tm(["attach", "999999999"], cwd=tmp_path, timeout=60)
    assert res.returncode == 2 and "no process" in res.stderr


def test_doctor_python_asks_diagnose_python(tmp_path):
    res = run_tm(["doctor", "--json", "--python", sys.executable], cwd=tmp_path, timeout=120)
    checks = {c["check"]: c for c in json.loads(res.stdout)}
    assert checks["agent in python"]["status"] == "ok", checks["agent in python"]
    res = run_tm(["doctor", "--json", "--python", "/bin/true"], cwd=tmp_path, timeout=120)
    check = {c["check"]: c for c in json.loads(res.stdout)}["agent in python"]
    assert check["status"] == "no" and "/bin/true" in check["detail"]


def test_attach_on_a_terminal_redraws_one_status_line(tmp_path):
    """On a terminal (a real pty), each sample redraws the one status line in place: no new line
    a second; the line is ended once, when tm attach stops."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    target = _target()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    out = b""

    def read(until) -> None:  # the pty's output until `until(out)` or its other end is gone
        nonlocal out
        deadline = time.monotonic() + 60
        while not until(out):
            assert time.monotonic() < deadline, repr(out)
            if not select.select([master], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the pty's other end is closed and drained
                return
            if not chunk:
                return
            out += chunk

    try:
        tm = subprocess.Popen(
            [sys.executable, "-m", "trainmeter", "attach", str(target.pid), "--interval", "0.2"],
            cwd=tmp_path, env=tm_env(TERM="xterm", COLUMNS="200"), stdout=slave,
            stderr=subprocess.PIPE, text=True,
        )
        os.close(slave)
        # several samples while the target runs, however long tm took to start
        read(lambda got: got.count(b"\r\x1b[2K[attach ") >= 3)
        target.stdin.close()  # the target exits: tm attach stops and ends its line
        target.wait(timeout=60)
        read(lambda got: False)
        _, err = tm.communicate(timeout=60)
        assert tm.returncode == 0, err
    finally:
        os.close(master)
        target.kill()
        target.wait()
    text = out.decode()
    draws = text.count("\r\x1b[2K[attach ")
    assert draws >= 3, repr(text)  # several samples, each a redraw
    # the pty turns "\n" into "\r\n": one line end in all, after the last draw
    assert text.count("\n") == 1 and text.endswith("\r\n") and "no GPU" in text
    assert text.index("\n") > text.rindex("\x1b[2K")


def test_hardware_cites_the_peak_in_one_line_once_for_identical_gpus(tmp_path):
    """The fixture's two H100s share a spec: one peak line names both, with the document; the
    full citation only with --sources, and then once; sizes in GiB."""
    env = tm_env(TRAINMETER_FAKE_NVML=str(fixture_path("h100_sxm_gpm")))
    out = run_tm(["hardware"], cwd=tmp_path, env=env, timeout=120).stdout
    peak_lines = [line for line in out.splitlines() if line.strip().startswith("peak ")]
    assert len(peak_lines) == 1, out
    assert "GPUs 0-1" in peak_lines[0] and "990 TFLOP/s" in peak_lines[0]
    assert "from NVIDIA H100 product page" in peak_lines[0] and len(peak_lines[0]) < 200
    assert "bf16_dense_tflops:" not in out and " GB" not in out and "GiB" in out
    full = run_tm(["hardware", "--sources"], cwd=tmp_path, env=env, timeout=120).stdout
    assert full.count("bf16_dense_tflops:") == 1 and "1,979 teraFLOPS" in full
    assert "halved to 989.5 TFLOP/s dense" in full  # the exact figure, where it is cited
