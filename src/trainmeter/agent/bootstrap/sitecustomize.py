"""Loaded by every Python that `tm` starts, through PYTHONPATH; standard library only.

It starts the trainmeter agent, then runs the `sitecustomize` the environment already had (the
one this file shadows), so a site's own start-up code keeps working. Nothing here may raise.
"""


def _start_agent() -> None:
    try:
        from trainmeter.agent import boot
    except Exception:  # noqa: BLE001 - trainmeter not importable here: tm reports observe-only
        return
    try:
        boot.start()
    except Exception as exc:  # noqa: BLE001 - promise 1: the run goes on without us
        import sys

        print(f"trainmeter: the agent did not start ({exc!r}); the run goes on", file=sys.stderr)


def _chain_to_the_next_sitecustomize() -> None:
    import importlib.machinery
    import os
    import sys

    # importlib.util.module_from_spec is this function; importlib.util's own import (functools,
    # collections) would cost ~2 ms in every Python the run starts
    from importlib._bootstrap import module_from_spec

    here = os.path.dirname(os.path.abspath(__file__))
    module = sys.modules.get(__name__)
    try:
        path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        other = module_from_spec(spec)
        sys.modules["sitecustomize"] = other
        spec.loader.exec_module(other)
    except Exception as exc:  # noqa: BLE001 - theirs failed; Python would only warn too
        if module is not None:
            sys.modules["sitecustomize"] = module
        print(f"trainmeter: the environment's own sitecustomize failed: {exc!r}", file=sys.stderr)


_start_agent()
_chain_to_the_next_sitecustomize()
