"""Lives long enough for tm's watcher to notice it never said hello, then prints its answer."""

import json
import sys
import time

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)
print(json.dumps({"python": sys.version.split()[0], "flags_isolated": sys.flags.isolated}))
