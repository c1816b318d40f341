"""Lives long enough for tm's watcher to notice it never said hello, then prints its answer.

The argument is seconds to sleep, or a file to wait for: the test makes that file once the
watcher's fact is in the log (at most 300 s), so a loaded machine cannot end the run first."""

import json
import os
import sys
import time

arg = sys.argv[1] if len(sys.argv) > 1 else "5"
try:
    time.sleep(float(arg))
except ValueError:
    deadline = time.monotonic() + 300
    while not os.path.exists(arg) and time.monotonic() < deadline:
        time.sleep(0.05)
print(json.dumps({"python": sys.version.split()[0], "flags_isolated": sys.flags.isolated}))
