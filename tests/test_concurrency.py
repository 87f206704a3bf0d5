"""Two (here: eight) roadmap processes writing at once must all succeed."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import sqlalchemy as sa

from roadmap_cli.store import open_store

PROCESSES = 8
NOTES_EACH = 100


def _writer(home: str, worker: int, barrier) -> None:
    from roadmap_cli.store.tables import CheckpointNote
    from roadmap_cli.timeutil import utc_now_iso

    store = open_store(Path(home))  # every process also races to migrate the fresh file
    barrier.wait()
    for i in range(NOTES_EACH):
        with store.session() as session:
            session.add(CheckpointNote(checkpoint_id=f"s1-cp-{i % 6}", created_at=utc_now_iso(), text=f"w{worker} n{i}"))


def test_eight_processes_record_800_notes(tmp_path: Path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, barrier)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * PROCESSES  # no "database is locked" anywhere
    store = open_store(tmp_path)
    with store.connection() as conn:
        texts = {r[0] for r in conn.execute(sa.text("SELECT text FROM checkpoint_notes"))}
    assert len(texts) == PROCESSES * NOTES_EACH
