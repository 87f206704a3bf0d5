"""Concurrent and interrupted writers: 16 roadmap processes writing at once
all succeed, and a writer killed with SIGKILL mid-transaction (repeated)
never costs an acknowledged write or the database's integrity (issue 12 item 5)."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from roadmap_cli.store import open_store

PROCESSES = 16
NOTES_EACH = 50


def _writer(home: str, worker: int, barrier) -> None:
    from roadmap_cli.store.tables import CheckpointNote
    from roadmap_cli.formats.timeutil import utc_now_iso

    store = open_store(Path(home))  # every process also races to migrate the fresh file
    barrier.wait()
    for i in range(NOTES_EACH):
        with store.session() as session:
            session.add(
                CheckpointNote(checkpoint_id=f"s1-cp-{i % 6}", created_at=utc_now_iso(), text=f"w{worker} n{i}")
            )


@pytest.mark.e2e  # a load test: 16 processes
@pytest.mark.slow
def test_sixteen_processes_record_800_notes(tmp_path: Path):
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


KILLS = 40


def _write_until_killed(home: Path, run: int, ack_fd: int) -> None:
    """In a forked child: commit notes forever, reporting each id on `ack_fd`
    only after its commit returned (an acknowledged write)."""
    from roadmap_cli.store.tables import CheckpointNote

    store = open_store(home)
    os.write(ack_fd, b"ready\n")
    for i in range(1_000_000):
        with store.session() as session:
            session.add(
                CheckpointNote(
                    checkpoint_id="s1-cp", created_at="2026-01-01T00:00:00+00:00", text=f"{run}-{i}" + "x" * 2000
                )
            )  # a few pages per transaction
        os.write(ack_fd, f"{run}-{i}\n".encode())


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_sigkill_mid_transaction_loses_no_acknowledged_write(tmp_path: Path):
    """Forked writers (no interpreter start-up: 40 kills in seconds) killed at
    random moments, most of them inside a transaction."""
    import roadmap_cli.store.tables  # noqa: F401 - imported once, before forking

    open_store(tmp_path).engine.dispose()  # the parent holds no connection across fork
    acknowledged: set[str] = set()
    rng = random.Random(12)
    started = time.monotonic()
    for run in range(KILLS):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            try:
                os.close(read_fd)
                _write_until_killed(tmp_path, run, write_fd)
            finally:
                os._exit(1)
        os.close(write_fd)
        ready = os.read(read_fd, 6)
        assert ready == b"ready\n"
        time.sleep(rng.uniform(0.01, 0.25))
        os.kill(pid, signal.SIGKILL)
        acknowledged |= {line for line in _read_all(read_fd).splitlines() if line}
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert time.monotonic() - started < 60
    con = sqlite3.connect(tmp_path / "roadmap.db")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = {row[0][:-2000] for row in con.execute("SELECT text FROM checkpoint_notes")}
    assert len(acknowledged) >= KILLS // 4 and acknowledged <= stored, sorted(acknowledged - stored)[:5]
