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


def test_two_runs_with_one_directory_name_are_refused_not_shown_as_one(tmp_path, monkeypatch, capsys):
    """The runs page names a run by its directory's name: two runs from two projects with the
    same name were both served as the first, and the page compared one run with itself."""
    from trainmeter.cli import web_runs

    for project in ("a", "b"):
        run = tmp_path / project / "20260101-000000-same"
        run.mkdir(parents=True)
        (run / "events.jsonl").write_text("")
    served = []
    monkeypatch.setattr(web_runs, "serve", lambda *args, **kwargs: served.append(args) or 0)
    monkeypatch.chdir(tmp_path)
    code = compare.main([str(tmp_path / "a" / "20260101-000000-same"),
                         str(tmp_path / "b" / "20260101-000000-same"), "--web"])
    err = capsys.readouterr().err
    assert code == 2 and not served, err
    assert "'20260101-000000-same'" in err and err.count("\n") == 1
