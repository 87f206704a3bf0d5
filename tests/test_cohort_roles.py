"""Cohort members authenticated and scoped by the server (issue 25 item 4; store/roles.py).

On a real PostgreSQL cluster: an instructor role owns the cohort's database
and makes a login role per learner (`roadmap cohort add-learner`). Row-level
security then lets each learner read and write only their own rows, with raw
SQL as much as with roadmap; the cohort views still show everyone; a learner
cannot claim to be another (`ROADMAP_LEARNER`), and `import --replace`
replaces only the importer's rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cohort_helpers import add_learner as _add, as_login as _as, sql as _sql


def test_each_learner_reads_and_writes_only_their_own_rows(run_cli, cohort, monkeypatch, tmp_path: Path):
    import psycopg

    assert run_cli("db", "status").exit_code == 0  # the instructor migrates: tables, policies, views
    ada, bob = f"ada{cohort['n']}@example.org", f"bob{cohort['n']}"
    ada_url, bob_url = _add(run_cli, cohort, ada), _add(run_cli, cohort, bob)
    listed = run_cli("cohort", "learners", "--json").json()["data"]["learners"]
    assert {r["learner"] for r in listed} == {ada, bob}

    _as(monkeypatch, ada_url)
    status = run_cli("db", "status", "--json").json()["data"]
    assert status["learner"] == ada and status["login"] == {"role": ada, "scoped": True}  # the login decides
    assert run_cli("log", "hours", "2").exit_code == 0
    assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0
    _as(monkeypatch, bob_url)
    assert run_cli("log", "hours", "1").exit_code == 0
    board_before = run_cli("cohort", "status", "--json").json()["data"]["learners"]
    assert {(r["learner"], r["week"]["hours"]) for r in board_before} == {(ada, 2.0), (bob, 1.0)}

    # Raw SQL as ada: bob's rows can be neither written, changed, deleted nor read in the tables themselves.
    with _sql(ada_url) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO cadence_entries (kind, title, on_date, hours, created_at, learner) "
                "VALUES ('hours', '', '2026-12-01', 40, '2026-12-01T00:00:00+00:00', %s)",
                (bob,),
            )
        assert conn.execute("UPDATE cadence_entries SET hours = 99 WHERE learner = %s", (bob,)).rowcount == 0
        assert conn.execute("DELETE FROM cadence_entries WHERE learner = %s", (bob,)).rowcount == 0
        assert conn.execute("DELETE FROM checkpoint_progress WHERE learner <> %s", (ada,)).rowcount == 0
        assert {r[0] for r in conn.execute("SELECT learner FROM cadence_entries")} == {ada}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE cadence_entries SET learner = %s WHERE learner = %s", (bob, ada))
        # The cohort views are read-only for a learner.
        with pytest.raises(psycopg.Error):
            conn.execute("DELETE FROM cohort_cadence_entries")

    # Claiming to be bob while logged in as ada: one line, exit 2, nothing written.
    _as(monkeypatch, ada_url)
    monkeypatch.setenv("ROADMAP_LEARNER", bob)
    claimed = run_cli("log", "hours", "5")
    assert claimed.exit_code == 2 and f"logged in to the cohort database as {ada!r}" in claimed.stderr, claimed
    assert claimed.stderr.count("\n") == 1
    monkeypatch.delenv("ROADMAP_LEARNER")
    assert run_cli("cohort", "status", "--json").json()["data"]["learners"] == board_before

    # import --replace as ada: only ada's rows; a file holding bob's rows is refused whole.
    mine = tmp_path / "ada.json"
    assert run_cli("export", "-o", str(mine)).exit_code == 0
    exported = json.loads(mine.read_text())
    assert {r["learner"] for r in exported["tables"]["cadence_entries"]} == {ada}
    assert run_cli("import", str(mine), "--replace").exit_code == 0
    forged = dict(
        exported,
        tables=dict(
            exported["tables"],
            cadence_entries=[dict(r, learner=bob, hours=4.0) for r in exported["tables"]["cadence_entries"]],
        ),
    )
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    refused = run_cli("import", str(tmp_path / "forged.json"), "--replace")
    assert refused.exit_code == 2 and "rows of other learners" in refused.stderr, refused
    assert run_cli("cohort", "status", "--json").json()["data"]["learners"] == board_before

    # Managing learners is the instructor's: ada cannot add one.
    denied = run_cli("cohort", "add-learner", f"eve{cohort['n']}")
    assert denied.exit_code == 2 and "only the cohort's instructor" in denied.stderr, denied


def test_removing_a_learner_ends_their_login_and_keeps_their_rows(run_cli, cohort, monkeypatch):
    assert run_cli("db", "status").exit_code == 0
    cat = f"cat{cohort['n']}"
    cat_url = _add(run_cli, cohort, cat)
    instructor = os.environ["DATABASE_URL"]
    _as(monkeypatch, cat_url)
    assert run_cli("log", "hours", "3").exit_code == 0
    _as(monkeypatch, instructor)
    removed = run_cli("cohort", "remove-learner", cat, "--json")
    assert removed.exit_code == 0 and removed.json()["data"]["rows_kept"] >= 1, removed
    assert {r["learner"] for r in run_cli("cohort", "status", "--json").json()["data"]["learners"]} == {cat}
    _as(monkeypatch, cat_url)
    gone = run_cli("status")
    assert gone.exit_code == 3 and "authentication failed" in gone.stderr, gone
    _as(monkeypatch, instructor)
    unknown = run_cli("cohort", "remove-learner", cat)
    assert unknown.exit_code == 2 and "unknown learner role" in unknown.stderr


def test_learner_commands_on_sqlite_say_they_need_a_cohort_database(run_cli, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    result = run_cli("cohort", "add-learner", "ada")
    assert result.exit_code == 2 and "needs a cohort database" in result.stderr
