"""The README's example, started with secrets on its command line as a real launcher might.

    python with_secret.py --hf-token TOKEN --api-key=KEY [tiny_gpt.py args]

The secret flags are taken off (as a script that reads them would) and the rest goes to
examples/tiny_gpt.py, run as `__main__`.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny_gpt.py"


def main() -> None:
    rest: list[str] = []
    args = iter(sys.argv[1:])
    for arg in args:
        if arg == "--hf-token":
            next(args)
        elif not arg.startswith("--api-key="):
            rest.append(arg)
    sys.argv = [str(EXAMPLE), *rest]
    runpy.run_path(str(EXAMPLE), run_name="__main__")


if __name__ == "__main__":
    main()
