"""`--web` of `tm runs` and `tm compare`: what each refuses, in one line, before serving."""

from __future__ import annotations

import pytest

from trainmeter.cli import compare, runs, view


@pytest.mark.parametrize(
    ("main", "argv", "said"),
    [
        (runs.main, ["--port", "9000"], "--port goes with --web"),
        (compare.main, ["a", "--web"], "name two runs or more to compare"),
        (compare.main, ["a", "b", "c"], "tm compare A B (several: --web)"),
        (compare.main, ["a", "b", "--port", "1"], "--port goes with --web"),
        (compare.main, ["a", "b", "--web", "--port", "http"], "'http' is not a port number"),
        # '²' is a digit to str.isdigit() and not to int(): it was a traceback
        (compare.main, ["a", "b", "--web", "--port", "\u00b2"], "is not a port number"),
        (runs.main, ["--web", "--port", "\u00b2"], "is not a port number"),
        (view.main, ["--port", "\u00b2"], "is not a port number"),
    ],
)
def test_a_bad_web_request_is_one_line_and_exit_2(main, argv, said, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no runs here: nothing is served, nothing resolved
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
