"""The supervisor: what `tm` does around the training command.

- `launcher`: start the command on the user's terminal, forward signals, return its status.
- `ingest`: the private datagram socket the agents send records to.
- `store`: the run directory (`events.jsonl`, `meta.json`, `summary.json`).
- `recorder`: the one door for records: the log first, then the engine, in the same order.
- `live`: samplers, the silent-python watcher, drop counts and alerts, once a second.
- `session`: one supervised run, start to end; `replay`: a run's log through a fresh engine.
- `late_parts`: the engine, samplers and watcher, loaded late and behind a guard.
"""
