"""Every speed goal, ours beside the published peer (trainmeter 0.0.7), in one run, one table.

    .venv/bin/python benchmarks/run_all.py            # the table (about 10-15 minutes here)
    .venv/bin/python benchmarks/run_all.py --quick    # smaller sizes, a few minutes
    .venv/bin/python benchmarks/run_all.py --only startup,replay
    .venv/bin/python benchmarks/run_all.py --instructions   # adds callgrind counts (slow)

The peer is looked for in $TRAINMETER_PEER_VENV (default /tmp/peer); install it beside the same
torch with `python3 -m venv /tmp/peer && /tmp/peer/bin/pip install trainmeter==0.0.7
torch==2.13.0 numpy`. Without it, ours is measured alone and the ratio column says so.

How the numbers are made honest on a small, noisy machine (see benchmarks/README.md):
- ours and the peer do the same work on the same input (the same script, the same log records);
  where one side does more or less, the table's last column says so;
- runs are interleaved (ours, peer, ours, peer, ...), at least 5 pairs, and each cell is the
  median with the range of the pairs; the ratio is ours ÷ peer of the medians;
- torch is pinned to one thread, and every timed loop times itself, so start-up is left out;
- for the per-step cost, whose microseconds drown in scheduling noise, the hooks are also timed
  alone over a million calls, and with --instructions counted by valgrind's callgrind
  (instructions do not depend on what else the machine is doing).
A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent_overhead import Sink  # a datagram sink standing in for tm's ingest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUR_PY = sys.executable
OUR_TM = str(Path(sys.executable).parent / "tm")  # the console script, as users (and the peer's side) run it
PEER_VENV = Path(os.environ.get("TRAINMETER_PEER_VENV", "/tmp/peer"))
PEER_PY = PEER_VENV / "bin" / "python"
PEER_TM = PEER_VENV / "bin" / "tm"


def have_peer() -> bool:
    return PEER_PY.exists() and PEER_TM.exists()


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    env.pop("PYTHONPATH", None)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def our_bootstrap() -> str:
    import trainmeter

    return str(Path(trainmeter.__file__).parent / "agent" / "bootstrap")


def peer_bootstrap() -> str:
    out = subprocess.run(
        [str(PEER_PY), "-c", "import trainmeter,os;print(os.path.dirname(trainmeter.__file__))"],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=True,
    )
    return os.path.join(out.stdout.strip(), "agent", "bootstrap")


def compile_ours() -> None:
    """Byte-compile our package, as `pip install` did for the peer's.

    A source checkout run with PYTHONDONTWRITEBYTECODE (set here) would otherwise compile every
    module of `tm` and of the agent on every start, while the peer loads its cached bytecode:
    an unequal start-up, measured as ours."""
    import trainmeter

    subprocess.run(
        [OUR_PY, "-m", "compileall", "-q", str(Path(trainmeter.__file__).parent)],
        check=False, capture_output=True,
    )


# ---- the table ---------------------------------------------------------------------------------


class Row:
    """One line of the table: paired samples of ours and the peer's, and what they measure."""

    def __init__(self, what: str, unit: str, goal: str, lower_is_better: bool = True) -> None:
        self.what, self.unit, self.goal = what, unit, goal
        self.lower_is_better = lower_is_better
        self.ours: list[float] = []
        self.peer: list[float] = []
        self.note = ""

    @staticmethod
    def cell(values: list[float]) -> str:
        if not values:
            return "-"
        med = statistics.median(values)
        if len(values) == 1:
            return fmt(med)
        return f"{fmt(med)} [{fmt(min(values))}..{fmt(max(values))}]"

    def ratio(self) -> str:
        if not self.ours or not self.peer:
            return "no peer" if not self.peer else "-"
        o, p = statistics.median(self.ours), statistics.median(self.peer)
        if p == 0:
            return "-"
        return f"{o / p:.3g}"


def fmt(x: float) -> str:
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.3g}M"
    if a >= 1e4:
        return f"{x / 1e3:.3g}k"
    if a >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def print_table(rows: list[Row]) -> None:
    head = ("what", "unit", "0.0.7 (peer)", "ours", "ours ÷ peer", "goal", "notes")
    body = [
        (r.what, r.unit, Row.cell(r.peer), Row.cell(r.ours), r.ratio(), r.goal, r.note)
        for r in rows
    ]
    print()
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---" for _ in head) + " |")
    for line in body:
        print("| " + " | ".join(line) + " |")
    print()
    print("cells: median [min..max] over the interleaved pairs; ratio: ours ÷ peer of the medians")


# ---- a training loop timing itself ---------------------------------------------------------

LOOP = r"""
import json, sys, time
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
EMIT = sys.argv[2] == "emit"
if EMIT:
    from trainmeter import emit
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 64)
y = torch.randn(16, 64)
def block(n):
    c0 = time.process_time(); t0 = time.perf_counter()
    for _ in range(n):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if EMIT:
            emit(train_loss=loss.item())
    return (time.perf_counter() - t0) / n * 1e6, (time.process_time() - c0) / n * 1e6
steps = int(sys.argv[1])
block(300)  # warm-up, and past any counted step
per = max(steps // 8, 1)
blocks = [block(per) for _ in range(8)]
print("BENCH " + json.dumps({"wall": sorted(b[0] for b in blocks)[len(blocks) // 2],
                             "cpu": sorted(b[1] for b in blocks)[len(blocks) // 2]}), flush=True)
"""


def run_bench(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float] | None:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    print(f"  ! {' '.join(argv[:4])} failed ({proc.returncode}): {proc.stderr[-300:]}", file=sys.stderr)
    return None


def count_key(cwd: Path, key: str) -> int:
    runs = sorted((cwd / ".trainmeter" / "runs").iterdir())
    text = (runs[-1] / "events.jsonl").read_text(errors="replace")
    return text.count(f'"key":"{key}"') + text.count(f'"key": "{key}"')


def log_size(cwd: Path) -> tuple[int, int]:
    """(records, bytes) of the latest run's log under `cwd`."""
    runs = sorted((cwd / ".trainmeter" / "runs").iterdir())
    data = (runs[-1] / "events.jsonl").read_bytes()
    return data.count(b"\n"), len(data)


def bench_step_and_emit(pairs: int, steps: int, rows: list[Row]) -> None:
    """The agent's cost per optimizer step, and emit() every step, under the full `tm`."""
    step = Row("agent cost per optimizer step", "µs/step", "≤ 0.33")
    step_cpu = Row("agent cost per optimizer step, CPU", "µs CPU/step", "≤ 0.33")
    emit = Row("emit() every step", "µs/step", "≤ 0.05")
    emit_cpu = Row("emit() every step, CPU", "µs CPU/step", "≤ 0.05")
    kept = {"ours": [], "peer": []}
    log_records = Row("log: records per optimizer step (the emit loop)", "records/step", "fewer")
    log_bytes = Row("log: bytes per optimizer step (the emit loop)", "B/step", "fewer")
    with tempfile.TemporaryDirectory(prefix="tm-bench-loop-") as tmp:
        cwd = Path(tmp)
        (cwd / "loop.py").write_text(LOOP)
        n = str(steps)
        sides = {"ours": ([OUR_PY, "-m", "trainmeter"], OUR_PY)}
        if have_peer():
            sides["peer"] = ([str(PEER_TM)], str(PEER_PY))
        for _ in range(pairs):
            for side, (tm, py) in sides.items():
                plain = run_bench([py, "loop.py", n, "none"], cwd, clean_env())
                under = run_bench([*tm, "-q", "--no-web", "--", py, "loop.py", n, "none"], cwd, clean_env())
                shutil.rmtree(cwd / ".trainmeter", ignore_errors=True)  # count this run's log only
                with_emit = run_bench(
                    [*tm, "-q", "--no-web", "--", py, "loop.py", n, "emit"], cwd, clean_env()
                )
                if plain and under and with_emit:
                    getattr(step, side).append(under["wall"] - plain["wall"])
                    getattr(emit, side).append(with_emit["wall"] - under["wall"])
                    getattr(step_cpu, side).append(under["cpu"] - plain["cpu"])
                    getattr(emit_cpu, side).append(with_emit["cpu"] - under["cpu"])
                    total = 300 + 8 * max(steps // 8, 1)
                    kept[side].append(count_key(cwd, "train_loss") / total)
                    n_records, n_bytes = log_size(cwd)
                    getattr(log_records, side).append(n_records / total)
                    getattr(log_bytes, side).append(n_bytes / total)
    step.note = "tm minus plain python, the loop's own timer (start-up excluded)"
    step_cpu.note = (
        "the same runs, the training process's CPU time (all its threads: the agent's sender"
        " included), which the other process on the 2 cores disturbs less than the wall clock"
    )
    emit.note = "tm with emit minus tm without; values kept: " + ", ".join(
        f"{s} {min(v) * 100:.1f}%" for s, v in kept.items() if v
    )
    emit_cpu.note = "the same runs, the training process's CPU time (all its threads)"
    log_records.note = log_bytes.note = (
        "events.jsonl of the emit run (the same script and steps on both sides; GPU/host/node"
        " samples and the run's own records included) ÷ optimizer steps"
    )
    rows += [step, step_cpu, emit, emit_cpu, log_records, log_bytes]


# Each side's whole per-step mechanism, torch's own dispatch of it included: the root called
# through torch (a module whose forward is trivial) and the optimizer step post-hook, a million
# times, minus the same calls without the agent. The hook of the optimizer is called directly on
# both sides: torch's loop over step hooks costs both the same.
HOOKS_COMMON = r"""
import json, time, torch
from torch import nn
class Root(nn.Module):
    def __init__(self):
        super().__init__(); self.w = nn.Parameter(torch.zeros(1))
    def forward(self, ids):
        return ids
model = Root()
opt = torch.optim.SGD(model.parameters(), lr=0.0)  # what torch hands each side's hook
ids = torch.zeros(4, 8, dtype=torch.long)
N = 1_000_000
def per_call(after):
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(N):
            model(ids)
            after(opt, (), {})
        best.append((time.perf_counter() - t0) / N * 1e6)
    return min(best)
def nothing(optimizer, args, kwargs):
    return None
bare = per_call(nothing)
"""

HOOKS_OURS = HOOKS_COMMON + r"""
from trainmeter.agent.probes import root_finder, steps
from trainmeter.agent.probes.step_state import state
steps.attach(torch)
root_finder.adopt(model)  # what discovery does at the first training forward
root_finder.remove(state.root_hook[1:])  # the first call's one-off hook
state.root_hook[1:] = []
model(ids); steps._after_step(opt, (), {})  # the first step: the dtype of the tokens is seen
assert steps.pending_micro() == 0 and steps.totals().steps == 1
with_agent = per_call(steps._after_step)
assert steps.totals().micro == 5 * N + 1
print("BENCH " + json.dumps({"us": with_agent - bare}))
"""

HOOKS_PEER = HOOKS_COMMON + r"""
import os
from trainmeter.agent import core, sender
agent = core.Agent(sender.Sender(os.environ["TRAINMETER_SOCK"]))
agent.torch = torch
agent._root = model
model.register_forward_pre_hook(agent._on_root_forward, with_kwargs=True)  # as its _found_root
agent._forward_tracking = True
agent._step_index = 10
agent._count_state = "done"
with_agent = per_call(agent._on_optimizer_step)
print("BENCH " + json.dumps({"us": with_agent - bare}))
"""


def bench_hooks(pairs: int, rows: list[Row]) -> None:
    """Each side's per-step hooks called directly a million times: what the agent itself costs."""
    row = Row("agent per-step mechanism alone (root call + optimizer hook)", "µs/step", "≤ 0.25")
    with tempfile.TemporaryDirectory(prefix="tm-bench-hooks-") as tmp:
        cwd = Path(tmp)
        sink = Sink()
        try:
            for _ in range(pairs):
                ours = run_bench(
                    [OUR_PY, "-c", HOOKS_OURS], cwd, clean_env(TRAINMETER_SOCKET=sink.path)
                )
                if ours:
                    row.ours.append(ours["us"])
                if have_peer():
                    peer = run_bench(
                        [str(PEER_PY), "-c", HOOKS_PEER], cwd, clean_env(TRAINMETER_SOCK=sink.path)
                    )
                    if peer:
                        row.peer.append(peer["us"])
        finally:
            sink.close()
    row.note = (
        "1M root calls through torch plus the step hook, minus the same without the agent, best of"
        " 5 per run; torch's dispatch of each side's mechanism included; steady where the loop is"
        " noisy"
    )
    rows.append(row)


# emit() alone, in one process with its sender live: the CPU of the whole process (the loop's
# thread and the sender's) while a million values go out, until the last is shipped, per value.
EMIT_ALONE = r"""
import json, os, time
from trainmeter import emit
N = int(os.environ["BENCH_N"])
emit(train_loss=0.0)  # the first value starts the sender
time.sleep(0.3)
c0, t0 = time.process_time(), time.perf_counter()
for _ in range(N):
    emit(train_loss=0.5)
wall = time.perf_counter() - t0
time.sleep(1.0)  # the sender ships the rest; its CPU counts, the sleep does not
cpu = time.process_time() - c0
print("BENCH " + json.dumps({"cpu": cpu / N * 1e6, "wall": wall / N * 1e6}))
"""


class CountingSink(Sink):
    """A sink that also counts the values of one key it received."""

    def __init__(self, key: bytes) -> None:
        self.key, self.count = key, 0
        super().__init__()

    def _read(self) -> None:
        try:  # ours ships values as the ring holds them: formatted here, as tm does
            from trainmeter.supervisor.values import ValueLines, is_values

            lines = ValueLines()
        except ImportError:
            lines = None
        while not self.stop.is_set():
            try:
                data = self.sock.recv(1 << 20)
            except (TimeoutError, OSError):
                continue
            if lines is not None and is_values(data):
                data = b"\n".join(lines.lines(data))
            self.count += data.count(self.key)


def bench_emit_alone(pairs: int, n: int, rows: list[Row]) -> None:
    """Each side's emit() called n times with its sender live: CPU per value, values received."""
    row = Row("emit() alone, sender included", "µs CPU/value", "≤ 0.05")
    kept: dict[str, list[float]] = {"ours": [], "peer": []}
    with tempfile.TemporaryDirectory(prefix="tm-bench-emit-") as tmp:
        cwd = Path(tmp)
        for _ in range(pairs):
            sides = [("ours", OUR_PY, "TRAINMETER_SOCKET")]
            if have_peer():
                sides.append(("peer", str(PEER_PY), "TRAINMETER_SOCK"))
            for side, py, env_name in sides:
                sink = CountingSink(b"train_loss")
                try:
                    env = clean_env(BENCH_N=str(n), **{env_name: sink.path})
                    out = run_bench([py, "-c", EMIT_ALONE], cwd, env)
                    time.sleep(0.3)
                finally:
                    sink.close()
                if out:
                    getattr(row, side).append(out["cpu"])
                    kept[side].append(sink.count / (n + 1))
    row.note = (
        f"{n:,} calls of `emit(train_loss=...)` in one process, the CPU of all its threads until"
        " the last value is shipped, into a sink that reads and counts (no `tm`); values received: "
        + ", ".join(f"{s} {min(v) * 100:.1f}%" for s, v in kept.items() if v)
    )
    rows.append(row)


CG_LOOP = r"""
import sys, torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0); torch.set_num_threads(1)
if "--idle-thread" in sys.argv:  # what every CUDA process has: a thread beside the loop
    import threading
    threading.Thread(target=threading.Event().wait, daemon=True).start()
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 64); y = torch.randn(16, 64)
def step():
    loss = F.mse_loss(model(x), y)
    loss.backward(); opt.step(); opt.zero_grad()
for _ in range(20):  # the first steps' one-off work (root, shape, FLOPs, ...) is not counted
    step()
print("READY", flush=True)
sys.stdin.readline()  # the driver has turned callgrind's counting on
for _ in range(int(sys.argv[1])):
    step()
print("END", flush=True)
sys.stdin.readline()  # and off: the exit is not counted
"""


def have_callgrind() -> bool:
    """valgrind and callgrind_control both installed: every instruction count needs them."""
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def callgrind_instructions(
    argv: list[str], env: dict[str, str], cwd: Path, out: Path, keep: Path | None = None
) -> tuple[int, int] | None:
    """(instructions of the whole process, of its main thread) between the script's READY and
    END lines. Callgrind runs the rest (torch's import: ten billion instructions, the exit)
    uninstrumented; `callgrind_control -i on/off` turns counting on and off. With `keep`, the
    callgrind files are copied there (per function: `callgrind_annotate`)."""
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
         f"--callgrind-out-file={out}", *argv],
        cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    for word, switch in (("READY", "on"), ("END", "off")):
        line = proc.stdout.readline()
        if not line.startswith(word):
            proc.kill()
            print(f"  ! callgrind: no {word} ({line!r})", file=sys.stderr)
            return None
        subprocess.run(["callgrind_control", "-i", switch, str(proc.pid)], capture_output=True, check=False)
        proc.stdin.write("go\n")
        proc.stdin.flush()
    _, err = proc.communicate(timeout=3600)
    total = next((int(line.split(":")[-1].strip()) for line in err.splitlines() if "Collected :" in line), None)
    main = None
    for path in cwd.glob(out.name + "*"):
        text = path.read_text(errors="replace")
        thread = next((line.split()[1] for line in text.splitlines() if line.startswith("thread:")), "")
        # "totals:" is the part's count; "summary:" is 0 when counting starts switched off
        summary = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("totals:")), 0)
        if thread == "1":
            main = summary
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, keep / path.name)
        path.unlink()
    if total is None or main is None:
        print(f"  ! callgrind failed: {err[-300:]}", file=sys.stderr)
        return None
    print(f"  callgrind {' '.join(argv[1:])} ({out.name}): {total} instructions, {main} in the main thread",
          file=sys.stderr, flush=True)
    return total, main


def bench_instructions(rows: list[Row], steps: int = 1000) -> None:
    """Instructions the agent adds per optimizer step, counted by callgrind over `steps` steps
    after 20 uncounted: (with the agent - without) / steps; for the
    whole process and for its training thread alone (the sender thread's work runs on its own
    clock, 20 times a second, which callgrind's fifty-fold slowdown turns into many ticks a
    step: that part is not a count per step, and it grows with the machine's load)."""
    if not have_callgrind():
        print("  ! valgrind not installed: no instruction counts", file=sys.stderr)
        return
    row = Row("agent instructions per optimizer step, training thread (callgrind)", "instr/step", "≤ 0.15")
    whole = Row("the same, the whole process (the sender's ticks included)", "instr/step", "≤ 0.15")
    beside = Row(
        "the training thread, an idle thread beside the loop on both sides", "instr/step", "—"
    )
    with tempfile.TemporaryDirectory(prefix="tm-bench-cg-") as tmp:
        cwd = Path(tmp)
        (cwd / "loop.py").write_text(CG_LOOP)
        sink = Sink()
        try:
            sides = {"ours": (OUR_PY, {"PYTHONPATH": our_bootstrap(), "TRAINMETER_SOCKET": sink.path})}
            if have_peer():
                sides["peer"] = (
                    str(PEER_PY),
                    {"PYTHONPATH": peer_bootstrap(), "TRAINMETER_SOCK": sink.path},
                )
            for side, (py, agent_env) in sides.items():
                for extra, targets in (([], ((1, row), (0, whole))), (["--idle-thread"], ((1, beside),))):
                    counts = {}
                    # one hash seed on every run: str hashes (dict and set layouts in torch's
                    # Python and ours) otherwise move a count by thousands a step run to run
                    seed = {"PYTHONHASHSEED": "0"}
                    for label, env in (
                        ("plain", clean_env(**seed)), ("agent", clean_env(**agent_env, **seed))
                    ):
                        counts[label] = callgrind_instructions(
                            [py, "loop.py", str(steps), *extra], env, cwd,
                            cwd / f"cg.{side}.{label}{'.t' if extra else ''}",
                        )
                    if None in counts.values():
                        continue
                    for i, target in targets:
                        getattr(target, side).append((counts["agent"][i] - counts["plain"][i]) / steps)
        finally:
            sink.close()
    row.note = (
        f"one count per side (deterministic), {steps} steps after 20 uncounted; the"
        " training thread: the steady step's own cost (the peer flushes on it every 50 ms)"
    )
    whole.note = (
        "every thread: ours adds the sender thread's ticks (20 a second of callgrind's slowed"
        " clock), so this count grows with the machine's load"
    )
    beside.note = (
        "the same loop with one idle Python thread started before it, with and without each"
        " agent: each agent's own work where the process has a second thread anyway (a CUDA"
        " process, a DataLoader with pinned memory, torch's intra-op pool)"
    )
    rows += [row, whole, beside]


# ---- start-up -------------------------------------------------------------------------------------


def bench_startup(pairs: int, rows: list[Row]) -> None:
    row = Row("tm start-up (empty script)", "s added", "≤ 0.25")
    with tempfile.TemporaryDirectory(prefix="tm-bench-start-") as tmp:
        cwd = Path(tmp)
        (cwd / "empty.py").write_text("")

        def wall(argv: list[str]) -> float:
            best = []
            for _ in range(3):
                t0 = time.perf_counter()
                subprocess.run(argv, cwd=cwd, env=clean_env(), check=True, capture_output=True)
                best.append(time.perf_counter() - t0)
            return min(best)

        for _ in range(pairs):
            row.ours.append(
                wall([OUR_TM, "-q", "--no-web", "empty.py"])
                - wall([OUR_PY, "empty.py"])
            )
            if have_peer():
                row.peer.append(
                    wall([str(PEER_TM), "-q", "--no-web", "empty.py"]) - wall([str(PEER_PY), "empty.py"])
                )
    row.note = "`tm -q --no-web empty.py` minus `python empty.py`, best of 3 per pair"
    rows.append(row)


# The end of a run: the child's last line, then the agent's last flush (its exit handlers), then
# an immediate exit, so what follows is the supervisor's shutdown alone (its grace for late
# datagrams, the rings, run.end, the summary) and not the interpreter's teardown.
END = r"""
import atexit, os, sys, time
atexit._run_exitfuncs()  # the agent's last flush, as at any exit
print("LAST", time.monotonic(), flush=True)
os._exit(0)
"""


def bench_end(pairs: int, rows: list[Row]) -> None:
    """Seconds from the child's exit to `tm`'s: nothing is left to ship, so nothing to wait for."""
    row = Row("tm's end after the child's exit", "s", "≤ 0.2 s")
    with tempfile.TemporaryDirectory(prefix="tm-bench-end-") as tmp:
        cwd = Path(tmp)
        (cwd / "end.py").write_text(END)

        def after(argv: list[str]) -> float:
            best = []
            for _ in range(3):
                proc = subprocess.Popen(argv, cwd=cwd, env=clean_env(), stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
                last = None
                for line in proc.stdout or ():
                    if line.startswith("LAST "):
                        last = float(line.split()[1])
                proc.wait()
                if last is not None:
                    best.append(time.monotonic() - last)
            return min(best) if best else float("nan")

        for _ in range(pairs):
            row.ours.append(after([OUR_TM, "-q", "--no-web", OUR_PY, "end.py"]))
            if have_peer():
                row.peer.append(after([str(PEER_TM), "-q", "--no-web", str(PEER_PY), "end.py"]))
    row.note = (
        "`tm -q --no-web python end.py`: the time from the child's last line (after its exit"
        " handlers, the agent's last flush) to tm's exit, best of 3 per pair"
    )
    rows.append(row)


# ---- replay -----------------------------------------------------------------------------------


def write_log(path: Path, steps: int, step_s: float = 0.1) -> int:
    """A synthetic run log both sides read: steps, loss, data phases, 1 Hz GPU/host/node samples."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:

        def put(t: float, src: str, kind: str, d: dict, rank: int | None = 0) -> None:
            nonlocal n
            rec = {"v": 1, "t": round(t, 6), "src": src, "rank": rank, "pid": 100, "kind": kind, "d": d}
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1

        put(0.0, "tm", "run.start", {"argv": ["python", "train.py"], "name": "bench", "declared": {}}, None)
        put(0.5, "agent", "hello", {"world_size": 1, "local_rank": 0, "rank": 0, "probes": ["steps", "tokens", "dataloader"]})
        facts = {"n_params": 124_000_000, "n_embedding_params": 38_000_000, "n_layers": 12, "d_model": 768, "seq_len": 1024}
        for key, value in facts.items():
            put(0.6, "agent", "fact", {"key": key, "value": value, "source": "detected"})
        next_sample = 1.0
        energy = 0.0
        for i in range(1, steps + 1):
            t = 1.0 + i * step_s
            put(t - 0.01, "agent", "phase", {"name": "data", "s": 0.01, "n": 1})
            put(t, "agent", "step", {"k": 1, "tokens": 8192, "n": i, "micro": 1})
            put(t, "agent", "metric", {"key": "train_loss", "value": 3.0 / (1 + i / 1000), "via": "emit", "step": i})
            while t >= next_sample:
                energy += 700.0
                row = {
                    "index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3", "gpu_util": 0.98,
                    "sm_active": 0.9, "tensor_active": 0.6, "dram_active": 0.4, "sm_clock_mhz": 1980,
                    "max_sm_clock_mhz": 1980, "window_s": 1.0, "energy_j": energy, "power_w": 700.0,
                }
                put(next_sample, "tm", "sample.gpu", {"gpus": [row], "selected_by": "all"}, None)
                put(next_sample, "tm", "sample.host", {"procs": 3, "cpu_s": next_sample, "rss_kb": 1_000_000}, None)
                put(next_sample, "tm", "sample.node", {"cpu": {"user": 0.5, "system": 0.1, "idle": 0.4}, "cores": 16, "load": [1.0, 1.0, 1.0]}, None)
                next_sample += 1.0
        put(1.0 + steps * step_s + 0.5, "tm", "run.end", {"exit_status": 0, "elapsed_s": 1.0 + steps * step_s}, None)
    return n


REPLAY_OURS = r"""
import json, resource, sys, time
from pathlib import Path
path, snapshots = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
# the path `tm summary` and `tm view` take: runlog.replay.replay, with the dashboard's
# bounded history as an observer (every record, and ~`snapshots` sampled snapshots)
from trainmeter.runlog.replay import replay
try:
    from trainmeter.views.history import History
    history = History()
except ImportError:
    history = None
kw = {"resume": False} if "resume" in replay.__code__.co_varnames else {}  # a full replay, every time
result = replay(Path(path), observers=[history] if history is not None else [],
                max_snapshots=snapshots, **kw)
dt = time.perf_counter() - t0
n = result.records
points = sum(s.points for s in history.series.values()) if history is not None else 0
print("BENCH " + json.dumps({"rps": n / dt, "records": n, "s": dt,
      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      "history": history is not None, "points": points,
      "steps": result.snapshot.get("steps")}))
"""

REPLAY_PEER = r"""
import json, resource, sys, time
path, snapshots, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
from trainmeter.engine import Engine
from trainmeter.records import decode
from trainmeter.timeline import Timeline
engine, timeline = Engine(), Timeline()
every = max(total // snapshots, 1)
n = 0
t_start = None
with open(path, encoding="utf-8") as fh:
    for line in fh:
        try:
            rec = decode(line)
        except ValueError:
            continue
        n += 1
        if t_start is None:
            t_start = rec["t"]
        engine.feed(rec)
        timeline.feed(rec, rec["t"] - t_start, engine.position())
        if n % every == 0:
            timeline.add_snapshot(engine.snapshot(rec["t"]), rec["t"] - t_start, engine.position())
snap = engine.snapshot()
dt = time.perf_counter() - t0
print("BENCH " + json.dumps({"rps": n / dt, "records": n, "s": dt,
      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "steps": snap.get("steps")}))
"""


def bench_replay(pairs: int, steps: int, mem_steps: list[int], peer_mem_steps: int, rows: list[Row]) -> None:
    speed = Row(f"replay, {steps // 1000}k-step log (decode, engine, history, ~2000 snapshots)", "records/s", "≥ 10", lower_is_better=False)
    with tempfile.TemporaryDirectory(prefix="tm-bench-replay-") as tmp:
        log = Path(tmp) / "events.jsonl"
        total = write_log(log, steps)
        history = None
        for _ in range(pairs):
            ours = run_bench([OUR_PY, "-c", REPLAY_OURS, str(log), "2000", str(total)], Path(tmp), clean_env())
            if ours:
                speed.ours.append(ours["rps"])
                history = ours["history"]
            if have_peer():
                peer = run_bench([str(PEER_PY), "-c", REPLAY_PEER, str(log), "2000", str(total)], Path(tmp), clean_env())
                if peer:
                    speed.peer.append(peer["rps"])
        speed.note = f"{total} records; peer: its engine + timeline streamed" + (
            "" if history else "; ours WITHOUT history (views.history missing)"
        )
        rows.append(speed)
        log.unlink()
        for n_steps in mem_steps:
            mem = Row(f"replay memory, {n_steps / 1e6:g}M steps", "MB peak RSS", "flat, < 150 MB")
            log = Path(tmp) / f"events-{n_steps}.jsonl"
            total = write_log(log, n_steps)
            size_mb = log.stat().st_size / 1e6
            ours = run_bench([OUR_PY, "-c", REPLAY_OURS, str(log), "2000", str(total)], Path(tmp), clean_env())
            if ours:
                mem.ours.append(ours["rss_mb"])
                mem.note = f"{total / 1e6:.2f}M records, {size_mb:.0f} MB log, ours {ours['s']:.0f} s"
            if have_peer() and n_steps <= peer_mem_steps:
                peer = run_bench([str(PEER_PY), "-c", REPLAY_PEER, str(log), "2000", str(total)], Path(tmp), clean_env())
                if peer:
                    mem.peer.append(peer["rss_mb"])
            rows.append(mem)
            log.unlink()


# ---- reopening a finished run ----------------------------------------------------------------


def bench_reopen(pairs: int, steps: int, rows: list[Row], peer: bool = True) -> None:
    """`tm passport RUN` of a finished run's directory (the peer has no `tm summary`; both
    rebuild the passport by replaying the log): the first look, then a second look.

    Ours keeps a checkpoint of the replay's state beside the log, so a second look replays
    nothing; the peer replays the whole log each time."""
    size = f"{steps / 1e6:g}M" if steps >= 1_000_000 else f"{steps // 1000}k"
    first = Row(f"reopening a finished run, {size} steps: first `tm passport`", "s", "-")
    again = Row(f"reopening a finished run, {size} steps: second `tm passport`", "s", "< 1 s")
    with tempfile.TemporaryDirectory(prefix="tm-bench-reopen-") as tmp:
        run_dir = Path(tmp) / "runs" / "bench-run"
        run_dir.mkdir(parents=True)
        log = run_dir / "events.jsonl"
        total = write_log(log, steps)
        sides = {"ours": [OUR_TM]}
        if peer and have_peer():
            sides["peer"] = [str(PEER_TM)]

        def look(tm: list[str]) -> float:
            t0 = time.perf_counter()
            proc = subprocess.run([*tm, "passport", str(run_dir)], cwd=tmp, env=clean_env(),
                                  capture_output=True, text=True, timeout=1800)
            if proc.returncode:
                print(f"  ! {tm[0]} passport: exit {proc.returncode}: {proc.stderr[-300:]}", file=sys.stderr)
            return time.perf_counter() - t0

        for _ in range(pairs):
            for side, tm in sides.items():
                for derived in run_dir.glob("events.jsonl.*"):
                    derived.unlink()  # the previous pair's checkpoint: start cold
                getattr(first, side).append(look(tm))
                getattr(again, side).append(look(tm))
        first.note = (
            f"{total} records, {log.stat().st_size / 1e6:.0f} MB; start-up included"
            + ("" if "peer" in sides else "; ours alone (the peer would take minutes)")
        )
    again.note = "the same command again: ours resumes from the checkpoint beside the log"
    rows += [first, again]


# ---- ingest -------------------------------------------------------------------------------------

BLAST = r"""
import json, os, socket, sys, time
rate, seconds, env = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
path = os.environ[env]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
pid = os.getpid()
n = int(rate * seconds)
sent = dropped = 0
t0 = time.perf_counter()
for i in range(n):
    due = t0 + i / rate
    while time.perf_counter() < due:
        pass
    rec = {"v": 1, "t": time.monotonic(), "src": "agent", "rank": 0, "pid": pid, "kind": "metric",
           "d": {"key": "blast", "value": float(i), "via": "emit", "step": i}}
    try:
        s.sendto(json.dumps(rec, separators=(",", ":")).encode(), socket.MSG_DONTWAIT, path)
        sent += 1
    except (BlockingIOError, OSError):
        dropped += 1
print("BLAST", sent, dropped, flush=True)
"""


def bench_ingest(pairs: int, rate: float, seconds: float, rows: list[Row]) -> None:
    """A sender outside any agent blasting one-record datagrams at `rate`/s into a live `tm`."""
    row = Row(f"ingest at {rate / 1000:g}k records/s for {seconds:g} s", "% kept", "100%", lower_is_better=False)
    counted = Row("ingest: kept, or refused and counted by the sender", "% of sent", "100%", lower_is_better=False)
    with tempfile.TemporaryDirectory(prefix="tm-bench-ingest-") as tmp:
        cwd = Path(tmp)
        (cwd / "blast.py").write_text(BLAST)
        sides = {"ours": ([OUR_PY, "-m", "trainmeter"], OUR_PY, "TRAINMETER_SOCKET")}
        if have_peer():
            sides["peer"] = ([str(PEER_TM)], str(PEER_PY), "TRAINMETER_SOCK")
        for _ in range(pairs):
            for side, (tm, py, env_name) in sides.items():
                shutil.rmtree(cwd / ".trainmeter", ignore_errors=True)
                proc = subprocess.run(
                    [*tm, "-q", "--no-web", "--no-agent", "--", py, "blast.py", str(rate), str(seconds), env_name],
                    cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=600,
                )
                sent = int(rate * seconds)
                got = count_key(cwd, "blast")
                getattr(row, side).append(100.0 * got / sent)
                refused = [line.split() for line in proc.stdout.splitlines() if line.startswith("BLAST ")]
                if refused:
                    getattr(counted, side).append(100.0 * (got + int(refused[-1][2])) / sent)
                if proc.returncode:
                    print(f"  ! ingest {side}: exit {proc.returncode}", file=sys.stderr)
    row.note = "records in events.jsonl ÷ records sent (sender never blocks)"
    counted.note = (
        "(records in the log + datagrams the socket refused, counted by the sender) ÷ sent:"
        " 100% means no record was lost without a count"
    )
    rows += [row, counted]


# ---- main -------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, a few minutes")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs per cell (>= 5)")
    parser.add_argument("--only", default="", help="comma list: startup,end,step,hooks,emit,replay,reopen,ingest,history")
    parser.add_argument("--instructions", action="store_true", help="callgrind counts (slow)")
    parser.add_argument("--mem-steps", default="1000000,5000000", help="replay memory sizes (0: none)")
    args = parser.parse_args()
    only = {w for w in args.only.split(",") if w}
    want: Callable[[str], bool] = lambda name: not only or name in only  # noqa: E731
    if not have_peer():
        print(f"no peer at {PEER_VENV}: ours alone (see --help)", file=sys.stderr)
    compile_ours()
    rows: list[Row] = []
    pairs = args.pairs
    t0 = time.perf_counter()
    if want("startup"):
        bench_startup(pairs, rows)
    if want("end"):
        bench_end(pairs, rows)
    if want("step"):
        bench_step_and_emit(pairs, 4000 if args.quick else 20000, rows)
    if want("hooks"):
        bench_hooks(pairs, rows)
    if want("emit"):
        bench_emit_alone(pairs, 100_000 if args.quick else 1_000_000, rows)
    if args.instructions:
        bench_instructions(rows)
    if want("replay"):
        if args.quick:
            bench_replay(pairs, 20_000, [100_000], 100_000, rows)
        else:
            mem = [n for x in args.mem_steps.split(",") if x and (n := int(float(x))) > 0]
            bench_replay(pairs, 200_000, mem, 1_000_000, rows)
    if want("reopen"):
        bench_reopen(pairs, 20_000 if args.quick else 200_000, rows)
        if not args.quick:
            bench_reopen(1, 1_000_000, rows, peer=False)
    if want("ingest"):
        bench_ingest(pairs, 20_000.0, 2.0 if args.quick else 5.0, rows)
    if want("history"):
        script = HERE / "history_10m.py"
        if script.exists():
            # history_10m.py has no --quick: a quick run stops it at a million steps
            subprocess.run([OUR_PY, str(script), *(["--steps", "1000000"] if args.quick else [])], check=False)
    print_table(rows)
    print(f"({time.perf_counter() - t0:.0f} s; python {sys.version.split()[0]}, "
          f"maxrss of this driver {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
