"""Bad arguments and bad files give a one-line reason, never a traceback nor an endless read
(issue 22, items 12 and 13).

Before: `tm attach -1` and `--interval nan` gave tracebacks and `--duration -1` was accepted; a
`TRAINMETER_FAKE_NVML` file that is truncated, `[]`, random bytes or missing gave tracebacks,
and `/dev/zero` was read until memory ran out.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import default_signals, run_tm, tm_env

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


@pytest.mark.parametrize(
    "args",
    [["-1"], ["--", "-1"], ["0"], ["1", "--interval", "nan"], ["1", "--interval", "inf"],
     ["1", "--interval", "-2"], ["1", "--duration", "-1"], ["1", "--duration", "nan"]],
)
def test_attach_refuses_bad_arguments_in_one_line(tmp_path: Path, args: list[str]) -> None:
    out = run_tm(["attach", *args], tmp_path, timeout=60)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / ".trainmeter").exists()


def _bad_files(tmp_path: Path) -> dict[str, str]:
    good = next(FIXTURE.glob("*.json")).read_bytes()
    files = {
        "truncated": good[: len(good) // 2],
        "list": b"[]",
        "random": os.urandom(4096),
        "scalar": b"3",
        "devices": b'{"format": "trainmeter-nvml/1", "devices": [1, 2]}',
    }
    out = {}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        out[name] = str(tmp_path / name)
    out["missing"] = str(tmp_path / "no-such-file.json")
    out["zero"] = "/dev/zero"
    return out


def _limited() -> None:
    default_signals()
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: /dev/zero must not fill it


@pytest.mark.parametrize("kind", ["truncated", "list", "random", "scalar", "devices", "missing", "zero"])
def test_a_bad_fake_nvml_file_is_a_reason_not_a_traceback(tmp_path: Path, kind: str) -> None:
    path = _bad_files(tmp_path)[kind]
    out = subprocess.run(
        [sys.executable, "-m", "trainmeter", "hardware"],
        cwd=tmp_path, env=tm_env(TRAINMETER_FAKE_NVML=path), capture_output=True, text=True,
        timeout=120, preexec_fn=_limited,
    )
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.returncode == 0, out.stderr[-2000:]
    assert "TRAINMETER_FAKE_NVML" in out.stdout + out.stderr
