"""emit() cost per call and values lost at the socket, ours beside the peer's, in one run.

    python benchmarks/emit_and_socket.py [--values 20000]

A loop calls `emit(train_loss=i)` as fast as it can (the worst case for the socket), then the
run's `events.jsonl` is counted: every value should be there. Prints µs per call, values kept,
and the ratios ours/peer.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import textwrap
from pathlib import Path

from _peer import clean_env, latest_events, ours, peer

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from trainmeter import emit
    n = int(sys.argv[1])
    t0 = time.perf_counter()
    for i in range(n):
        emit(train_loss=float(i))
    dt = time.perf_counter() - t0
    print(f"US_PER_CALL {dt / n * 1e6:.3f}")
    """
)


def measure(tm: list[str], values: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "emit_loop.py").write_text(SCRIPT)
        out = subprocess.run(
            [*tm, "-q", "emit_loop.py", str(values)],
            cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=600,
        )
        if out.returncode != 0:
            raise SystemExit(f"{tm[0]} failed: {out.stderr[-2000:]}")
        us = float(out.stdout.split("US_PER_CALL")[1].split()[0])
        kept = sum(
            1
            for r in latest_events(cwd)
            if r.get("kind") == "metric" and (r.get("d") or {}).get("key") == "train_loss"
        )
        return us, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=20000)
    args = parser.parse_args()
    rows = [("ours", measure(ours(), args.values))]
    peer_tm = peer()
    if peer_tm:
        rows.append(("peer 0.0.7", measure(peer_tm, args.values)))
    print(f"{'':12} {'us/call':>10} {'kept':>10} {'lost':>8}")
    for name, (us, kept) in rows:
        print(f"{name:12} {us:10.2f} {kept:10d} {args.values - kept:8d}")
    if len(rows) == 2:
        (_, (us_o, kept_o)), (_, (us_p, kept_p)) = rows
        print(f"ratio ours/peer: cost per call {us_o / us_p:.3f}, values kept {kept_o}/{kept_p}")
    else:
        print("peer not installed: see benchmarks/_peer.py")


if __name__ == "__main__":
    main()
