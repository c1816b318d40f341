"""Instructions the replay path's imports cost a fresh process, and what they load.

    PYTHONHASHSEED=0 .venv/bin/python benchmarks/import_instructions.py [--src DIR] [--steps 20000]

Each command runs whole under callgrind (the interpreter's start and exit included), minus a
bare `python -c pass`; the modules it loads beyond that bare interpreter are listed:

- `imports`: `from trainmeter.runlog.replay import replay` and
  `from trainmeter.views.history import History`, the replay row's first line;
- `row`: `run_all.py`'s replay row itself (`REPLAY_OURS`: those imports, the benchmark's log
  of `--steps` steps through `replay` with the history, ~2,000 samples), `--steps 0` skips it;
- `summary`: `tm summary --json` of a run holding a 3,000-step log (the CLI's start, its
  imports, the replay, the checkpoint it leaves: removed before each run);
- `export`: `tm export csv` of the same run;
- `view`: `tm view` of the same run, its server started and stopped at once.

`--src` counts another tree's `src/` instead (a before and after on one machine). Bytecode is
compiled first, as an install leaves it. Deterministic to a few thousand instructions with
`PYTHONHASHSEED=0`. A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_all  # noqa: E402 - the shared log writer and environment

IMPORTS = (
    "from trainmeter.runlog.replay import replay; from trainmeter.views.history import History"
)
#: prints the modules loaded at exit (after the command's own code), one line
LIST = "; import sys; print('MODULES', *sorted(sys.modules))"
#: `tm ARGS...`, its arguments after `-c CODE`
CLI = "import sys; sys.argv = ['tm', *sys.argv[1:]]; from trainmeter.cli.main import main; main()"
VIEW = (
    "import threading; from trainmeter.cli.view import main; stop = threading.Event(); "
    "stop.set(); main(['--port', '0'], stop)"
)


def count(code: list[str], env: dict[str, str], cwd: Path) -> int:
    """Instructions of the whole process running `code` (callgrind's total)."""
    out = cwd / "cg.out"
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", run_all.OUR_PY, *code],
        cwd=cwd, env=env, capture_output=True, text=True, check=True,
    )
    out.unlink(missing_ok=True)
    return next(int(line.split(":")[-1].strip().replace(",", ""))
                for line in proc.stderr.splitlines() if "Collected :" in line)


def modules(code: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    proc = subprocess.run([run_all.OUR_PY, "-c", code[1] + LIST, *code[2:]], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("MODULES"))
    return set(line.split()[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="count this trainmeter instead (another tree's src/)")
    parser.add_argument("--steps", type=int, default=20000, help="the row's log (0: no row)")
    args = parser.parse_args()
    if not run_all.have_callgrind():
        sys.exit("valgrind (callgrind) is not installed")
    src = Path(args.src).resolve() if args.src else Path(__file__).resolve().parents[1] / "src"
    subprocess.run([run_all.OUR_PY, "-m", "compileall", "-q", str(src / "trainmeter")],
                   check=False, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="tm-bench-imports-") as tmp:
        cwd = Path(tmp)
        env = run_all.clean_env(PYTHONHASHSEED="0", PYTHONPATH=str(src),
                                TRAINMETER_STATE_DIR=str(cwd / "state"))
        bare = count(["-c", "pass"], env, cwd)
        base = modules(["-c", "pass"], env, cwd)
        run = cwd / ".trainmeter" / "runs" / "bench-1"
        run.mkdir(parents=True)
        run_all.write_log(run / "events.jsonl", 3000)
        cases = [("imports", ["-c", IMPORTS], True)]
        if args.steps:
            log = cwd / "events.jsonl"
            run_all.write_log(log, args.steps)
            row = ["-c", run_all.REPLAY_OURS, str(log), "2000"]
            cases.append(("row", row, False))
        cases.append(("summary", ["-c", CLI, "summary", "--json"], True))
        cases.append(("export", ["-c", CLI, "export", "csv", "-o", str(cwd / "x.csv")], True))
        cases.append(("view", ["-c", VIEW], True))
        print(f"bare interpreter: {bare:,} instructions, {len(base)} modules")
        for name, code, listed in cases:
            ckpt = run / "events.jsonl.ckpt"
            ckpt.unlink(missing_ok=True)
            n = count(code, env, cwd)
            ckpt.unlink(missing_ok=True)
            print(f"{name}: {n - bare:,} instructions over the bare interpreter")
            if listed:
                loaded = sorted(modules(code, env, cwd) - base)
                ckpt.unlink(missing_ok=True)
                outside = [m for m in loaded if not m.startswith(("trainmeter", "msgspec"))]
                print(f"  {len(loaded)} modules: {' '.join(outside)} + trainmeter's, msgspec's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
