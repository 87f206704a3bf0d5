"""The progress store: SQLite under the data home (PostgreSQL-ready).

    store = open_store(home)           # migrates on open; refuses newer/corrupt DBs
    with store.session() as s:         # one write transaction (BEGIN IMMEDIATE on SQLite)
        s.add(CheckpointNote(...))

Table classes live in `roadmap_cli.store.tables`; the schema's history lives in
`roadmap_cli.store.migrations` (append-only).
"""

from roadmap_cli.store.engine import Store, open_store

__all__ = ["Store", "open_store"]
