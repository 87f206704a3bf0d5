"""The cohort views show every learner's counts, states and scores, never what a learner wrote for themselves
(migration 13). Red team route D1: through `SELECT *` views a learner's login read the others' paper notes."""

from __future__ import annotations

from test_cohort_roles import _add, _as, _sql

SECRET = "BOB PRIVATE 7f3a"


def test_a_learner_reads_the_cohort_views_but_not_the_others_notes(run_cli, cohort, monkeypatch):  # noqa: F811
    from roadmap_cli.store import roles

    assert run_cli("db", "status").exit_code == 0
    ada, bob = f"ada{cohort['n']}", f"bob{cohort['n']}"
    ada_url, bob_url = _add(run_cli, cohort, ada), _add(run_cli, cohort, bob)
    _as(monkeypatch, bob_url)
    assert (
        run_cli(
            "paper",
            "log",
            "Attention Is All You Need",
            "--no-fetch",
            "--status",
            "read",
            "--note",
            SECRET,
            "--rating",
            "5",
        ).exit_code
        == 0
    )
    assert run_cli("log", "hours", "2", "--note", SECRET).exit_code == 0
    assert run_cli("check", "s1-explain-attention-workflow", "--note", SECRET).exit_code == 0

    with _sql(ada_url) as conn:
        for table, columns in roles.COHORT_VIEW_COLUMNS.items():
            cursor = conn.execute(f"SELECT * FROM {roles.view_name(table)}")
            assert tuple(d.name for d in cursor.description) == columns
            assert SECRET not in repr(cursor.fetchall())
        assert conn.execute("SELECT count(*) FROM cohort_papers WHERE learner = %s", (bob,)).fetchone()[0] == 1

    _as(monkeypatch, ada_url)
    rows = run_cli("cohort", "status", "--json").json()["data"]["learners"]
    assert {r["learner"]: r["week"]["hours"] for r in rows}[bob] == 2.0  # the commands still read what they need


def test_learners_added_before_the_views_narrowed_still_read_them(run_cli, cohort, monkeypatch, tmp_path):  # noqa: F811
    """Migration 13 drops and makes each view again: the grants of the logins that existed are made again."""
    from roadmap_cli.store import migrations, open_store

    store = open_store(tmp_path, migrate=False)  # DATABASE_URL: the instructor's
    migrations.migrate(store, target=12)
    from roadmap_cli.store import roles
    from roadmap_cli.store.learners import person_tables

    ada = f"ada{cohort['n']}"
    with store.connection() as conn:  # the login made as `cohort add-learner` made it under migration 12
        roles.add_learner(conn, ada, "ada-Pa55word-long", person_tables(conn))
        assert migrations.applied_version(conn) == 12
    cohort["learners"].append(ada)
    ada_url = cohort["url"].replace(cohort["url"].split("//")[1].split("@")[0], f"{ada}:ada-Pa55word-long")
    migrations.migrate(store)
    with store.connection() as conn:
        assert migrations.applied_version(conn) == migrations.LATEST
    with _sql(ada_url) as conn:
        for view in ("cohort_papers", "cohort_grade_attempts", "cohort_checkpoint_progress", "cohort_cadence_entries"):
            conn.execute(f"SELECT count(*) FROM {view}").fetchone()
