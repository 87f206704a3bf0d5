"""Each learner's papers and log entries are numbered 1..n in their own sequence (issue 36 Why 5: "paper ids are
global across a cohort"; research/numbers.py, migration 12), and the research commands' newcomer findings.

On SQLite, two learners share one database through $ROADMAP_LEARNER (what a cohort's server does with logins:
tests/test_paper_numbers_postgres.py). Every paper command speaks the learner's number; migration 12 keeps the
ids an existing user knew; export/import keep the numbers; a plain-SQL writer that gives none gets one.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from paper_registry import fixture, serve_registry

FA2 = "2307.08691"


def _data(result) -> dict:
    assert result.exit_code == 0, result
    return result.json()["data"]


def _as(monkeypatch, learner: str) -> None:
    from roadmap_cli import context

    monkeypatch.setenv("ROADMAP_LEARNER", learner)
    context.reset()


def _numbers(run_cli) -> list[int]:
    return sorted(p["id"] for p in _data(run_cli("paper", "list", "--all", "--json"))["papers"])


# ---------------------------------------------------------------- per-learner numbers


def test_two_learners_each_number_their_papers_and_entries_from_one(run_cli, monkeypatch):
    _as(monkeypatch, "ada")
    for title in ("Ada one", "Ada two", "Ada three"):
        assert run_cli("paper", "log", title, "--no-fetch").exit_code == 0
    assert _data(run_cli("log", "experiment", "ada exp", "--json"))["id"] == 1
    _as(monkeypatch, "bob")
    logged = [_data(run_cli("paper", "log", title, "--json"))["id"] for title in ("Bob one", "Bob two")]
    assert logged == [1, 2]  # not 4 and 5: ada's papers are hers
    assert _data(run_cli("log", "experiment", "bob exp", "--paper", "2", "--json"))["id"] == 1
    assert _numbers(run_cli) == [1, 2]
    # Bob cannot reach ada's #3; the hint names his own numbers.
    missing = run_cli("paper", "show", "3")
    assert missing.exit_code == 2 and "unknown paper '3'" in missing.stderr, missing
    for args in (
        ("paper", "note", "3", "x"),
        ("paper", "read", "3"),
        ("paper", "edit", "3", "--rating", "1"),
        ("paper", "delete", "3", "--yes"),
        ("log", "reproduction", "r", "--paper", "3"),
        ("log", "edit", "2", "--note", "x"),
    ):
        refused = run_cli(*args)
        assert refused.exit_code == 2 and "unknown" in refused.stderr and refused.stderr.count("\n") == 1, (
            args,
            refused,
        )
    _as(monkeypatch, "ada")
    assert [p["title"] for p in _data(run_cli("paper", "list", "--json"))["papers"]] == [
        "Ada three",
        "Ada two",
        "Ada one",
    ]
    assert _data(run_cli("paper", "show", "3", "--json"))["title"] == "Ada three"
    assert _data(run_cli("log", "list", "--json"))["entries"][0]["paper_id"] is None


def test_every_paper_command_speaks_the_learners_number(run_cli, monkeypatch, tmp_path: Path):
    _as(monkeypatch, "someone-else")  # takes the low internal ids: the learner below must not see them
    for i in range(5):
        assert run_cli("paper", "log", f"Other {i}").exit_code == 0
    _as(monkeypatch, "ada")
    first = _data(run_cli("paper", "log", "Attention Is All You Need", "--tags", "attention", "--json"))
    second = _data(run_cli("paper", "add", FA2, "--no-fetch", "--status", "to-read", "--json"))
    assert (first["id"], second["id"]) == (1, 2)
    assert _data(run_cli("paper", "read", "2", "--json"))["status"] == "read"
    assert run_cli("paper", "note", "#2", "tiling").exit_code == 0
    assert _data(run_cli("paper", "edit", "2", "--rating", "5", "--tags", "kernels", "--json"))["rating"] == 5
    reproduction = _data(run_cli("log", "reproduction", "FA2 again", "--paper", "2", "--json"))
    assert (reproduction["id"], reproduction["paper_id"]) == (1, 2)
    shown = _data(run_cli("paper", "show", "2", "--json"))
    assert (shown["status"], shown["notes"], shown["tags"]) == ("reproduced", "tiling", ["kernels"])
    assert shown["entries"] == [{"id": 1, "kind": "reproduction", "title": "FA2 again", "on_date": shown["read_on"]}]
    assert [p["id"] for p in _data(run_cli("paper", "list", "--tag", "attention", "--json"))["papers"]] == [1]
    assert [p["id"] for p in json.loads(run_cli("paper", "list", "--json").stdout)["data"]["papers"]] == [2, 1]
    exported = json.loads(run_cli("paper", "export", "--format", "json").stdout)
    assert [p["id"] for p in exported] == [1, 2]
    assert run_cli("paper", "export", "--format", "csv").stdout.splitlines()[1].startswith("1,")
    # refresh takes the number too (offline here: it fails for that paper, and says which)
    refresh = run_cli("paper", "refresh", "2", "--json")
    assert refresh.exit_code == 6 and refresh.json()["data"]["papers"][0]["id"] == 2, refresh
    relog = run_cli("paper", "log", FA2, "--no-fetch")
    assert relog.exit_code == 2 and "already logged as #2" in relog.stderr, relog
    assert run_cli("paper", "delete", "1", "--yes").stdout.strip() == "deleted paper #1"
    assert _numbers(run_cli) == [2]
    assert _data(run_cli("paper", "log", "Third", "--json"))["id"] == 3  # one more than the highest


def test_a_number_freed_by_deleting_the_newest_paper_is_given_again_with_no_stale_reference(run_cli):
    assert run_cli("paper", "log", "One").exit_code == 0
    assert run_cli("paper", "log", "Two").exit_code == 0
    assert run_cli("log", "experiment", "on two", "--paper", "2").exit_code == 0
    assert run_cli("paper", "delete", "2", "--yes").exit_code == 0
    assert _data(run_cli("paper", "log", "Newcomer", "--json"))["id"] == 2
    entry = _data(run_cli("log", "list", "--json"))["entries"][0]
    assert entry["paper_id"] is None  # the entry forgot the deleted paper: it does not now cite the newcomer
    assert _data(run_cli("paper", "show", "2", "--json"))["entries"] == []


def test_a_plain_sql_writer_that_gives_no_number_gets_the_learners_next(run_cli, roadmap_home: Path):
    assert run_cli("paper", "log", "Logged").exit_code == 0
    learner = _data(run_cli("db", "status", "--json"))["learner"]
    con = sqlite3.connect(roadmap_home / "roadmap.db")
    with con:
        for title in ("Raw one", "Raw two"):
            con.execute(
                "INSERT INTO papers (title, title_key, status, added_on, learner) VALUES (?, ?, 'to-read', "
                "'2026-01-01', ?)",
                (title, title.lower(), learner),
            )
        con.execute(
            "INSERT INTO papers (title, title_key, status, added_on, learner) VALUES ('Theirs', 'theirs', "
            "'to-read', '2026-01-01', 'someone-else')"
        )
        con.execute(
            "INSERT INTO cadence_entries (kind, title, on_date, created_at, learner) VALUES ('blog', 'b', "
            "'2026-01-01', '2026-01-01T00:00:00+00:00', ?)",
            (learner,),
        )
        rows = con.execute("SELECT learner, number, title FROM papers ORDER BY id").fetchall()
    con.close()
    assert rows == [
        (learner, 1, "Logged"),
        (learner, 2, "Raw one"),
        (learner, 3, "Raw two"),
        ("someone-else", 1, "Theirs"),
    ]
    assert _data(run_cli("paper", "log", "After", "--json"))["id"] == 4
    assert [e["id"] for e in _data(run_cli("log", "list", "--json"))["entries"]] == [1]


def test_the_unique_index_refuses_a_second_paper_under_one_number(run_cli, roadmap_home: Path):
    assert run_cli("paper", "log", "One").exit_code == 0
    con = sqlite3.connect(roadmap_home / "roadmap.db")
    with pytest.raises(sqlite3.IntegrityError, match="papers.learner, papers.number"):
        with con:
            con.execute(
                "INSERT INTO papers (title, title_key, status, added_on, learner, number) "
                "SELECT 'Two', 'two', 'read', added_on, learner, 1 FROM papers"
            )
    con.close()


# ---------------------------------------------------------------- migration 12


def test_migration_keeps_the_ids_a_solo_user_knew(run_cli, roadmap_home: Path, monkeypatch):
    from roadmap_cli.store import migrations, open_store

    monkeypatch.setenv("ROADMAP_LEARNER", "solo")
    roadmap_home.mkdir(parents=True, exist_ok=True)
    store = open_store(roadmap_home, migrate=False)
    migrations.migrate(store, target=11)
    with store.connection() as conn:
        import sqlalchemy as sa

        for pid in (1, 2, 5):  # 3 and 4 were deleted long ago
            conn.execute(
                sa.text(
                    "INSERT INTO papers (id, title, title_key, status, added_on, learner) "
                    "VALUES (:i, :t, :k, 'read', '2026-01-01', 'solo')"
                ),
                {"i": pid, "t": f"Paper {pid}", "k": f"paper {pid}"},
            )
        conn.execute(sa.text("INSERT INTO paper_tags (paper_id, tag, learner) VALUES (5, 'kept', 'solo')"))
        conn.execute(
            sa.text(
                "INSERT INTO cadence_entries (id, kind, title, on_date, paper_id, created_at, learner) "
                "VALUES (7, 'reproduction', 'r', '2026-01-01', 5, '2026-01-01T00:00:00+00:00', 'solo')"
            )
        )
    store.engine.dispose()
    from roadmap_cli import context

    context.reset()
    assert _numbers(run_cli) == [1, 2, 5]
    five = _data(run_cli("paper", "show", "5", "--json"))
    assert (five["title"], five["tags"], five["entries"][0]["id"]) == ("Paper 5", ["kept"], 7)
    assert _data(run_cli("log", "list", "--json"))["entries"][0]["paper_id"] == 5
    assert _data(run_cli("paper", "log", "New", "--json"))["id"] == 6
    assert _data(run_cli("log", "blog", "post", "--json"))["id"] == 8


# ---------------------------------------------------------------- export / import


def test_export_import_round_trips_numbers_and_an_old_export_keeps_its_ids(run_cli, monkeypatch, tmp_path: Path):
    _as(monkeypatch, "ada")
    for title in ("A1", "A2"):
        assert run_cli("paper", "log", title).exit_code == 0
    _as(monkeypatch, "bob")
    for title in ("B1", "B2", "B3"):
        assert run_cli("paper", "log", title).exit_code == 0
    assert run_cli("log", "reproduction", "B2 again", "--paper", "2").exit_code == 0
    first = tmp_path / "first.json"
    assert run_cli("export", "-o", first).exit_code == 0
    doc = json.loads(first.read_text())
    assert sorted((p["learner"], p["number"]) for p in doc["tables"]["papers"]) == [
        ("ada", 1),
        ("ada", 2),
        ("bob", 1),
        ("bob", 2),
        ("bob", 3),
    ]

    monkeypatch.setenv("ROADMAP_HOME", str(tmp_path / "second"))
    _as(monkeypatch, "bob")
    assert run_cli("import", first).exit_code == 0
    assert _numbers(run_cli) == [1, 2, 3]
    assert _data(run_cli("paper", "show", "2", "--json"))["entries"][0]["kind"] == "reproduction"
    again = tmp_path / "again.json"
    assert run_cli("export", "-o", again).exit_code == 0
    assert json.loads(again.read_text())["tables"]["papers"] == doc["tables"]["papers"]

    # An export from before migration 12 has no numbers: each row's id is its number, as the migration does.
    old = json.loads(first.read_text())
    old["schema_version"] = 11
    for table in ("papers", "cadence_entries"):
        for row in old["tables"][table]:
            del row["number"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert run_cli("import", tmp_path / "old.json", "--replace").exit_code == 0
    bob_ids = sorted(p["id"] for p in doc["tables"]["papers"] if p["learner"] == "bob")
    assert _numbers(run_cli) == bob_ids

    # One number twice for one learner: refused with the JSON path, nothing written.
    clash = json.loads(first.read_text())
    clash["tables"]["papers"][1]["number"] = clash["tables"]["papers"][0]["number"]
    (tmp_path / "clash.json").write_text(json.dumps(clash))
    refused = run_cli("import", tmp_path / "clash.json", "--replace")
    assert refused.exit_code == 2 and "$.tables.papers[1].number" in refused.stderr, refused
    zero = json.loads(first.read_text())
    zero["tables"]["cadence_entries"][0]["number"] = 0
    (tmp_path / "zero.json").write_text(json.dumps(zero))
    refused = run_cli("import", tmp_path / "zero.json", "--replace")
    assert refused.exit_code == 2 and "$.tables.cadence_entries[0].number" in refused.stderr, refused
    assert _numbers(run_cli) == bob_ids


def test_bibtex_import_into_a_home_with_papers_numbers_on_from_the_highest(run_cli, tmp_path: Path):
    for title in ("Kept one", "Kept two"):
        assert run_cli("paper", "log", title).exit_code == 0
    bib = tmp_path / "in.bib"
    bib.write_text(
        "@misc{a, title = {Imported A}}\n@misc{b, title = {Imported B}, roadmap_status = {reproduced}}\n"
        "@misc{c, title = {Kept two}}\n"
    )
    data = _data(run_cli("paper", "import", bib, "--json"))
    assert [p["id"] for p in data["imported"]] == [3, 4]
    assert data["duplicates"] == [{"key": "c", "existing_id": 2, "reason": "same title"}]
    assert _numbers(run_cli) == [1, 2, 3, 4]
    assert _data(run_cli("paper", "show", "4", "--json"))["entries"][0]["id"] == 1  # its reproduction entry


# ---------------------------------------------------------------- newcomer findings (paper log/import/export, log delete)


@pytest.fixture
def registry(monkeypatch):
    reg, stop = serve_registry(monkeypatch)
    yield reg
    stop()


def test_the_by_hand_hint_of_a_failed_fetch_keeps_every_option_given(run_cli, tmp_path: Path):
    home = tmp_path / "other home"
    result = run_cli(
        "--home",
        home,
        "paper",
        "log",
        FA2,
        "--tags",
        "attention,kernels",
        "--stage",
        "1",
        "--status",
        "reproduced",
        "--rating",
        "4",
        "--note",
        "it's fast",
        "--date",
        "2026-01-05",
        "--authors",
        "T. Dao",
        "--year",
        "2023",
        "--force",
    )
    assert result.exit_code == 6, result
    line = result.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"error: arXiv {FA2}: ") and "--no-fetch" in line
    assert f"log it by hand: roadmap --home '{home}' paper log --title \"…\" --arxiv {FA2}" in line
    for part in (
        "--tags attention,kernels",
        "--stage 1",
        "--status reproduced",
        "--rating 4",
        "--note 'it'\"'\"'s fast'",
        "--date 2026-01-05",
        "--authors 'T. Dao'",
        "--year 2023",
        "--force",
    ):
        assert part in line, (part, line)


def test_a_typed_title_with_a_failed_fetch_names_the_new_paper_to_refresh(run_cli):
    assert run_cli("paper", "log", "Earlier").exit_code == 0
    result = run_cli("paper", "log", "FA2 by hand", "--arxiv", FA2)
    assert result.exit_code == 0 and "`roadmap paper refresh 2` fills it in later" in result.stderr, result


def test_relogging_a_logged_paper_is_refused_before_any_network_call(run_cli, registry):
    registry.serve(f"arxiv:{FA2}", fixture("arxiv-2307.08691.xml"))
    assert run_cli("paper", "log", FA2, "--no-fetch").exit_code == 0  # nothing in the fetch cache either
    for again in (
        (FA2,),
        (f"https://arxiv.org/abs/{FA2}v2",),
        ("--arxiv", FA2, "--tags", "x"),
        ("FA2 by another name", "--arxiv", FA2),
    ):
        refused = run_cli("paper", "log", *again)
        assert refused.exit_code == 2 and "already logged as #1 (same arXiv id)" in refused.stderr, refused
    assert registry.count() == 0  # refused from the log alone
    forced = run_cli("paper", "log", FA2, "--force", "--json")
    assert forced.exit_code == 0 and forced.json()["data"]["id"] == 2 and registry.count() == 1  # --force logs


def test_bibtex_export_keeps_the_latex_arxiv_gave(run_cli, registry):
    status, headers, body = fixture("arxiv-2307.08691.xml")
    text = body.decode()
    start, end = text.index("<summary>") + len("<summary>"), text.index("</summary>")
    abstract = r"We \emph{speed up} attention to $O(n^2)$ memory-bound work, 50% faster &amp; exact."
    text = text[:start] + abstract + text[end:]
    registry.serve(f"arxiv:{FA2}", (status, headers, text.encode()))
    assert run_cli("paper", "log", FA2).exit_code == 0
    assert run_cli("paper", "log", r"My notes on \emph{tiling} & 50% less", "--no-fetch").exit_code == 0
    bib = run_cli("paper", "export").stdout
    assert r"abstract = {We \emph{speed up} attention to $O(n^2)$ memory-bound work, 50\% faster \& exact.}" in bib
    assert "textbackslash" not in bib.split("My notes")[0]  # arXiv's LaTeX is not escaped a second time
    # What the learner typed is text, escaped so that it reads back the same.
    assert r"title = {My notes on \textbackslash{}emph\{tiling\} \& 50\% less}" in bib


def test_importing_a_file_of_only_bad_entries_exits_non_zero_in_one_line(run_cli, tmp_path: Path):
    bad = tmp_path / "bad.bib"
    bad.write_text("@misc{a, year = 2020}\n@misc{b, title = {T}, roadmap_rating = {9}}\n")
    result = run_cli("paper", "import", bad)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result
    assert (
        "nothing imported: none of the 2 entries" in result.stderr
        and "bad.bib:1:1: entry 'a' has no title" in result.stderr
    )
    empty = tmp_path / "empty.bib"
    empty.write_text("% only a comment\n")
    result = run_cli("paper", "import", empty, "--json")
    assert result.exit_code == 2 and "holds no BibTeX entries" in result.stderr, result
    assert _numbers(run_cli) == []
    # One good entry among bad ones still imports, exit 0 (the bad ones are reported).
    bad.write_text("@misc{a, year = 2020}\n@misc{ok, title = {Fine}}\n")
    assert _data(run_cli("paper", "import", bad, "--json"))["imported"][0]["id"] == 1


@pytest.mark.parametrize("command", [("log", "delete", "1"), ("paper", "delete", "1")])
def test_delete_without_a_terminal_needs_yes(run_cli, command):
    assert run_cli("log", "hours", "2").exit_code == 0
    assert run_cli("paper", "log", "Keep").exit_code == 0
    for piped in (None, "y\n", ""):  # nothing is read from a pipe, not even a "y"
        result = run_cli(*command, input=piped)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result
        assert f"run: roadmap {' '.join(command)} --yes" in result.stderr and "no terminal" in result.stderr
    home = os.environ["ROADMAP_HOME"]
    result = run_cli("--home", home, *command)  # the suggested command names the home it was given
    assert f"run: roadmap --home {home} {' '.join(command)} --yes" in result.stderr, result
    assert _data(run_cli("log", "list", "--json"))["total"] == 1 and _numbers(run_cli) == [1]
    assert run_cli(*command, "--yes").exit_code == 0
