"""Fixtures for the supervisor tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def old_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python older than 3.10: a real one when the machine has it (pyenv), else a stand-in
    named python3.8 that answers the diagnosis as a 3.8 would and otherwise just sleeps."""
    import glob

    real = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[6-9]*/bin/python3.[6-9]")))
    if real:
        return real[-1]
    stub = tmp_path_factory.mktemp("old") / "python3.8"
    stub.write_text(
        "#!/bin/sh\n"
        'case "$2" in *sys.version_info*) '
        'echo \'{"version": [3, 8, 18], "executable": "\'$0\'", "prefix": "/old"}\'; exit 0;; '
        "esac\nexec sleep 60\n"
    )
    stub.chmod(0o755)
    return str(stub)
