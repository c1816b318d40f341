"""`default_samplers(...)` as the supervisor's live loop uses it, on this machine."""

from __future__ import annotations

import os
import subprocess
import sys

from trainmeter import records
from trainmeter.sources import default_samplers


def test_kinds_payloads_and_close(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        samplers = default_samplers(child.pid, tmp_path, gpus=None, env={})
        assert [s.kind for s in samplers] == ["sample.host", "sample.gpu", "sample.node"]
        for _ in range(2):
            for s in samplers:
                d = s.sample()
                # every payload is a record the log accepts
                records.decode(records.encode(records.make(s.kind, d, t=1.0, src="tm")))
        host, gpu, node = (s.sample() for s in samplers)
        assert host["pids"] == [child.pid] and host["procs"] == 1
        assert node["disk"]["path"] == str(tmp_path)
        if "unavailable" in gpu:  # this machine: no driver
            assert "NVML" in gpu["unavailable"] or "nvidia-ml-py" in gpu["unavailable"]
        else:
            assert gpu["selected_by"] in {"process", "all"}
    finally:
        for s in samplers:
            s.close()
        child.kill()
        child.wait()


def test_run_dir_none_means_the_current_directory():
    samplers = default_samplers(os.getpid(), None)
    node = samplers[-1].sample()
    assert node["disk"]["path"] == os.getcwd()
    for s in samplers:
        s.close()
