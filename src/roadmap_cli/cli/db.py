"""Database commands: db status, export, import."""

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of tables.")]

# A learner's export is a few MB at most; this bounds memory for a wrong file.
MAX_IMPORT_BYTES = 256 * 2**20

db_app = typer.Typer(help="The progress database: where it is and its schema version.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
    app.command("export")(export)
    app.command("import")(import_)


@db_app.command("status")
def db_status(as_json: JsonOpt = False) -> None:
    """Backend, server version, schema version, pending migrations and row counts."""
    from roadmap_cli.formats.output import emit
    from roadmap_cli.paths import resolve_home
    from roadmap_cli.store import migrations, open_store
    from roadmap_cli.portable.archive import row_counts

    ctx = context.current()
    home = resolve_home(ctx.home_option)
    # Open without migrating first, so pending migrations can be shown; then migrate.
    store = open_store(home, migrate=False)
    pending = migrations.pending(store)
    applied = migrations.migrate(store)
    with store.connection() as conn:
        version = migrations.applied_version(conn)
    size = store.path.stat().st_size if store.path and store.path.exists() else None
    if store.path is None:
        from roadmap_cli.store.server import server_facts

        facts = server_facts(store)
        if facts.get("backend") == "postgresql":
            from roadmap_cli.store.roles import session

            with store.engine.connect() as conn:
                who = session(conn)
                conn.rollback()
            # A learner's own login is scoped to its rows by the server; the owner (instructor) is not.
            facts["login"] = {"role": who.role, "scoped": not who.instructor}
    else:
        import sqlite3

        facts = {"backend": "sqlite", "server_version": sqlite3.sqlite_version, "driver": "sqlite3"}
    data = {
        "home": str(home),
        "database": str(store.path or store.url),
        **facts,
        "learner": store.learner,
        "size_bytes": size,
        "schema_version": version,
        "latest_version": migrations.LATEST,
        "pending_before_open": pending,
        "applied_now": applied,
        "rows": row_counts(store),
    }

    def render(console):
        console.print(f"[bold]database[/]        {data['database']}")
        console.print(f"backend         {data['backend']} {data['server_version']} ({data['driver']})")
        console.print(f"learner         {data['learner']}")
        if data.get("login"):
            login = data["login"]
            scope = (
                "(a learner's role: the server lets it write only its own rows)"
                if login["scoped"]
                else "(owner: not scoped by row security)"
            )
            console.print(f"login           {login['role']} {scope}")
        console.print(f"schema version  {version} (latest {migrations.LATEST})")
        if applied:
            console.print(f"migrated now    {', '.join(applied)}")
        else:
            console.print("pending         none")
        if size is not None:
            console.print(f"size            {size / 1024:.0f} KiB")
        for table, n in sorted(data["rows"].items()):
            console.print(f"  {table:<22} {n}")

    emit("db status", data, as_json=as_json, render=render)


@db_app.command("copy")
def db_copy(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="The database to copy into (postgresql+psycopg://user@host/db or sqlite:////path); it must hold no data (a learner's cohort login: none of theirs).",
        ),
    ],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="To a learner's cohort login only: replace your rows there (a backup export of them is saved first).",
        ),
    ] = False,
) -> None:
    """Copy every row of this database into another one, with a progress bar. To a learner's cohort login: that learner's own rows."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from roadmap_cli.formats.output import err_console
    from roadmap_cli.store import open_store
    from roadmap_cli.portable.dbcopy import copy_database

    ctx = context.current()
    source = open_store(ctx.home)
    # On a terminal only: a log or a pipe gets the summary line, not bar frames.
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    ) as bar:
        task = bar.add_task("copying", total=None)

        def advance(table: str, done: int, total: int) -> None:
            bar.update(task, description=f"copying {table}", completed=done, total=total)

        result = copy_database(source, to, home=ctx.home, progress=advance, replace=replace)
    rows = sum(result["rows"].values())
    mine = f" as {result['learner']}" if result.get("learner") else ""
    typer.echo(f"copied {rows} rows in {len(result['rows'])} tables to {result['target']}{mine}")
    for note in result["notes"]:
        typer.echo(note)


def export(
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Write all your progress as JSON (restore it with `roadmap import`)."""
    import os
    import sys
    import tempfile
    from pathlib import Path

    from roadmap_cli.errors import UserError
    from roadmap_cli.store import open_store
    from roadmap_cli.portable.archive import write_export

    # Without the malformed-row check: export is how such a row gets repaired.
    store = open_store(context.current().home)
    if output is None:
        write_export(store, sys.stdout)
        sys.stdout.flush()
        return
    path = Path(output).expanduser()
    if path.exists():
        raise UserError(f"{path} exists; choose another file (exports never overwrite)")
    # Written beside the target and linked into place only when complete: a
    # failed export leaves no half file, and a file created meanwhile is not overwritten.
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write_export(store, fh)
        os.link(tmp, path)
    except FileExistsError:
        raise UserError(f"{path} exists; choose another file (exports never overwrite)") from None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    typer.echo(f"exported to {path}")


def import_(
    source: Annotated[str, typer.Argument(help="A file written by `roadmap export` (- for stdin).")],
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace existing data (a backup export is saved first).")
    ] = False,
) -> None:
    """Restore progress from a JSON export."""
    import json
    import sys
    from pathlib import Path

    from roadmap_cli.errors import UserError
    from roadmap_cli.portable.archive import import_data, validate_import

    from roadmap_cli.errors import RoadmapError
    from roadmap_cli.labs.spec import lab_ids
    from roadmap_cli.store import open_store

    ctx = context.current()
    try:
        if source == "-":
            text = sys.stdin.read(MAX_IMPORT_BYTES + 1)
        else:
            path = Path(source).expanduser()
            if path.is_file() and path.stat().st_size > MAX_IMPORT_BYTES:
                raise UserError(f"{source} is larger than {MAX_IMPORT_BYTES // 2**20} MB; not a roadmap export")
            text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {source}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{source} is not UTF-8 text (expected the JSON written by `roadmap export`)") from None
    if len(text) > MAX_IMPORT_BYTES:
        raise UserError(f"{source} is larger than {MAX_IMPORT_BYTES // 2**20} MB; not a roadmap export")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:  # e.g. 100,000 nested [ : the C decoder gives up
        raise UserError(f"{source}: JSON nested too deeply; not a roadmap export") from None

    def stages():  # only loaded when a row names a stage
        try:
            return {stage.number for stage in ctx.curriculum().stages}
        except RoadmapError:
            return None  # a broken curriculum is reported by the commands that use it

    validate_import(data, lab_ids=set(lab_ids()), stages=stages)  # before the store is opened
    store = open_store(ctx.home)
    notes: list[str] = []
    counts = import_data(store, data, home=ctx.home, replace=replace, validated=True, notes=notes)
    typer.echo(f"imported {sum(counts.values())} rows into {len(counts)} tables")
    for note in notes:  # rows a learner's cohort login may not write, left out (archive.insert_own_history)
        typer.echo(note)
