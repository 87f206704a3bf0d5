"""Learner ids (migration 5, store/learners.py): a v4 database upgrades with
every row kept and assigned to its learner; ids are validated; learners in
one database do not see each other's rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from roadmap_cli.store import migrations, open_store
from roadmap_cli.store.learners import current_learner

V4_ROWS = {
    "settings": [{"key": "start_date", "value": json.dumps("2026-01-05")}, {"key": "lang", "value": json.dumps("zh")}],
    "checkpoint_progress": [
        {
            "checkpoint_id": "s1-explain-attention",
            "completed_at": "2026-02-01T10:00:00+00:00",
            "source": "self",
            "evidence": "https://example.org/notes",
        },
        {
            "checkpoint_id": "s1-build-tokenizer",
            "completed_at": "2026-02-02T10:00:00+00:00",
            "source": "lab:tokenizer/bpe",
            "evidence": None,
        },
    ],
    "checkpoint_notes": [
        {
            "id": 1,
            "checkpoint_id": "s1-explain-attention",
            "created_at": "2026-02-01T10:00:00+00:00",
            "text": "softmax(QK^T/sqrt(d))V",
        }
    ],
    "lab_workspaces": [
        {"id": 1, "lab_id": "tokenizer", "path": "/tmp/ws/tokenizer", "created_at": "2026-02-01T09:00:00+00:00"},
        {"id": 2, "lab_id": "attention", "path": "/tmp/ws/attention", "created_at": "2026-02-03T09:00:00+00:00"},
    ],
    "grade_attempts": [
        {
            "id": 1,
            "lab_id": "tokenizer",
            "started_at": "2026-02-02T10:00:00+00:00",
            "duration_s": 3.5,
            "outcome": "passed",
            "score": 10.0,
            "max_score": 10.0,
            "parts": json.dumps([{"id": "bpe", "points": 10, "max_points": 10, "status": "passed"}]),
            "perf": "[]",
            "device": "cpu",
            "device_capability": None,
            "torch_version": "2.13",
            "triton_version": None,
            "interpret_mode": True,
            "commit_sha": "abc",
            "dirty": False,
            "workspace": "/tmp/ws/tokenizer",
            "grader_sha256": "f" * 64,
            "message": None,
            "imported": False,
        }
    ],
    "grade_test_results": [
        {
            "id": 1,
            "attempt_id": 1,
            "nodeid": "tests/test_bpe.py::test_merge",
            "part_id": "bpe",
            "outcome": "passed",
            "duration_s": 0.2,
            "message": None,
        }
    ],
    "lab_hints": [{"id": 1, "lab_id": "tokenizer", "hint_index": 0, "shown_at": "2026-02-02T09:30:00+00:00"}],
    "papers": [
        {
            "id": 1,
            "title": "Attention Is All You Need",
            "title_key": "attention is all you need",
            "authors": "Vaswani et al.",
            "year": 2017,
            "arxiv_id": "1706.03762",
            "arxiv_version": 7,
            "doi": None,
            "url": None,
            "stage": 1,
            "status": "read",
            "read_on": "2026-02-01",
            "added_on": "2026-01-30",
            "rating": 5,
            "notes": "the one",
            "bibtex_key": "vaswani2017",
        }
    ],
    "paper_tags": [{"paper_id": 1, "tag": "attention"}, {"paper_id": 1, "tag": "transformer"}],
    "cadence_entries": [
        {
            "id": 1,
            "kind": "hours",
            "title": None,
            "on_date": "2026-02-01",
            "hours": 2.5,
            "stage": 1,
            "link": None,
            "paper_id": None,
            "lab_id": None,
            "note": None,
            "created_at": "2026-02-01T20:00:00+00:00",
        },
        {
            "id": 2,
            "kind": "reproduction",
            "title": "AIAYN",
            "on_date": "2026-02-01",
            "hours": None,
            "stage": 1,
            "link": None,
            "paper_id": 1,
            "lab_id": None,
            "note": "tiny",
            "created_at": "2026-02-01T21:00:00+00:00",
        },
    ],
}


def _v4_database(home: Path) -> None:
    """A database built by migrations 1-4 exactly as an older roadmap left it, with rows in every table."""
    store = open_store(home, migrate=False)
    migrations.migrate(store, target=4)
    with store.connection() as conn:
        md = sa.MetaData()
        md.reflect(conn)
        for name, rows in V4_ROWS.items():
            conn.execute(md.tables[name].insert(), rows)
    store.engine.dispose()


def _rows(conn, name: str) -> list[dict]:
    table = sa.Table(name, sa.MetaData(), autoload_with=conn)
    order = list(table.primary_key.columns) or list(table.columns)
    return [dict(r) for r in conn.execute(sa.select(table).order_by(*order)).mappings()]


@pytest.mark.parametrize("who", ["ada@example.org", None])
def test_v4_database_upgrades_with_every_row_kept(tmp_path: Path, monkeypatch, who):
    if who:
        monkeypatch.setenv("ROADMAP_LEARNER", who)
    else:  # no env, no git e-mail: the local learner
        monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
        monkeypatch.setattr("roadmap_cli.store.learners.git_email", lambda: None)
    _v4_database(tmp_path)
    store = open_store(tmp_path)
    expected_learner = who or "local"
    assert current_learner(store) == expected_learner
    with store.connection() as conn:
        assert migrations.applied_version(conn) == migrations.LATEST
        for name, before in V4_ROWS.items():
            after = _rows(conn, name)
            if name == "settings":  # plus the pinned id of this home's learner
                pinned = [r for r in after if r["learner"] == ""]
                assert pinned == [{"key": "learner", "value": json.dumps(expected_learner), "learner": ""}]
                after = [r for r in after if r["learner"] != ""]
            assert all(r.pop("learner") == expected_learner for r in after), name
            # Migration 7 added grade_attempts.sandbox: unknown (NULL) for every attempt recorded before it.
            assert all(r.pop("sandbox", None) is None for r in after), name
            # Migration 9 added grade_attempts.graded_on: NULL (this machine) for every attempt recorded before it.
            assert all(r.pop("graded_on", None) is None for r in after), name
            # Migration 10 added the papers' fetched metadata: none for a paper logged before it.
            for column in ("venue", "abstract", "pdf_url", "metadata_source", "metadata_fetched_on"):
                assert all(r.pop(column, None) is None for r in after), (name, column)
            # Migration 11 added grade_attempts.verified: false (no worker vouched) for every older attempt.
            assert all(r.pop("verified", False) is False for r in after), name
            # Migration 12 numbered papers and log entries per learner: an older row's number is its id.
            assert all(r.pop("number", r.get("id")) == r.get("id") for r in after), name
            key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
            assert sorted(map(key, after)) == sorted(map(key, before)), name
    # The pin holds even when the environment changes later: the rows stay visible.
    monkeypatch.setenv("ROADMAP_LEARNER", "someone-else")
    monkeypatch.delenv("ROADMAP_LEARNER")
    monkeypatch.setattr("roadmap_cli.store.learners.git_email", lambda: "changed@example.org")
    again = open_store(tmp_path)
    assert current_learner(again) == expected_learner
    from roadmap_cli.tracker.progress import completed

    assert set(completed(again)) == {"s1-explain-attention", "s1-build-tokenizer"}


def test_bad_learner_names_are_one_line(run_cli, monkeypatch):
    result = run_cli("init", "--learner", "ada lovelace")
    assert result.exit_code == 2 and result.exception is None
    assert "not a valid learner id" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    monkeypatch.setenv("ROADMAP_LEARNER", "-rf")
    result = run_cli("status")
    assert result.exit_code == 2 and "$ROADMAP_LEARNER" in result.stderr and result.exception is None


def test_init_learner_renames_a_single_users_rows(run_cli, monkeypatch):
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    monkeypatch.setattr("roadmap_cli.store.learners.git_email", lambda: None)
    assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0
    result = run_cli("init", "--learner", "ada@example.org", "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["learner"] == "ada@example.org"
    from roadmap_cli import context
    from roadmap_cli.tracker.progress import completed

    context.reset()
    store = context.current().store()
    assert store.learner == "ada@example.org"
    assert "s1-explain-attention-workflow" in completed(store)  # still done: the rows followed the rename


def test_learners_sharing_a_database_see_their_own_rows(run_cli, monkeypatch):
    monkeypatch.setenv("ROADMAP_LEARNER", "ada")
    assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0
    assert run_cli("init", "--start-date", "2026-01-05").exit_code == 0
    monkeypatch.setenv("ROADMAP_LEARNER", "grace")
    mine = run_cli("init", "--json").json()["data"]
    assert mine["learner"] == "grace" and "start_date" not in mine["settings"]
    from roadmap_cli import context
    from roadmap_cli.tracker.progress import completed

    context.reset()
    assert completed(context.current().store()) == {}  # grace sees none of ada's checks
    assert (
        run_cli("uncheck", "s1-explain-attention-workflow").exit_code == 0
    )  # grace's uncheck: nothing of hers to undo
    monkeypatch.setenv("ROADMAP_LEARNER", "ada")
    context.reset()
    assert "s1-explain-attention-workflow" in completed(context.current().store())
