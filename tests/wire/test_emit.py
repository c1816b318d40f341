"""`emit()`: a no-op outside tm, batched and lossless inside, never raising, never syncing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from trainmeter import emit
from trainmeter.emit import as_number


def test_outside_tm_emit_is_a_no_op_and_returns_none() -> None:
    code = textwrap.dedent(
        """
        import os
        assert "TRAINMETER_SOCKET" not in os.environ
        from trainmeter import emit
        from trainmeter.agent import sender
        assert emit(train_loss=1.0, anything=object()) is None
        assert sender.get_sender() is None
        print("ok")
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TRAINMETER_")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert out.stderr == ""  # not even the skip warning: outside tm nothing is looked at


def test_as_number_reads_host_numbers_only() -> None:
    import numpy as np
    import torch

    assert as_number(3) == 3.0
    assert as_number(np.float32(0.5)) == 0.5
    assert as_number(torch.tensor(2.5)) == 2.5
    assert as_number(True) is None
    assert as_number(float("nan")) is None
    assert as_number(float("inf")) is None
    assert as_number(torch.tensor([1.0, 2.0])) is None  # not 0-dim
    assert as_number("1.0") is None


def test_as_number_never_reads_an_accelerator_tensor() -> None:
    class DeviceTensor:
        ndim = 0
        device = type("Device", (), {"type": "cuda"})()

        def __float__(self):  # would be a device synchronization
            raise AssertionError("read a value off the accelerator")

        def detach(self):
            raise AssertionError("touched an accelerator tensor")

    assert as_number(DeviceTensor()) is None


def test_emit_inside_tm_sends_every_value_batched(collector) -> None:
    code = textwrap.dedent(
        """
        import torch
        from trainmeter import emit
        w = torch.tensor(2.0, requires_grad=True)
        loss = w * 3  # requires grad: read through detach, no warning, autograd untouched
        for i in range(1000):
            emit(train_loss=float(i), lr=1e-3)
        emit(grad=loss)
        emit(tokens_per_step=4096)
        loss.backward()
        assert w.grad.item() == 3.0
        """
    )
    result = collector.run_code(code)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr
    metrics = collector.of_kind("metric")
    losses = [m["d"]["value"] for m in metrics if m["d"]["key"] == "train_loss"]
    assert losses == [float(i) for i in range(1000)]  # none lost, in order
    assert sum(1 for m in metrics if m["d"]["key"] == "lr") == 1000
    assert [m["d"]["value"] for m in metrics if m["d"]["key"] == "grad"] == [6.0]
    assert all(m["d"]["via"] == "emit" and m["src"] == "emit" for m in metrics)
    facts = collector.of_kind("fact")
    assert {"key": "tokens_per_step", "value": 4096.0, "source": "emitted"} in [f["d"] for f in facts]
    # batched: far fewer datagrams than values
    assert collector.datagrams < 100


def test_emit_skips_non_numbers_and_warns_once_per_key(collector) -> None:
    code = textwrap.dedent(
        """
        from trainmeter import emit
        for _ in range(5):
            emit(note="text", train_loss=1.5, other=[1])
        """
    )
    result = collector.run_code(code)
    assert result.returncode == 0
    assert result.stderr.count("emit(note=...) skipped") == 1
    assert result.stderr.count("emit(other=...) skipped") == 1
    keys = [m["d"]["key"] for m in collector.of_kind("metric")]
    assert keys == ["train_loss"] * 5


def test_emit_never_raises_even_when_the_supervisor_is_gone(tmp_path) -> None:
    code = textwrap.dedent(
        """
        import time
        from trainmeter import emit
        from trainmeter.agent.sender import get_sender
        for i in range(50):
            emit(train_loss=i)
            time.sleep(0.005)
        deadline = time.monotonic() + 30
        while get_sender() is not None and time.monotonic() < deadline:
            time.sleep(0.01)  # the sender goes quiet once it finds nobody listening
        assert get_sender() is None, "the sender should have gone quiet"
        emit(train_loss=1.0)
        print("alive")
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TRAINMETER_")}
    env["TRAINMETER_SOCKET"] = str(tmp_path / "nobody-listens.sock")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "alive"


def test_a_forked_child_sends_on_its_own_socket(collector) -> None:
    code = textwrap.dedent(
        """
        import os, time
        from trainmeter import emit
        emit(parent_before=1)
        time.sleep(0.2)
        pid = os.fork()
        if pid == 0:
            emit(child=2)
            from trainmeter.agent.sender import get_sender
            get_sender().flush()
            os._exit(0)
        os.waitpid(pid, 0)
        emit(parent_after=3)
        """
    )
    result = collector.run_code(code)
    assert result.returncode == 0, result.stderr
    by_key = {m["d"]["key"]: m for m in collector.of_kind("metric")}
    assert set(by_key) == {"parent_before", "child", "parent_after"}
    assert by_key["child"]["pid"] != by_key["parent_after"]["pid"]
    assert by_key["parent_before"]["pid"] == by_key["parent_after"]["pid"]


def test_emit_in_this_process_outside_tm_is_harmless() -> None:
    assert emit(train_loss=1.0) is None


def test_as_number_takes_numpy_scalars_and_0d_arrays_and_never_raises() -> None:
    import numpy as np

    assert as_number(np.array(2.5)) == 2.5  # 0-d array: NumPy 2 says device "cpu" (a string)
    assert as_number(np.float16(0.5)) == 0.5
    assert as_number(np.int64(7)) == 7.0
    assert as_number(np.array(3, dtype=np.int32)) == 3.0
    assert as_number(np.bool_(True)) is None
    assert as_number(np.array(True)) is None
    assert as_number(np.array(1 + 2j)) is None
    assert as_number(np.array([1.0])) is None  # 1-d, not a scalar
    assert as_number(np.float64("nan")) is None
    assert as_number(10**400) is None  # too large for a float: refused, not an OverflowError
    assert as_number(-(10**400)) is None


def test_each_key_stands_alone(collector) -> None:
    code = textwrap.dedent(
        """
        import numpy as np
        from trainmeter import emit
        emit(a=10**400, loss=1.0)
        emit(a=10**400, loss=2.0, n=np.float32(0.25), m=np.array(4.0))
        """
    )
    result = collector.run_code(code)
    assert result.returncode == 0, result.stderr
    got = [(m["d"]["key"], m["d"]["value"]) for m in collector.of_kind("metric")]
    assert got == [("loss", 1.0), ("loss", 2.0), ("n", 0.25), ("m", 4.0)]
    warnings = [line for line in result.stderr.splitlines() if "trainmeter" in line]
    assert warnings == ["trainmeter: emit(a=...) skipped: not a finite number on the host"]
