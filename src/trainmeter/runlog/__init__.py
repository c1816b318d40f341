"""Run directories, read and written the one way: what the supervisor records and every command
reads back.

- `store`: the run directory (`events.jsonl`, `meta.json`, `summary.json`).
- `decode`, `plausible`: a line of the log (or a datagram) to a record, or the reason it is not.
- `recorder`: the one door for records: the log first, then the engine, in the same order.
- `observers`: the views' guard (`ObserverSet`), for a live run and a replay alike.
- `engine_load`: the engine, loaded late and behind a guard.
- `replay`: a run's log through a fresh engine; `replay_many`: the nodes of a multi-node job.
- `runs`: finding runs (`resolve_run`, `list_runs`).
- `warn`: warn once on stderr.

Below the supervisor: nothing here imports it, the views, the exporters or the command line.
"""
