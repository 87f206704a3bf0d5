"""Per-learner paper and log-entry numbers on a real PostgreSQL cohort (issue 36 Why 5: "paper ids are global
across a cohort"; research/numbers.py, migration 12).

Two learner logins (row-level security, store/roles.py) each log papers and both see 1..n; neither can read or
change the other's paper by number; every paper command works by number; learners writing at the same moment
never collide (the learner's advisory lock orders one learner's writers; the unique (learner, number) index
backs it); migration 12 keeps the ids a cohort's learners knew.
"""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path

import pytest

from test_cohort_roles import _add, _as, _sql


def _data(result) -> dict:
    assert result.exit_code == 0, result
    return result.json()["data"]


def _numbers(run_cli) -> list[int]:
    return sorted(p["id"] for p in _data(run_cli("paper", "list", "--all", "--json"))["papers"])


def test_two_learner_logins_each_number_from_one_and_cannot_reach_the_other(
    run_cli, cohort, monkeypatch, tmp_path: Path
):
    assert run_cli("db", "status").exit_code == 0  # the instructor migrates
    ada, bob = f"ada{cohort['n']}", f"bob{cohort['n']}"
    ada_url, bob_url = _add(run_cli, cohort, ada), _add(run_cli, cohort, bob)

    _as(monkeypatch, ada_url)
    for title in ("Ada one", "Ada two", "Ada three"):
        assert run_cli("paper", "log", title).exit_code == 0
    assert _data(run_cli("log", "blog", "ada post", "--json"))["id"] == 1
    _as(monkeypatch, bob_url)
    logged = [_data(run_cli("paper", "log", t, "--json"))["id"] for t in ("Bob one", "Bob two")]
    assert logged == [1, 2]
    assert _numbers(run_cli) == [1, 2]

    # Every paper command by number, as bob.
    assert _data(run_cli("paper", "read", "1", "--date", "2026-01-02", "--json"))["read_on"] == "2026-01-02"
    assert run_cli("paper", "note", "1", "bob's note").exit_code == 0
    assert _data(run_cli("paper", "edit", "2", "--tags", "kernels", "--rating", "4", "--json"))["rating"] == 4
    entry = _data(run_cli("log", "reproduction", "Bob two again", "--paper", "2", "--json"))
    assert (entry["id"], entry["paper_id"]) == (1, 2)
    shown = _data(run_cli("paper", "show", "2", "--json"))
    assert (shown["status"], shown["tags"], shown["entries"][0]["id"]) == ("reproduced", ["kernels"], 1)
    assert [p["id"] for p in _data(run_cli("paper", "list", "--tag", "kernels", "--json"))["papers"]] == [2]
    assert run_cli("paper", "export", "--format", "csv").stdout.splitlines()[1].startswith("1,")
    refreshed = _data(run_cli("paper", "refresh", "1", "--json"))["papers"]  # typed by hand: nothing to look up
    assert [(r["id"], r["title"], r["result"]) for r in refreshed] == [(1, "Bob one", "skipped")]
    assert _data(run_cli("log", "list", "--json"))["entries"][0]["paper_id"] == 2
    # Ada's #3 does not exist for bob; his commands on it change nothing of hers.
    for args in (
        ("paper", "show", "3"),
        ("paper", "edit", "3", "--title", "Hijacked"),
        ("paper", "delete", "3", "--yes"),
        ("paper", "note", "3", "x"),
        ("log", "experiment", "e", "--paper", "3"),
    ):
        refused = run_cli(*args)
        assert refused.exit_code == 2 and "unknown paper '3'" in refused.stderr, (args, refused)
    assert run_cli("paper", "delete", "1", "--yes").exit_code == 0  # bob's #1, not ada's
    assert _numbers(run_cli) == [2]

    # Raw SQL as bob: row-level security keeps ada's numbers out of sight and out of reach, and a row inserted
    # without a number gets bob's next (the trigger runs with bob's rights: his rows only).
    with _sql(bob_url) as conn:
        assert conn.execute("UPDATE papers SET title = 'Hijacked' WHERE number = 3").rowcount == 0
        conn.execute(
            "INSERT INTO papers (title, title_key, status, added_on, learner) "
            "VALUES ('Raw', 'raw', 'to-read', '2026-01-03', %s)",
            (bob,),
        )
        assert sorted(r[0] for r in conn.execute("SELECT number FROM papers")) == [2, 3]

    _as(monkeypatch, ada_url)
    assert [(p["id"], p["title"]) for p in _data(run_cli("paper", "list", "--json"))["papers"]] == [
        (3, "Ada three"),
        (2, "Ada two"),
        (1, "Ada one"),
    ]
    assert _data(run_cli("paper", "log", "Ada four", "--json"))["id"] == 4
    assert _data(run_cli("log", "list", "--json"))["entries"][0]["id"] == 1

    # Ada's export -> import --replace keeps her numbers (the database gives the rows new ids).
    mine = tmp_path / "ada.json"
    assert run_cli("export", "-o", mine).exit_code == 0
    assert run_cli("import", mine, "--replace").exit_code == 0
    assert _numbers(run_cli) == [1, 2, 3, 4]
    assert _data(run_cli("paper", "show", "4", "--json"))["title"] == "Ada four"
    assert _data(run_cli("paper", "log", "Ada five", "--json"))["id"] == 5
    _as(monkeypatch, bob_url)
    assert _numbers(run_cli) == [2, 3]


def test_learners_writing_at_the_same_moment_never_collide(run_cli, cohort, monkeypatch, roadmap_home: Path):
    """Two threads per learner, two learners, each logging papers and entries at once: every learner ends with
    1..n exactly, nobody sees a conflict."""
    from roadmap_cli.research.entries import EntryInput, log_entry
    from roadmap_cli.research.papers import PaperInput, log_paper
    from roadmap_cli.store import open_store

    assert run_cli("db", "status").exit_code == 0
    urls = {name: _add(run_cli, cohort, f"{name}{cohort['n']}") for name in ("ada", "bob")}
    monkeypatch.delenv("DATABASE_URL")
    per_thread, threads_per_learner = 6, 2
    start = threading.Barrier(len(urls) * threads_per_learner)
    errors: list[BaseException] = []
    today = date.today()

    def writer(url: str, tag: str) -> None:
        try:
            store = open_store(roadmap_home, url=url)
            start.wait(timeout=60)
            for i in range(per_thread):
                log_paper(store, PaperInput(title=f"{tag} paper {i}"), today=today)
                log_entry(store, EntryInput(kind="experiment", on_date=today, title=f"{tag} exp {i}"), today=today)
            store.engine.dispose()
        except BaseException as exc:  # reported below, with the thread's name
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(url, f"{name}-{t}"), name=f"{name}-{t}")
        for name, url in urls.items()
        for t in range(threads_per_learner)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    expected = list(range(1, per_thread * threads_per_learner + 1))
    for url in urls.values():
        with _sql(url) as conn:
            assert sorted(r[0] for r in conn.execute("SELECT number FROM papers")) == expected
            assert sorted(r[0] for r in conn.execute("SELECT number FROM cadence_entries")) == expected


def test_migration_keeps_the_ids_each_cohort_learner_knew(pg_url, roadmap_home: Path, monkeypatch, run_cli):
    import sqlalchemy as sa

    from roadmap_cli import context
    from roadmap_cli.store import migrations, open_store

    roadmap_home.mkdir(parents=True, exist_ok=True)
    store = open_store(roadmap_home, migrate=False)
    migrations.migrate(store, target=11)
    with store.engine.begin() as conn:
        for pid, learner in ((1, "ada"), (2, "bob"), (3, "ada"), (4, "bob")):
            conn.execute(
                sa.text(
                    "INSERT INTO papers (id, title, title_key, status, added_on, learner) "
                    "VALUES (:i, :t, :k, 'read', '2026-01-01', :l)"
                ),
                {"i": pid, "t": f"Paper {pid}", "k": f"paper {pid}", "l": learner},
            )
        conn.execute(sa.text("SELECT setval(pg_get_serial_sequence('papers', 'id'), 4)"))
    store.engine.dispose()
    for learner, known, after in (("ada", [1, 3], 4), ("bob", [2, 4], 5)):
        monkeypatch.setenv("ROADMAP_LEARNER", learner)
        context.reset()
        assert _numbers(run_cli) == known  # the ids they knew, gaps and all
        assert _data(run_cli("paper", "log", f"{learner} new", "--json"))["id"] == after
    monkeypatch.setenv("ROADMAP_LEARNER", "ada")
    context.reset()
    assert run_cli("paper", "show", "2").exit_code == 2  # #2 was bob's id: not one of ada's numbers


@pytest.mark.parametrize("table", ["papers", "cadence_entries"])
def test_the_unique_index_is_the_backstop(pg_url, roadmap_home: Path, table):
    import sqlalchemy as sa

    from roadmap_cli.store import open_store

    store = open_store(roadmap_home)
    indexes = {i["name"]: i for i in sa.inspect(store.engine).get_indexes(table)}
    assert indexes[f"uq_{table}_learner_number"]["unique"]
    assert indexes[f"uq_{table}_learner_number"]["column_names"] == ["learner", "number"]


def test_db_copy_into_a_cohort_keeps_the_numbers_the_learner_knew(run_cli, cohort, monkeypatch, tmp_path: Path):
    """A learner's SQLite history (numbers 1 and 3: #2 was deleted) copied into a cohort where another learner
    already logged papers: the same numbers, with their tags and entries, and the next paper is #4."""
    from roadmap_cli import context

    assert run_cli("db", "status").exit_code == 0
    ada, bob = f"ada{cohort['n']}", f"bob{cohort['n']}"
    ada_url, bob_url = _add(run_cli, cohort, ada), _add(run_cli, cohort, bob)
    _as(monkeypatch, bob_url)
    for title in ("Bob one", "Bob two", "Bob three"):
        assert run_cli("paper", "log", title).exit_code == 0

    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("ROADMAP_HOME", str(tmp_path / "ada-home"))
    context.reset()
    for title in ("Ada one", "Ada two", "Ada three"):
        assert run_cli("paper", "log", title, "--tags", "mine").exit_code == 0
    assert run_cli("paper", "delete", "2", "--yes").exit_code == 0
    assert run_cli("log", "reproduction", "Ada three again", "--paper", "3").exit_code == 0
    copied = run_cli("db", "copy", "--to", ada_url)
    assert copied.exit_code == 0, copied

    _as(monkeypatch, ada_url)
    assert _numbers(run_cli) == [1, 3]
    three = _data(run_cli("paper", "show", "3", "--json"))
    assert (three["title"], three["tags"], three["status"]) == ("Ada three", ["mine"], "reproduced")
    assert [(e["id"], e["kind"]) for e in three["entries"]] == [(1, "reproduction")]
    assert _data(run_cli("log", "list", "--json"))["entries"][0]["paper_id"] == 3
    assert _data(run_cli("paper", "log", "Ada four", "--json"))["id"] == 4
    _as(monkeypatch, bob_url)
    assert _numbers(run_cli) == [1, 2, 3]
