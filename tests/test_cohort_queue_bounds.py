"""What a learner's login can put in the grading queue by raw SQL is bounded on the server (red team D3).

ada inserted a 60 MB snapshot for lab 'nonexistent-lab' straight into roadmap_submissions: accepted (the 20 MB
cap was client- and worker-side), and its job waited forever in a queue no worker serves. Migration 14: a CHECK
on the snapshot's size and the lab id's shape, and a cap on a learner's waiting submissions; the worker fails a
submission for an unknown lab at once, with one line.
"""

from __future__ import annotations

import psycopg
import pytest

from test_cohort_verified import _add, _sql, cohort  # noqa: F401 - fixture


def _queue_ready(run_cli):
    from roadmap_cli import context
    from roadmap_cli.grading import submissions

    assert run_cli("db", "status").exit_code == 0
    context.reset()
    store = context.current().store()
    submissions.ensure_queue(store)
    return store


def _insert(conn, learner: str, lab: str, size: int) -> None:
    conn.execute(
        "INSERT INTO roadmap_submissions (learner, lab_id, files, size_bytes, file_count) VALUES (%s, %s, %s, 1, 1)",
        (learner, lab, b"\0" * size),
    )


def test_a_raw_insert_is_bounded_and_an_unknown_lab_fails_at_once(run_cli, cohort) -> None:
    from roadmap_cli.grading import queue
    from roadmap_cli.store.queue import MAX_FILES_BYTES, MAX_WAITING

    store = _queue_ready(run_cli)
    ada = f"ada{cohort['n']}"
    url = _add(run_cli, cohort, ada)
    with _sql(url) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            _insert(conn, ada, "adder", MAX_FILES_BYTES + 1)
        with pytest.raises(psycopg.errors.CheckViolation):
            _insert(conn, ada, "x'; drop table y; --" * 5, 10)  # not a lab id's shape
        _insert(conn, ada, "nonexistent-lab", 10)
        sid = conn.execute("SELECT max(id) FROM roadmap_submissions").fetchone()[0]
    worker = object.__new__(queue.Worker)
    worker.store, worker.options, worker.on_event = store, queue.WorkerOptions(name="box:1"), lambda ev: None
    jobs = worker.fail_unknown_labs()
    assert len(jobs) == 1
    with _sql(url) as conn:
        status, message = conn.execute(
            "SELECT status, message FROM roadmap_submissions WHERE id = %s", (sid,)
        ).fetchone()
        assert status == "not-graded" and "no lab 'nonexistent-lab' exists" in message and "adder" in message
        # A learner cannot fill the queue: MAX_WAITING waiting submissions at once.
        for _ in range(MAX_WAITING):
            _insert(conn, ada, "adder", 10)
        with pytest.raises(psycopg.errors.CheckViolation, match="waiting"):
            _insert(conn, ada, "adder", 10)
    assert worker.fail_unknown_labs() == []  # known labs are left to their workers


def test_migration_14_bounds_a_queue_made_before_it(run_cli, cohort) -> None:
    from roadmap_cli.store import queue as store_queue
    from roadmap_cli.store.queue import MAX_FILES_BYTES

    store = _queue_ready(run_cli)
    with _sql(cohort["url"]) as conn:  # the queue as migration 13 left it: no CHECK
        conn.execute("ALTER TABLE roadmap_submissions DROP CONSTRAINT roadmap_submissions_bounded")
    with store.engine.begin() as conn:
        store_queue.bound_existing(conn)
    ada = f"ada{cohort['n']}"
    url = _add(run_cli, cohort, ada)
    with _sql(url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        _insert(conn, ada, "adder", MAX_FILES_BYTES + 1)


def test_the_server_cap_leaves_room_for_what_submit_packs() -> None:
    from roadmap_cli.grading import snapshot
    from roadmap_cli.store.queue import MAX_FILES_BYTES

    assert snapshot.MAX_BYTES <= MAX_FILES_BYTES
