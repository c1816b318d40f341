"""The fault suite: each test here is a way a hostile or unlucky user broke `tm` once.

They run with the rest of `tests/` (the README's command), each with a real `tm` where the
fault needs one, and each says in its docstring what broke before.
"""
