"""`install_all`: lazy (imports no tracker), per package name, and one hook per tap."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainmeter.agent import taps
from trainmeter.agent.taps import tensorboard as tb_tap

TRACKERS = [
    "wandb",
    "mlflow",
    "transformers",
    "lightning",
    "pytorch_lightning",
    "tensorboardX",
    "torch",
    "torch.utils.tensorboard",
]


def test_install_imports_no_tracker() -> None:
    code = textwrap.dedent(
        f"""
        import json, sys
        from trainmeter.agent import taps
        names = taps.install_all()
        print(json.dumps({{"names": names,
                          "imported": [m for m in {TRACKERS!r} if m in sys.modules]}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    answer = json.loads(done.stdout)
    assert answer == {
        "names": ["wandb", "tensorboard", "mlflow", "transformers", "lightning"],
        "imported": [],
    }


def test_attaches_when_the_user_imports_the_tracker(tmp_path: Path) -> None:
    """tensorboardX is not installed here: a stand-in package shows the hook fires on import."""
    package = tmp_path / "tensorboardX"
    package.mkdir()
    (package / "__init__.py").write_text("from .writer import SummaryWriter\n")
    (package / "writer.py").write_text(
        "class SummaryWriter:\n"
        "    def add_scalar(self, tag, scalar_value, global_step=None):\n"
        "        return ('written', tag, scalar_value)\n"
        "    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None):\n"
        "        return None\n"
    )
    code = textwrap.dedent(
        """
        import json, sys
        from trainmeter.agent import taps
        taps.install_all()
        import tensorboardX
        marked = getattr(tensorboardX.SummaryWriter.add_scalar, "__trainmeter_tap__", None)
        out = tensorboardX.SummaryWriter().add_scalar("loss", 0.5, 3)
        print(json.dumps({"marked": marked, "out": list(out)}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
    )
    assert json.loads(done.stdout) == {"marked": "tensorboard", "out": ["written", "loss", 0.5]}


def test_both_lightning_package_names() -> None:
    pl_new = pytest.importorskip("lightning.pytorch")
    pl_old = pytest.importorskip("pytorch_lightning")
    from lightning.pytorch.trainer.connectors.logger_connector import logger_connector as new
    from pytorch_lightning.trainer.connectors.logger_connector import logger_connector as old

    taps.install_all()
    for package, connector in ((pl_new, new), (pl_old, old)):
        log_metrics = connector._LoggerConnector.log_metrics
        assert getattr(log_metrics, "__trainmeter_tap__", None) == "lightning"
        assert not hasattr(
            package.LightningModule.log, "__trainmeter_tap__"
        )  # self.log only collects
    taps.uninstall_all()
    assert not hasattr(new._LoggerConnector.log_metrics, "__trainmeter_tap__")


def test_install_twice_wraps_once() -> None:
    from torch.utils.tensorboard import SummaryWriter

    taps.install_all()
    taps.install_all()
    assert len(tb_tap.TAP.patched) == 2  # add_scalar and add_scalars, not four
    assert not hasattr(SummaryWriter.add_scalar.__wrapped__, "__trainmeter_tap__")


def test_a_tap_is_a_probe_only_once_it_attached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Armed is not attached: `probes` gets a tap's name when it wraps its tracker, and the
    callback (boot's: say hello again) runs once for it."""
    from trainmeter.agent.state import STATE
    from trainmeter.agent.taps import _base

    monkeypatch.setattr(STATE, "probes", [])
    monkeypatch.setattr(_base, "on_attach", None)
    attached: list[str] = []
    # torch.utils.tensorboard is imported in this process: its tap attaches at once; wandb,
    # mlflow, transformers and lightning are only armed unless imported here already
    import torch.utils.tensorboard  # noqa: F401

    names = taps.install_all(on_attach=attached.append)
    assert names == ["wandb", "tensorboard", "mlflow", "transformers", "lightning"]
    assert "tensorboard" in STATE.probes and attached.count("tensorboard") == 1
    for name in ("wandb", "mlflow"):
        module = {"wandb": "wandb.sdk.wandb_run", "mlflow": "mlflow"}[name]
        assert (name in STATE.probes) == (module in sys.modules)
    taps.uninstall_all()
    assert "tensorboard" not in STATE.probes
