"""Research log commands: `paper ...`; `log ...` and `cadence` live in
research_log.py, the option types and helpers both use in research_options.py.

Thin: parse the options, call one function of `roadmap_cli.research`, render.
Services (and sqlmodel) are imported inside the commands.
"""

# No `from __future__ import annotations` here: typer reads every command's
# signature at startup, and string annotations would cost an eval() each.
from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context
from roadmap_cli.cli.research_options import (
    DateOpt,
    JsonOpt,
    NewDateOpt,
    StageOpt,
    YesOpt,
    check_stage,
    confirm_delete,
    parse_date,
    emit_result,
    known_stages,
    root_options,
    suggested_command,
    today_local,
)

paper_app = typer.Typer(
    name="paper",
    help="The paper log: log, list, read, annotate, import/export BibTeX, suggestions.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    from roadmap_cli.cli.research_log import cadence, log_app

    app.add_typer(paper_app)
    app.add_typer(log_app)
    app.command("cadence")(cadence)


# --- paper -------------------------------------------------------------------


def paper_log(
    title_or_id: Annotated[
        Optional[str],
        typer.Argument(
            metavar="[TITLE | ID]",
            help="The paper's title; or, alone, its arXiv id, DOI or link (2307.08691, https://arxiv.org/abs/2307.08691, "
            "10.1145/3600006.3613165): the title, authors, year, venue and abstract are then fetched.",
        ),
    ] = None,
    title: Annotated[
        Optional[str], typer.Option("--title", help="The title, when the argument is an id (or to log by hand).")
    ] = None,
    arxiv: Annotated[
        Optional[str], typer.Option("--arxiv", help="arXiv id or abs/pdf URL (2307.08691, hep-th/9901001, arXiv:..v2).")
    ] = None,
    doi: Annotated[Optional[str], typer.Option("--doi", help="DOI, bare or as a doi.org URL.")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="A link to the paper.")] = None,
    authors: Annotated[Optional[str], typer.Option("--authors", help="Authors, comma separated.")] = None,
    year: Annotated[Optional[int], typer.Option("--year", help="Publication year.")] = None,
    tags: Annotated[Optional[str], typer.Option("--tags", help="Tags, comma separated.")] = None,
    stage: StageOpt = None,
    status: Annotated[str, typer.Option("--status", help="to-read, reading, read or reproduced.")] = "read",
    rating: Annotated[Optional[int], typer.Option("--rating", help="Your rating, 1 to 5.")] = None,
    note: Annotated[Optional[str], typer.Option("--note", help="A first note.")] = None,
    date: Annotated[
        Optional[str],
        typer.Option(
            "--date",
            help="When you read it (read/reproduced only): YYYY-MM-DD, today or yesterday; default today; no future dates.",
        ),
    ] = None,
    no_fetch: Annotated[
        bool,
        typer.Option(
            "--no-fetch", help="Do not ask arXiv/Crossref for the metadata (offline); `paper refresh` can later."
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Log it even if the same paper is already logged.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Log a paper (default: read today), by title or by its arXiv id / DOI.

    With an id, the metadata is fetched (arXiv's API, Crossref, DataCite) and
    cached in the data home; what you type wins over what is fetched.
    Refuses a paper already logged, unless --force."""
    from roadmap_cli.research.lookup import plan_log, split_title_or_id
    from roadmap_cli.research.papers import PaperInput, log_paper, normalize_tags, refuse_logged
    from roadmap_cli.cli.research_render import paper_detail

    check_stage(stage)
    typed_title, arxiv, doi = split_title_or_id(title_or_id, title=title, arxiv=arxiv, doi=doi)
    inp = PaperInput(
        title=typed_title or "",
        authors=authors,
        year=year,
        arxiv=arxiv,
        doi=doi,
        url=url,
        tags=normalize_tags(tags),
        stage=stage,
        status=status,
        rating=rating,
        note=note,
        read_on=parse_date(date),
    )
    store = context.current().store()
    if not force:
        refuse_logged(store, inp)  # a paper already logged is refused before any network call
    plan = plan_log(
        inp, fetch_metadata=not no_fetch, fetcher_factory=_fetcher, force=force, root_options=root_options()
    )
    paper = log_paper(store, plan.inp, today=today_local(), force=force)
    if plan.notice:
        _notice(f"{plan.notice}; `{suggested_command('paper', 'refresh', str(paper['id']))}` fills it in later")
    emit_result("paper log", paper, as_json, lambda p, c: (c.print(f"logged paper #{p['id']}"), paper_detail(p, c)))


def _fetcher():
    """One metadata fetcher per command, caching under the data home."""
    from roadmap_cli.research.fetch import Fetcher

    return Fetcher(context.current().home / "cache" / "papers", today=today_local())


def _notice(text: str) -> None:
    from rich.markup import escape

    from roadmap_cli.formats.output import err_console

    err_console.print(f"[yellow]note:[/] {escape(text)}", soft_wrap=True)


paper_app.command("log")(paper_log)
paper_app.command("add", help="Alias of `paper log`.")(paper_log)


@paper_app.command("list")
def paper_list(
    status: Annotated[Optional[str], typer.Option("--status", help="Only this status.")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", help="Only papers with this tag.")] = None,
    stage: Annotated[Optional[int], typer.Option("--stage", help="Only papers tied to this stage number.")] = None,
    since: Annotated[
        Optional[str], typer.Option("--since", help="Read (or added, if unread) on or after YYYY-MM-DD.")
    ] = None,
    search: Annotated[
        Optional[str], typer.Option("--search", "-s", help="Text in title, authors, notes, ids or tags.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Show at most N papers (newest first).")] = 50,
    show_all: Annotated[bool, typer.Option("--all", help="Show every matching paper.")] = False,
    as_json: JsonOpt = False,
    pretty: Annotated[
        bool, typer.Option("--pretty", help="Indented JSON (implies --json; without it the JSON is compact, one line).")
    ] = False,
) -> None:
    """List logged papers, newest first, with filters."""
    from roadmap_cli.research.papers_query import PaperFilter, list_papers
    from roadmap_cli.cli.research_render import paper_table

    check_stage(stage)
    flt = PaperFilter(
        status=status, tag=tag, stage=stage, since=parse_date(since, "since date", allow_future=True), text=search
    )
    page = None if show_all else max(limit, 0)
    if as_json or pretty:
        _stream_paper_list(flt, page, pretty=pretty)
        return
    emit_result("paper list", list_papers(context.current().store(), flt, limit=page), False, paper_table)


def _stream_paper_list(flt, limit: Optional[int], *, pretty: bool) -> None:
    """`paper list --json`: the envelope written row by row as the rows are
    read (constant memory, whatever the size of the log)."""
    import os
    import sys

    from roadmap_cli.formats.jsonstream import EncodedRows, Rows, write_envelope
    from roadmap_cli.research.papers_query import stream_papers

    # Compact rows come ready-made as JSON text from SQLite; --pretty re-encodes dicts.
    with stream_papers(context.current().store(), flt, limit=limit, as_json_text=not pretty) as (counts, rows):
        try:
            papers = Rows(rows) if pretty else EncodedRows(rows)
            write_envelope(sys.stdout, "paper list", {**counts, "papers": papers}, pretty=pretty)
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: the reader has seen enough; not an error
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())


@paper_app.command("show")
def paper_show(
    paper_id: Annotated[str, typer.Argument(help="Paper id (see `paper list`).")],
    as_json: JsonOpt = False,
) -> None:
    """Show one paper: ids, status, tags, notes and the entries that cite it."""
    from roadmap_cli.research.papers import get_paper, parse_paper_id
    from roadmap_cli.cli.research_render import paper_detail

    emit_result("paper show", get_paper(context.current().store(), parse_paper_id(paper_id)), as_json, paper_detail)


@paper_app.command("read")
def paper_read(
    paper_id: Annotated[str, typer.Argument(help="Paper id.")],
    date: DateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark a paper read (today or --date); it counts for that week's papers."""
    from roadmap_cli.research.papers import mark_read, parse_paper_id

    today = today_local()
    paper = mark_read(context.current().store(), parse_paper_id(paper_id), on=parse_date(date) or today, today=today)
    emit_result(
        "paper read", paper, as_json, lambda p, c: c.print(f"#{p['id']} {p['title']}: {p['status']} on {p['read_on']}")
    )


@paper_app.command("note")
def paper_note(
    paper_id: Annotated[str, typer.Argument(help="Paper id.")],
    note: Annotated[Optional[str], typer.Argument(metavar="[TEXT]", help="Append this note (like --text).")] = None,
    text: Annotated[
        Optional[str],
        typer.Option("--text", help="Append this note (without TEXT or --text, $EDITOR opens the notes)."),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="With TEXT/--text: replace the notes instead of appending.")
    ] = False,
) -> None:
    """Add to a paper's notes (`roadmap paper note 5 "text"`, or --text), or edit them in $EDITOR."""
    from roadmap_cli.errors import UserError
    from roadmap_cli.research.papers import current_notes, parse_paper_id, set_notes

    if note is not None and text is not None:
        raise UserError("give the note once: as TEXT or with --text, not both")
    text = note if note is not None else text
    store, pid = context.current().store(), parse_paper_id(paper_id)
    if text is None:
        current = current_notes(store, pid)
        edited = _edit_in_editor(current)
        if edited.strip() == current.strip():
            typer.echo(f"notes of #{pid} unchanged")
            return
        set_notes(store, pid, edited, append=False)
    else:
        set_notes(store, pid, text, append=not replace)
    typer.echo(f"notes of #{pid} saved")


def _edit_in_editor(text: str) -> str:
    """Open `text` in $VISUAL/$EDITOR and return what was saved."""
    import os
    import shlex
    import subprocess
    import tempfile
    from pathlib import Path

    from roadmap_cli.errors import UserError

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise UserError("no editor: set $EDITOR (or pass --text)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "notes.md"
        path.write_text(text, encoding="utf-8")
        try:
            code = subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:
            raise UserError(f"cannot run editor {editor!r}: {exc.strerror or exc}") from None
        if code != 0:
            raise UserError(f"editor {editor!r} exited with status {code}; notes not changed")
        return path.read_text(encoding="utf-8")


@paper_app.command("edit")
def paper_edit(
    paper_id: Annotated[str, typer.Argument(help="Paper id.")],
    title: Annotated[Optional[str], typer.Option("--title", help="New title.")] = None,
    arxiv: Annotated[Optional[str], typer.Option("--arxiv", help="arXiv id or URL ('' clears it).")] = None,
    doi: Annotated[Optional[str], typer.Option("--doi", help="DOI ('' clears it).")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="Link ('' clears it).")] = None,
    authors: Annotated[Optional[str], typer.Option("--authors", help="Authors, comma separated.")] = None,
    year: Annotated[Optional[int], typer.Option("--year", help="Publication year.")] = None,
    tags: Annotated[Optional[str], typer.Option("--tags", help="Replace the tags (comma separated).")] = None,
    stage: StageOpt = None,
    status: Annotated[Optional[str], typer.Option("--status", help="to-read, reading, read or reproduced.")] = None,
    rating: Annotated[Optional[int], typer.Option("--rating", help="1 to 5.")] = None,
    date: NewDateOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Allow ids/title that another logged paper has.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Change a paper's fields (only those given)."""
    from roadmap_cli.research.papers import edit_paper, parse_paper_id
    from roadmap_cli.cli.research_render import paper_detail

    check_stage(stage)
    given = {
        "title": title,
        "arxiv": arxiv,
        "doi": doi,
        "url": url,
        "authors": authors,
        "year": year,
        "tags": tags,
        "stage": stage,
        "status": status,
        "rating": rating,
        "read_on": parse_date(date),
    }
    changes = {k: v for k, v in given.items() if v is not None}
    paper = edit_paper(context.current().store(), parse_paper_id(paper_id), changes, today=today_local(), force=force)
    emit_result("paper edit", paper, as_json, paper_detail)


@paper_app.command("delete")
def paper_delete(paper_id: Annotated[str, typer.Argument(help="Paper id.")], yes: YesOpt = False) -> None:
    """Delete a paper (asks first unless --yes)."""
    from roadmap_cli.research.papers import delete_paper, get_paper, parse_paper_id

    store, pid = context.current().store(), parse_paper_id(paper_id)
    paper = get_paper(store, pid)
    confirm_delete(f"delete paper #{pid} {paper['title']!r}?", yes=yes, command=("paper", "delete", str(pid)))
    delete_paper(store, pid)
    typer.echo(f"deleted paper #{pid}")


@paper_app.command("refresh")
def paper_refresh(
    paper_ids: Annotated[Optional[list[str]], typer.Argument(metavar="[ID]...", help="Paper ids to refresh.")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every logged paper with an arXiv id or DOI.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fill in missing metadata (authors, year, venue, abstract, links) from
    arXiv / Crossref / DataCite; never overwrites what you typed. Answers are
    cached in the data home, so a paper is fetched once."""
    from roadmap_cli.errors import NetworkError, UserError
    from roadmap_cli.research.lookup import refresh_papers
    from roadmap_cli.research.papers import parse_paper_id
    from roadmap_cli.cli.research_render import refresh_report

    if bool(paper_ids) == every:
        raise UserError("give paper ids, or --all (not both)")
    ids = None if every else [parse_paper_id(p) for p in paper_ids or []]
    with _refresh_progress(enabled=not as_json) as on_step:
        result = refresh_papers(context.current().store(), ids, _fetcher(), today=today_local(), on_step=on_step)
    emit_result("paper refresh", result, as_json, refresh_report)
    if result["failed"]:
        raise NetworkError(
            f"{result['failed']} of {len(result['papers'])} papers could not be refreshed (see above); "
            f"run the command again later"
        )


def _refresh_progress(*, enabled: bool):
    """A progress bar on stderr while papers are looked up (each may take seconds)."""
    import contextlib

    from roadmap_cli.formats.output import err_console

    if not enabled or not err_console.is_terminal:
        return contextlib.nullcontext(lambda row: None)

    @contextlib.contextmanager
    def bar():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(
            TextColumn("looking up papers"), BarColumn(), MofNCompleteColumn(), console=err_console, transient=True
        ) as progress:
            task = progress.add_task("refresh", total=None)
            yield lambda row: progress.advance(task)

    return bar()


@paper_app.command("import")
def paper_import(
    file: Annotated[str, typer.Argument(help="A .bib file.")],
    status: Annotated[
        str, typer.Option("--status", help="Status for entries that carry none (to-read: importing is not reading).")
    ] = "to-read",
    tags: Annotated[Optional[str], typer.Option("--tags", help="Tags added to every imported paper.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Import duplicates too.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import a BibTeX file; malformed entries are reported (file:line:col) and skipped."""
    from pathlib import Path

    from roadmap_cli.errors import UserError
    from roadmap_cli.cli.research_render import import_report
    from roadmap_cli.research.papers_transfer import import_bibtex

    path = Path(file).expanduser()
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    result = import_bibtex(
        context.current().store(),
        text,
        source=str(file),
        today=today_local(),
        default_status=status,
        tags=[tags] if tags else None,
        force=force,
        stages=known_stages(),
    )
    if not result["imported"] and not result["duplicates"]:  # nothing came of the file: say so, exit 2
        problems = result["problems"]
        if problems:
            first = problems[0].removesuffix(" (skipped)")
            count = f"none of the {len(problems)} entries" if len(problems) > 1 else "the one entry"
            raise UserError(f"nothing imported: {count} of {file} could be read; the first: {first}")
        raise UserError(f"nothing imported: {file} holds no BibTeX entries (@article{{key, title = {{...}}}}, ...)")
    emit_result("paper import", result, as_json, import_report)


@paper_app.command("export")
def paper_export(
    fmt: Annotated[str, typer.Option("--format", help="bibtex, json or csv.")] = "bibtex",
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="With --output: overwrite the file if it exists.")] = False,
) -> None:
    """Export the whole paper log as BibTeX, JSON or CSV."""
    from pathlib import Path

    from roadmap_cli.errors import UserError
    from roadmap_cli.research.papers_transfer import export_papers

    text = export_papers(context.current().store(), fmt)
    if output:
        path = Path(output).expanduser()
        if path.exists() and not force:
            raise UserError(f"{path} exists; choose another file or pass --force to overwrite it")
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
        typer.echo(f"wrote {output}", err=True)
    else:
        typer.echo(text, nl=False)


@paper_app.command("suggest")
def paper_suggest(
    stage: Annotated[
        Optional[int],
        typer.Option("--stage", help="Treat this as the current stage (default: your first unfinished stage)."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="How many suggestions.")] = 10,
    kind: Annotated[
        Optional[str], typer.Option("--kind", help="Only this kind of reading: paper, book, article, system.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Unread papers from the curriculum's reading list, current stage first."""
    from roadmap_cli.research.papers_query import current_stage_number, suggest
    from roadmap_cli.cli.research_render import suggestions

    ctx = context.current()
    curriculum = ctx.curriculum()
    check_stage(stage)
    current = stage if stage is not None else current_stage_number(ctx.store(), curriculum)
    result = suggest(ctx.store(), curriculum.reading_list, current, limit=max(limit, 0), kind=kind)
    emit_result("paper suggest", result, as_json, suggestions)
