"""`python -m trainmeter ...` is the same as `tm ...`."""

from .cli.main import entry

entry()
