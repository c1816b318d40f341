"""The supervisor: what `tm` does around the training command.

- `launcher`: start the command on the user's terminal, forward signals, return its status.
- `ingest`: the private datagram socket the agents send records to.
- `live`: samplers, the silent-python watcher, drop counts and alerts, once a second.
- `session`: one supervised run, start to end (`supervise`); the caller passes the live views
  and the end line, so the supervisor imports no view. Its steps: `about` (`run.start` and
  `meta.json`), `descriptors` (held back for the end), `watching` (the live loop's set-up),
  `ending` (after the child's exit: grace, rings, `run.end`, `summary.json`), `observe_only`.
- `late_parts`: samplers, watcher and the caller's views, loaded late and behind a guard.

What reads and writes a run directory (store, recorder, replay, the run resolver) is
`trainmeter.runlog`, one layer below.
"""
