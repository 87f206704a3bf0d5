"""The store under hostile conditions (issue 19 items 1, 4, 6-8; issue 12 items 4-5).

Each test reproduces a way the database used to be lost, corrupted, or
turned into a traceback: a process opening the store twice, someone else's
file at our path, an in-memory URL, a corrupted page, a read-only home, a
backup that cannot be written, two imports at once.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import multiprocessing as mp
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from roadmap_cli.errors import StoreError
from roadmap_cli.store import open_store

ROADMAP = [sys.executable, "-m", "roadmap_cli"]


def one_line_error(result) -> bool:
    return result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- 1. one process, many opens


def test_opening_the_store_never_opens_the_file_outside_sqlite(run_cli, roadmap_home, monkeypatch):
    """Closing any descriptor of a SQLite file drops the process's POSIX locks
    on it: nothing but SQLite may open roadmap.db."""
    assert run_cli("log", "hours", "1").exit_code == 0
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    for _ in range(3):
        assert run_cli("log", "hours", "1").exit_code == 0
        assert run_cli("status").exit_code == 0
    assert not [p for p in opened if Path(p).name.startswith("roadmap.db")]


CALLS_EACH = 100
LIBRARY_PROCESSES = 8


def _library_worker(home: str, worker: int, barrier) -> None:
    """`main([...])` called repeatedly in one process, as a library user would."""
    os.environ["ROADMAP_HOME"] = home
    os.environ["ROADMAP_LANG"] = "en"
    import io
    import contextlib

    from roadmap_cli.cli import main

    barrier.wait()
    for i in range(CALLS_EACH):
        args = ["log", "hours", "1", "--note", f"w{worker} c{i}"] if i % 2 == 0 else ["log", "list", "--json"]
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                main(args)
            except SystemExit as exc:
                if exc.code not in (0, None):
                    raise RuntimeError(f"worker {worker} call {i}: exit {exc.code}") from None


@pytest.mark.e2e  # a load test: 8 processes
@pytest.mark.slow  # ~100 s on the shared 2-core box; fails (2 of 8 workers crash) with the old header check
def test_library_style_calls_from_eight_processes_keep_the_database_intact(tmp_path: Path):
    home = tmp_path / "lib-home"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(LIBRARY_PROCESSES)
    procs = [ctx.Process(target=_library_worker, args=(str(home), w, barrier)) for w in range(LIBRARY_PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * LIBRARY_PROCESSES
    con = sqlite3.connect(home / "roadmap.db")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    notes = {r[0] for r in con.execute("SELECT note FROM cadence_entries")}
    assert len(notes) == LIBRARY_PROCESSES * CALLS_EACH // 2


# ---------------------------------------------------------------- 2. foreign files


def test_foreign_sqlite_database_is_refused_and_byte_identical(run_cli, roadmap_home: Path):
    roadmap_home.mkdir(parents=True)
    db = roadmap_home / "roadmap.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
    con.execute("INSERT INTO accounts VALUES (1, 'someone else')")
    con.commit()
    con.close()
    before = sha(db)
    for args in (["status"], ["log", "hours", "1"], ["export"], ["db", "status"]):
        result = run_cli(*args)
        assert result.exit_code == 3, (args, result)
        assert one_line_error(result) and str(db) in result.stderr and "other program" in result.stderr
    assert sha(db) == before
    assert sorted(p.name for p in roadmap_home.iterdir()) == ["roadmap.db"]


def test_foreign_schema_migrations_table_is_refused(roadmap_home: Path):
    roadmap_home.mkdir(parents=True)
    con = sqlite3.connect(roadmap_home / "roadmap.db")
    con.execute("CREATE TABLE schema_migrations (id TEXT, checksum TEXT)")  # say, another framework's
    con.commit()
    con.close()
    before = sha(roadmap_home / "roadmap.db")
    with pytest.raises(StoreError, match="not roadmap's"):
        open_store(roadmap_home)
    assert sha(roadmap_home / "roadmap.db") == before


def test_empty_file_is_initialised(run_cli, roadmap_home: Path):
    roadmap_home.mkdir(parents=True)
    (roadmap_home / "roadmap.db").write_bytes(b"")
    assert run_cli("log", "hours", "1").exit_code == 0
    assert run_cli("log", "list", "--json").json()["data"]


# ---------------------------------------------------------------- 3. DATABASE_URL


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"])
def test_in_memory_database_url_is_refused(run_cli, monkeypatch, url):
    monkeypatch.setenv("DATABASE_URL", url)
    result = run_cli("log", "hours", "1")
    assert result.exit_code == 3 and one_line_error(result) and "in-memory" in result.stderr, result


@pytest.mark.parametrize("url", ["garbage", "://", "nosuchdialect://x/y", "postgresql+nosuchdriver://u@h/db"])
def test_garbage_database_url_is_one_line(run_cli, monkeypatch, url):
    monkeypatch.setenv("DATABASE_URL", url)
    result = run_cli("status")
    assert result.exit_code == 3 and one_line_error(result), result


# ---------------------------------------------------------------- 4. corruption


def _corrupt_table_root(db: Path, table: str) -> None:
    """Overwrite the b-tree header of `table`'s root page (everything else intact)."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    con.close()
    with open(db, "r+b") as fh:
        fh.seek((root - 1) * page_size)
        fh.write(b"\xee" * 12)


def test_corrupted_page_gives_exit_3_with_restore_advice_and_refuses_writes(run_cli, roadmap_home: Path):
    for i in range(5):
        assert run_cli("paper", "add", f"A paper on attention number {i}").exit_code == 0
    assert run_cli("log", "hours", "2").exit_code == 0
    _corrupt_table_root(roadmap_home / "roadmap.db", "papers")
    for args in (["paper", "list"], ["export"], ["paper", "log", "1"], ["log", "hours", "1"], ["cadence"]):
        result = run_cli(*args)
        assert result.exit_code == 3, (args, result)
        assert one_line_error(result), (args, result)
        assert "corrupt" in result.stderr and "import" in result.stderr, (args, result)
    con = sqlite3.connect(roadmap_home / "roadmap.db")
    assert con.execute("SELECT count(*) FROM cadence_entries").fetchone()[0] == 1  # the refused write wrote nothing


def test_not_sqlite_is_refused_untouched(run_cli, roadmap_home: Path):
    roadmap_home.mkdir(parents=True)
    db = roadmap_home / "roadmap.db"
    db.write_bytes(b"hello, not a database\n" * 50)
    result = run_cli("status")
    assert result.exit_code == 3 and one_line_error(result) and "left untouched" in result.stderr
    assert db.read_bytes() == b"hello, not a database\n" * 50


# ---------------------------------------------------------------- 5. read-only home, backups


def _run_read_only(home: Path, script: str) -> subprocess.CompletedProcess:
    """Run a shell `script` with `home` read-only: a read-only bind mount when we
    are root (root ignores permission bits), else chmod."""
    env = dict(os.environ, ROADMAP_HOME=str(home), ROADMAP_LANG="en", R=" ".join(ROADMAP))
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("needs unshare to make a read-only mount as root")
        wrapped = f'mount --bind "$ROADMAP_HOME" "$ROADMAP_HOME" && mount -o remount,ro,bind "$ROADMAP_HOME" && {{ {script}; }}'
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c", wrapped], env=env, capture_output=True, text=True, timeout=120
        )
        if "mount:" in proc.stderr or "unshare:" in proc.stderr:
            pytest.skip(f"cannot make a read-only mount here: {proc.stderr.strip()[:200]}")
        return proc
    mode = home.stat().st_mode
    os.chmod(home / "roadmap.db", 0o444)
    os.chmod(home, 0o555)
    try:
        return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    finally:
        os.chmod(home, mode)
        os.chmod(home / "roadmap.db", 0o644)


def test_read_only_home_reads_work_and_writes_are_one_line(run_cli, roadmap_home: Path):
    assert run_cli("log", "hours", "3").exit_code == 0
    assert run_cli("paper", "add", "Attention Is All You Need").exit_code == 0
    before = sha(roadmap_home / "roadmap.db")
    script = (
        'for c in "status" "export" "paper list" "log list" "cadence" "db status"; do '
        '$R $c >/dev/null 2>/tmp/ro-err-$$ ; echo "read $c rc=$? $(cat /tmp/ro-err-$$)"; done; '
        '$R log hours 1; echo "write rc=$?"; rm -f /tmp/ro-err-$$'
    )
    proc = _run_read_only(roadmap_home, script)
    lines = proc.stdout.splitlines()
    reads = [line for line in lines if line.startswith("read ")]
    assert len(reads) == 6 and all(" rc=0" in line for line in reads), proc.stdout + proc.stderr
    assert "write rc=3" in proc.stdout, proc.stdout + proc.stderr
    assert "read-only" in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert sha(roadmap_home / "roadmap.db") == before


def _export_with(run_cli, home: Path, hours: str) -> dict:
    assert run_cli("--home", str(home), "log", "hours", hours).exit_code == 0
    return json.loads(run_cli("--home", str(home), "export").stdout)


def test_backups_path_that_is_a_file_refuses_the_import_and_keeps_the_data(run_cli, roadmap_home: Path, tmp_path: Path):
    original = _export_with(run_cli, roadmap_home, "2")
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_export_with(run_cli, tmp_path / "other-home", "5")), encoding="utf-8")
    (roadmap_home / "backups").write_text("not a folder")
    result = run_cli("import", str(other), "--replace")
    assert result.exit_code == 3 and one_line_error(result) and "backups" in result.stderr, result
    assert json.loads(run_cli("export").stdout) == original


def test_full_disk_during_backup_leaves_no_partial_backup_and_keeps_the_data(
    run_cli, roadmap_home: Path, tmp_path: Path
):
    # Control characters take 1 byte in SQLite and 6 in JSON ("\u0001"): the
    # backup is ~6x the note, so a file-size limit can stop it and not the database. The note is
    # large beside the fixed ~150 KiB the migrated schema itself takes (migration 5 rebuilds tables).
    assert run_cli("log", "hours", "1", "--note", "\x01" * 100_000).exit_code == 0
    original = json.loads(run_cli("export").stdout)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_export_with(run_cli, tmp_path / "other-home", "5")), encoding="utf-8")
    (roadmap_home / "backups").mkdir()
    con = sqlite3.connect(roadmap_home / "roadmap.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL keeps old page versions until then
    con.close()
    sizes = [p.stat().st_size for p in roadmap_home.glob("roadmap.db*")]
    backup_size = len(run_cli("export").stdout.encode())
    limit = (max(sizes) + backup_size) // 2  # the backup cannot be written; the database can grow a little
    assert max(sizes) + 16 * 1024 < limit < backup_size, (sizes, backup_size)
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        sys.argv = ["roadmap", "import", {str(other)!r}, "--replace"]
        from roadmap_cli.cli import main
        main()
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ROADMAP_HOME=str(roadmap_home)),
    )
    assert proc.returncode == 3, proc
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, (
        proc.stderr
    )
    assert list((roadmap_home / "backups").iterdir()) == []  # no 0-byte or partial backup left behind
    assert json.loads(run_cli("export").stdout) == original


def test_full_disk_on_a_write_is_one_line(run_cli, roadmap_home: Path):
    assert run_cli("log", "hours", "1").exit_code == 0
    code = textwrap.dedent("""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))  # no file may grow: the WAL cannot be written
        sys.argv = ["roadmap", "log", "hours", "2", "--note", "y" * 20000]
        from roadmap_cli.cli import main
        main()
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ROADMAP_HOME=str(roadmap_home)),
    )
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc
    assert run_cli("log", "list", "--json").json()["data"]["total"] == 1


@pytest.mark.slow
def test_two_imports_at_once_keep_both_originals_in_backups(run_cli, roadmap_home: Path, tmp_path: Path):
    exports = {}
    for name, hours in (("a", "5"), ("b", "7")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_export_with(run_cli, tmp_path / f"home-{name}", hours)), encoding="utf-8")
        exports[name] = path
    assert run_cli("log", "hours", "3").exit_code == 0
    for run in range(5):
        original = json.loads(run_cli("export").stdout)
        backups = roadmap_home / "backups"
        seen = set(backups.iterdir()) if backups.exists() else set()
        env = dict(os.environ, ROADMAP_HOME=str(roadmap_home))
        procs = [
            subprocess.Popen(
                [*ROADMAP, "import", str(exports[n]), "--replace"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in ("a", "b")
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        new = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(set(backups.iterdir()) - seen)]
        assert len(new) == 2, run
        final = json.loads(run_cli("export").stdout)
        hours = {json.loads(exports[n].read_text())["tables"]["cadence_entries"][0]["hours"]: n for n in ("a", "b")}
        first = hours[[h for h in hours if h != final["tables"]["cadence_entries"][0]["hours"]][0]]
        # Each import backed up what it replaced: the original, and the one imported first.
        backed_up_hours = sorted(b["tables"]["cadence_entries"][0]["hours"] for b in new)
        expected = sorted(
            [
                original["tables"]["cadence_entries"][0]["hours"],
                json.loads(exports[first].read_text())["tables"]["cadence_entries"][0]["hours"],
            ]
        )
        assert backed_up_hours == expected, run
        assert original["tables"] in [b["tables"] for b in new]


def test_database_url_holding_another_programs_tables_is_refused(run_cli, monkeypatch, tmp_path: Path):
    """The server path (PostgreSQL in production) checks through the same
    inspector; a SQLite URL exercises it here without a server."""
    foreign = tmp_path / "someone-elses.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    con.commit()
    con.close()
    before = sha(foreign)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{foreign}")
    result = run_cli("log", "hours", "1")
    assert result.exit_code == 3 and one_line_error(result) and "other program" in result.stderr, result
    assert sha(foreign) == before


@pytest.mark.parametrize(
    "url",
    [
        "postgres://ada:pw@127.0.0.1:1/roadmap",
        "postgresql://ada:pw@127.0.0.1:1/roadmap",
        "postgres+psycopg://ada:pw@127.0.0.1:1/roadmap",
    ],
)
def test_postgres_urls_as_hosts_print_them_use_psycopg(url):
    from roadmap_cli.store.engine import _engine_from_url

    engine, where = _engine_from_url(url)
    try:
        assert engine.url.drivername == "postgresql+psycopg" and "pw" not in where
    finally:
        engine.dispose()


def test_postgres_url_with_another_driver_is_refused_by_name():
    from roadmap_cli.errors import StoreError
    from roadmap_cli.store.engine import _engine_from_url

    with pytest.raises(StoreError, match="uses the psycopg2 driver; roadmap speaks psycopg 3"):
        _engine_from_url("postgres+psycopg2://ada@127.0.0.1:1/roadmap")


def test_postgres_scheme_reaches_the_server_not_a_plugin_error(run_cli, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://ada@127.0.0.1:1/roadmap")  # nothing listens on port 1
    monkeypatch.setenv("ROADMAP_PG_CONNECT_TIMEOUT", "2")
    result = run_cli("status")
    assert result.exit_code == 3 and one_line_error(result), result
    assert "Can't load plugin" not in result.stderr and "127.0.0.1" in result.stderr, result.stderr
