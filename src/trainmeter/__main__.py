"""`python -m trainmeter ...` is the same as `tm ...`."""

import sys

from .cli.main import main

sys.exit(main())
