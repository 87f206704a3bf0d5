"""`roadmap db copy --to` a learner's cohort login (issue 36 item 3; portable/dbcopy.py).

On a real PostgreSQL cluster with per-learner logins (tests/test_cohort_roles.py's
fixture): a learner with SQLite history copies it into the cohort with the URL the
instructor handed out. Their rows become the login's, with new ids beside another
learner's rows; what the server does not let a learner write (grades, lab-proved
checkpoints, once the cohort restricts them) is left out with one line saying so;
every refusal is one line, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_cohort_roles import _add, _as, _sql

STAMP = "2026-01-05T10:00:00+00:00"


def _sqlite(monkeypatch, home: Path) -> None:
    from roadmap_cli import context

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ROADMAP_HOME", str(home))
    context.reset()


def _history(run_cli) -> None:
    """A learner's SQLite history: a note, a paper with a tag, hours, and a graded lab part."""
    from roadmap_cli import context

    assert run_cli("check", "s1-explain-attention-workflow", "--note", "QKV, then softmax").exit_code == 0
    assert (
        run_cli("paper", "add", "Attention Is All You Need", "--status", "read", "--tags", "transformer").exit_code == 0
    )
    assert run_cli("log", "hours", "2.5").exit_code == 0
    store = context.current().store()
    me = store.learner
    parts = [
        {"id": "capture", "points": 15.0, "max_points": 15.0, "status": "passed", "tests_passed": 1, "tests_total": 1}
    ]
    with store.connection() as conn:
        import sqlalchemy as sa

        for i in (1, 2):
            conn.execute(
                sa.text(
                    "INSERT INTO grade_attempts (id, lab_id, started_at, duration_s, outcome, score, max_score, parts, perf, "
                    "device, interpret_mode, workspace, grader_sha256, learner, sandbox) VALUES (:i, 'graph-compiler', :t, 1, "
                    "'passed', 15, 15, :p, '[]', 'cpu', 1, '/w', 'x', :me, 'strong')"
                ),
                {"i": i, "t": STAMP, "p": json.dumps(parts), "me": me},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO grade_test_results (attempt_id, nodeid, part_id, outcome, duration_s, learner) "
                    "VALUES (:i, 'tests/test_capture.py::t', 'capture', 'passed', 0.1, :me)"
                ),
                {"i": i, "me": me},
            )
        conn.execute(
            sa.text(
                "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, evidence, learner) "
                "VALUES ('m28-p2-build-graph-capture', :t, 'lab:graph-compiler/capture', 'grade attempt 1', :me)"
            ),
            {"t": STAMP, "me": me},
        )


def _rows_of(run_cli, tmp_path: Path, name: str) -> dict:
    out = tmp_path / f"{name}.json"
    result = run_cli("export", "-o", out)
    assert result.exit_code == 0, result
    return json.loads(out.read_text())["tables"]


def _one_line(result) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result
    assert result.stderr.strip().count("\n") == 0, result


def test_a_learner_copies_their_sqlite_history_into_the_cohort(run_cli, cohort, monkeypatch, tmp_path: Path):
    assert run_cli("db", "status").exit_code == 0  # the instructor migrates
    ada, bob = f"ada{cohort['n']}", f"bob{cohort['n']}"
    ada_url, bob_url = _add(run_cli, cohort, ada), _add(run_cli, cohort, bob)
    _as(monkeypatch, bob_url)  # another learner's rows already hold the low ids
    assert run_cli("log", "hours", "1").exit_code == 0
    assert run_cli("paper", "add", "Bob's paper", "--status", "read").exit_code == 0

    _sqlite(monkeypatch, tmp_path / "ada-home")
    _history(run_cli)
    before = _rows_of(run_cli, tmp_path, "before")
    copied = run_cli("db", "copy", "--to", ada_url)
    assert copied.exit_code == 0, copied
    assert f"as {ada}" in copied.stdout and "teach-Pa55word" not in copied.stdout
    # The cohort's grades are the server's record (issue 35): a learner's login copies everything else and
    # says, one line each, what it left out and what to do instead.
    assert "not copied: 2 grade attempts (and their 2 test results)" in copied.stdout
    assert "not copied: 1 checkpoint proved by lab grades" in copied.stdout and "roadmap submit" in copied.stdout

    _as(monkeypatch, ada_url)
    after = _rows_of(run_cli, tmp_path, "after")
    for table in ("checkpoint_notes", "papers", "paper_tags", "cadence_entries"):
        assert len(after[table]) == len(before[table]) > 0, table
        assert {r["learner"] for r in after[table]} == {ada}, table
    assert after["grade_attempts"] == [] and after["grade_test_results"] == []
    lab_proved = [r for r in before["checkpoint_progress"] if r["source"].startswith("lab:")]
    assert len(after["checkpoint_progress"]) == len(before["checkpoint_progress"]) - len(lab_proved) > 0
    assert {r["title"] for r in after["papers"]} == {"Attention Is All You Need"}
    (tag,) = after["paper_tags"]
    assert tag["paper_id"] == after["papers"][0]["id"] != before["papers"][0]["id"]  # new id, reference followed
    assert run_cli("log", "hours", "1").exit_code == 0  # the cohort's sequences still work for ada

    _sqlite(monkeypatch, tmp_path / "ada-home")
    again = run_cli("db", "copy", "--to", ada_url)  # never merges into their rows
    assert again.exit_code == 2 and "already holds" in again.stderr and "add --replace" in again.stderr
    _one_line(again)
    assert run_cli("log", "hours", "4").exit_code == 0  # one more row here
    backups = tmp_path / "ada-home" / "backups"
    assert not backups.exists()
    replaced = run_cli("db", "copy", "--to", ada_url, "--replace")
    assert replaced.exit_code == 0, replaced
    (backup,) = backups.glob("*.json")  # what it replaced, kept
    kept = json.loads(backup.read_text())["tables"]
    assert len(kept["cadence_entries"]) == len(after["cadence_entries"]) + 1  # ada's, with the hour logged there
    assert {r["learner"] for rows in kept.values() for r in rows} == {ada}  # never bob's
    _as(monkeypatch, ada_url)
    assert len(_rows_of(run_cli, tmp_path, "replaced")["cadence_entries"]) == len(before["cadence_entries"]) + 1
    _as(monkeypatch, bob_url)
    assert len(_rows_of(run_cli, tmp_path, "bob")["papers"]) == 1  # bob's rows untouched


def test_what_the_server_refuses_a_learner_is_left_out_with_one_line(run_cli, cohort, monkeypatch, tmp_path: Path):
    """As the `cohort` work makes it: grades and lab-proved checkpoints are not a learner's to write."""
    assert run_cli("db", "status").exit_code == 0
    carol = f"carol{cohort['n']}"
    carol_url = _add(run_cli, cohort, carol)
    with _sql(cohort["url"]) as owner:  # the instructor restricts what a learner's login may write
        owner.execute(f'REVOKE INSERT ON grade_attempts, grade_test_results FROM "{carol}"')
        owner.execute(
            f"CREATE POLICY lab_proved_by_server ON checkpoint_progress AS RESTRICTIVE FOR INSERT "
            f"TO \"{carol}\" WITH CHECK (source NOT LIKE 'lab:%')"
        )

    _sqlite(monkeypatch, tmp_path / "carol-home")
    _history(run_cli)
    copied = run_cli("db", "copy", "--to", carol_url)
    assert copied.exit_code == 0, copied
    assert "Traceback" not in copied.stdout + copied.stderr
    notes = [line for line in copied.stdout.splitlines() if line.startswith("not copied")]
    assert len(notes) == 2, copied.stdout
    assert "2 grade attempts (and their 2 test results)" in notes[0] and "roadmap submit" in notes[0]
    assert "1 checkpoint proved by lab grades" in notes[1]

    history = _rows_of(run_cli, tmp_path, "carol-sqlite")
    _as(monkeypatch, carol_url)
    after = _rows_of(run_cli, tmp_path, "carol")
    assert after["grade_attempts"] == [] and after["grade_test_results"] == []
    assert [r["source"] for r in after["checkpoint_progress"]] == ["self"]
    assert len(after["checkpoint_notes"]) == 1 and len(after["papers"]) == 1 and after["cadence_entries"]

    # `roadmap import --replace` with the same login says the same, and imports the rest.
    # (Rows without a learner id are the importer's: an export from before learner ids.)
    mine = {
        name: [{k: v for k, v in row.items() if k != "learner"} for row in rows if row.get("learner") != ""]
        for name, rows in history.items()
    }
    (tmp_path / "carol-sqlite.json").write_text(
        json.dumps({"format": "roadmap-export", "version": 1, "schema_version": 1, "tables": mine})
    )
    imported = run_cli("import", tmp_path / "carol-sqlite.json", "--replace")
    assert imported.exit_code == 0, imported
    assert [line.split(":")[0] for line in imported.stdout.splitlines()[1:]] == ["not imported", "not imported"]
    assert len(_rows_of(run_cli, tmp_path, "carol-again")["papers"]) == 1


def test_a_source_holding_several_learners_is_refused_for_a_learner_login(run_cli, cohort, monkeypatch, tmp_path: Path):
    assert run_cli("db", "status").exit_code == 0
    dan_url = _add(run_cli, cohort, f"dan{cohort['n']}")
    _sqlite(monkeypatch, tmp_path / "shared-home")
    for who in ("ann", "ben"):
        monkeypatch.setenv("ROADMAP_LEARNER", who)
        assert run_cli("log", "hours", "1").exit_code == 0
    monkeypatch.setenv("ROADMAP_LEARNER", "ann")
    refused = run_cli("db", "copy", "--to", dan_url)
    assert refused.exit_code == 2 and "rows of 2 learners (ann, ben)" in refused.stderr, refused
    _one_line(refused)


def test_the_cohort_guide_says_how():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "cohort.md").read_text(encoding="utf-8")
    assert "Bringing your SQLite history into a cohort" in readme and "roadmap db copy --to 'URL'" in readme
