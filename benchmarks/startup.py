"""tm's own fixed cost: an empty script under tm minus the same script under plain Python.

    python benchmarks/startup.py [--repeat 7]

Prints the median added seconds for ours and for the peer (trainmeter 0.0.7), and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _peer import clean_env, ours, peer, peer_python


def median_wall(cmd: list[str], cwd: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=clean_env(), check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "empty.py").write_text("")
        rows = []
        base = median_wall([sys.executable, "empty.py"], cwd, args.repeat)
        rows.append(("ours", median_wall([*ours(), "-q", "empty.py"], cwd, args.repeat) - base))
        peer_tm, peer_py = peer(), peer_python()
        if peer_tm and peer_py:
            peer_base = median_wall([peer_py, "empty.py"], cwd, args.repeat)
            rows.append(
                (
                    "peer 0.0.7",
                    median_wall([*peer_tm, "-q", "empty.py"], cwd, args.repeat) - peer_base,
                )
            )
    for name, added in rows:
        print(f"{name:12} adds {added:.3f} s to an empty script")
    if len(rows) == 2:
        print(f"ratio ours/peer: {rows[0][1] / rows[1][1]:.3f}")


if __name__ == "__main__":
    main()
