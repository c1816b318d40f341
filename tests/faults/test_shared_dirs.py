"""Shared and hostile directories, the files tm writes and reads there (issue 29, items 3-5,
13 and 14).

Before: `.trainmeter/runs` owned by another user was used as is, and every file of a run was
written by path, so whoever could rename entries on the way could swap the live run directory
for a symlink and have tm (often root) write meta.json, summary.json and the passports into any
directory; the passports were written 0644 (the rest 0600); `tm report RUN` wrote through a
`report.html` symlink planted in the run directory; a backtick in a run name broke the
passport's heading; a full disk left a 0-byte `.passport.json.tmp` and no end in `meta.json`;
`tm check A --baseline B` passed when neither run had a number to compare.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from ..conftest import run_dirs, run_tm

SWAP = r"""
import os, sys, time
runs = os.path.join(".trainmeter", "runs")
# tm makes the run directory while the command boots (it starts the command first): wait for it
deadline = time.monotonic() + 60
while not (os.path.isdir(runs) and [d for d in os.listdir(runs) if not d.startswith(".")]):
    assert time.monotonic() < deadline, "tm never made its run directory"
    time.sleep(0.01)
[mine] = [d for d in os.listdir(runs) if not d.startswith(".")]
live = os.path.join(runs, mine)
os.rename(live, live + ".real")          # the run directory moved away ...
os.symlink(os.path.abspath("victim"), live)  # ... and a symlink to a victim in its place
print("swapped", flush=True)
"""


def _files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_a_run_directory_swapped_for_a_symlink_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "victim").mkdir()
    (tmp_path / "swap.py").write_text(SWAP)
    out = run_tm(["--no-web", "swap.py"], tmp_path)
    assert out.returncode == 0 and "swapped" in out.stdout, out.stderr[-2000:]
    assert _files(tmp_path / "victim") == []  # nothing written through the link
    [real] = [p for p in (tmp_path / ".trainmeter" / "runs").iterdir() if p.name.endswith(".real")]
    assert {"meta.json", "summary.json", "passport.md", "passport.json"} <= set(_files(real))


def test_a_trainmeter_symlink_where_others_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # a shared project directory, not sticky
    victim = tmp_path / "victim"
    victim.mkdir()
    (shared / ".trainmeter").symlink_to(victim)
    (shared / "t.py").write_text("print('trained')\n")
    out = run_tm(["--no-web", "t.py"], shared)
    assert out.returncode == 0 and "trained" in out.stdout
    assert "is a symlink" in out.stderr and "cannot write the run log" in out.stderr
    assert _files(victim) == []


def test_the_users_own_link_in_a_private_project_is_followed(tmp_path: Path) -> None:
    project, disk = tmp_path / "project", tmp_path / "bigdisk"
    project.mkdir(mode=0o700)
    disk.mkdir(mode=0o700)
    (project / ".trainmeter").symlink_to(disk)  # .trainmeter kept on a larger disk
    (project / "t.py").write_text("print('trained')\n")
    out = run_tm(["--no-web", "t.py"], project)
    assert out.returncode == 0, out.stderr[-1000:]
    assert "cannot write" not in out.stderr
    assert len(list((disk / "runs").iterdir())) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_runs_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / ".trainmeter" / "runs"
    runs.mkdir(parents=True)
    os.chown(runs, 65534, 65534)  # nobody's: a colleague's, in a shared project
    (tmp_path / "t.py").write_text("raise SystemExit(3)\n")
    out = run_tm(["--no-web", "t.py"], tmp_path)
    assert out.returncode == 3  # the run's status, whatever tm could not write
    assert "belongs to uid 65534" in out.stderr
    assert _files(runs) == []


def test_our_runs_directory_open_to_others_is_made_ours_alone(tmp_path: Path) -> None:
    runs = tmp_path / ".trainmeter" / "runs"
    runs.mkdir(parents=True)
    runs.chmod(0o777)
    (tmp_path / "t.py").write_text("print('x')\n")
    out = run_tm(["--no-web", "t.py"], tmp_path)
    assert out.returncode == 0
    assert "was writable by others; it is now yours alone" in out.stderr
    assert stat.S_IMODE(runs.stat().st_mode) & 0o022 == 0
    assert len(run_dirs(tmp_path)) == 1


# ---- one finished run, its files and the commands on it ------------------------------------


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("finished")
    (root / "t.py").write_text("print('done')\n")
    old = os.umask(0o022)  # the usual umask: files would be 0644 unless tm says otherwise
    try:
        out = run_tm(["--no-web", "--name", "my`run`x", "t.py"], root)
    finally:
        os.umask(old)
    assert out.returncode == 0, out.stderr[-1000:]
    return root, run_dirs(root)[-1]


def test_every_file_of_a_run_is_the_owners_alone(finished) -> None:
    _, run_dir = finished
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    for path in run_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_backtick_in_the_name_keeps_the_passport_heading(finished) -> None:
    _, run_dir = finished
    tokens = MarkdownIt("commonmark").parse((run_dir / "passport.md").read_text())
    heading = next(t for t in tokens if t.type == "inline")
    code = [c.content for c in heading.children if c.type == "code_inline"]
    assert code == ["my`run`x"]
    assert heading.content.startswith("Compute: training run ")


def test_report_does_not_write_through_a_planted_symlink(finished) -> None:
    root, run_dir = finished
    target = root / "precious.txt"
    target.write_text("keep me\n")
    (run_dir / "report.html").symlink_to(target)
    out = run_tm(["report", str(run_dir)], root)
    assert out.returncode == 0, out.stderr[-1000:]
    assert target.read_text() == "keep me\n"
    report = run_dir / "report.html"
    assert not report.is_symlink() and report.read_text().lower().startswith("<!doctype html>")
    assert stat.S_IMODE(report.stat().st_mode) == 0o600


def test_a_check_that_compared_nothing_fails(finished) -> None:
    root, run_dir = finished
    out = run_tm(["check", str(run_dir), "--baseline", str(run_dir), "--max-drop", "5%"], root)
    assert out.returncode == 1, out.stdout
    assert "nothing compared with the baseline" in out.stdout


def test_an_export_never_writes_through_a_link_planted_at_its_default_name(finished) -> None:
    """Second pass (issue 29): `tm export csv` writes `<run>.csv` in the working directory,
    a shared one perhaps; a symlink planted at that name had its target overwritten."""
    root, run_dir = finished
    target = root / "precious.csv"
    target.write_text("keep me\n")
    (root / f"{run_dir.name}.csv").symlink_to(target)
    out = run_tm(["export", "csv", str(run_dir)], root)
    assert out.returncode != 0 and "is a symlink: not written through" in out.stderr
    assert target.read_text() == "keep me\n"
    assert run_tm(["export", "csv", str(run_dir), "-o", str(root / "x.csv")], root).returncode == 0
