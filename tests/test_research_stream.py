"""Streamed JSON (issue 13 item 4): `paper list --json` and `jsonstream`.

A streamed document must be byte for byte what `json.dumps` of the whole
document gives (compact, or indented as `output.emit` prints), be written in
constant memory, and never hold the database's write lock while it is read.
"""

from __future__ import annotations

import io
import json
import sqlite3
import tracemalloc
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roadmap_cli.formats import jsonstream
from roadmap_cli.formats.jsonstream import EncodedRows, Rows, write_envelope, write_json

COMPACT = {"ensure_ascii": False, "separators": (",", ":")}
json_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | json_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=12,
)


def _written(doc, **options) -> str:
    out = io.StringIO()
    write_json(out, doc, **options)
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(json_values, max_size=7),
    head=st.dictionaries(json_text, json_values, max_size=3),
    indent=st.sampled_from([None, 2]),
    sort_keys=st.booleans(),
)
def test_streamed_documents_are_the_bytes_json_dumps_gives(rows, head, indent, sort_keys):
    doc = {**head, "a": {"rows": Rows(iter(rows)), "n": len(rows)}, "more": [1, Rows(iter(rows)), {"x": Rows([])}]}
    plain = {**head, "a": {"rows": rows, "n": len(rows)}, "more": [1, rows, {"x": []}]}
    separators = (",", ":") if indent is None else (",", ": ")
    expected = json.dumps(plain, ensure_ascii=False, indent=indent, sort_keys=sort_keys, separators=separators) + "\n"
    batch, jsonstream.BATCH = jsonstream.BATCH, 3  # several batches per list
    try:
        assert _written(doc, indent=indent, sort_keys=sort_keys) == expected
    finally:
        jsonstream.BATCH = batch


def test_encoded_rows_join_as_they_are_and_refuse_indentation():
    rows = [{"a": 1, "b": ["x", None]}, {"c": 'é\n"q"'}]
    doc = {"rows": EncodedRows(json.dumps(r, **COMPACT) for r in rows)}
    assert _written(doc) == json.dumps({"rows": rows}, **COMPACT) + "\n"
    with pytest.raises(ValueError):
        _written({"rows": EncodedRows(["{}"])}, indent=2)


def test_export_shaped_documents_stream_to_the_same_bytes(run_cli, roadmap_home: Path):
    """The helper `roadmap export` can call: every table's rows as `Rows`,
    written with indent=2 and sorted keys, equals `archive.dumps` today."""
    from roadmap_cli import context
    from roadmap_cli.portable.archive import dumps, export_data

    run_cli("paper", "log", 'A "quoted" paper', "--tags", "x,y", "--note", "line 1\nline 2")
    run_cli("log", "hours", "2")
    built = export_data(context.current().store())
    streamed = {**built, "tables": {name: Rows(iter(rows)) for name, rows in built["tables"].items()}}
    assert _written(streamed, indent=2, sort_keys=True) == dumps(built)


# --- paper list --json -------------------------------------------------------------------------

HOSTILE = [
    'Quote " and backslash \\ and slash /',
    "Unicode: 漢字 ✓ 😀 café",
    "Tabs\tand\nnewlines\r\x01\x1f\x7f",
    "\u2028line separator\u2029",
    "[bold]markup[/bold] & <html>",
]


def _seed_hostile(store) -> None:
    """Papers with every awkward character, written straight to the table
    (the CLI would clean some of them; a database imported from elsewhere may not)."""
    with store.connection() as conn:
        for i, text in enumerate(HOSTILE, start=1):
            conn.exec_driver_sql(
                "INSERT INTO papers (id, title, title_key, authors, year, arxiv_id, arxiv_version, doi, url, stage,"
                " status, read_on, added_on, rating, notes, bibtex_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    i,
                    text,
                    f"k{i}",
                    text if i % 2 else None,
                    2020 + i,
                    f"2301.0000{i}" if i < 4 else None,
                    i if i < 3 else None,
                    f"10.1/{text}" if i == 3 else None,
                    text if i == 5 else None,
                    i if i % 2 else None,
                    "read" if i % 2 else "to-read",
                    f"2024-01-0{i}" if i % 2 else None,
                    f"2024-02-0{i}",
                    i if i < 5 else None,
                    "n" if i == 2 else None,
                    text if i == 4 else None,
                ),
            )
            for tag in ("zeta", "alpha", "ümlaut")[: i % 4]:
                conn.exec_driver_sql("INSERT INTO paper_tags (paper_id, tag) VALUES (?, ?)", (i, tag))


@pytest.mark.parametrize(
    "args",
    [
        ["--all"],
        [],
        ["--limit", "2"],
        ["--all", "--tag", "alpha"],
        ["--all", "--status", "read"],
        ["--all", "--search", "nothing matches this"],
    ],
)
def test_paper_list_json_is_the_envelope_compact_or_as_emit_printed_it(run_cli, args):
    from roadmap_cli import context
    from roadmap_cli.formats.output import envelope
    from roadmap_cli.research.papers_query import PaperFilter, list_papers

    store = context.current().store()
    _seed_hostile(store)
    flt = PaperFilter(
        tag="alpha" if "--tag" in args else None,
        status="read" if "--status" in args else None,
        text="nothing matches this" if "--search" in args else None,
    )
    limit = None if "--all" in args else (2 if "--limit" in args else 50)
    expected = envelope("paper list", list_papers(store, flt, limit=limit))

    compact = run_cli("paper", "list", "--json", *args)
    assert compact.exit_code == 0, compact
    assert compact.stdout == json.dumps(expected, **COMPACT) + "\n"
    pretty = run_cli("paper", "list", "--json", "--pretty", *args)
    # exactly what `output.emit` printed before streaming (existing consumers)
    assert pretty.stdout == json.dumps(expected, ensure_ascii=False, indent=2) + "\n"


def _seed_many(store, n: int, first: int = 1) -> None:
    ids = range(first, first + n)
    rows = [
        (
            i,
            f"Paper {i} about attention and kernels, with a long title",
            f"paper {i}",
            "Ada Author, Bo Builder",
            2020,
            None,
            None,
            None,
            None,
            1,
            "to-read",
            None,
            "2024-01-01",
            None,
            None,
            None,
            store.learner,
        )
        for i in ids
    ]
    with store.connection() as conn:
        conn.exec_driver_sql(
            "INSERT INTO papers (id, title, title_key, authors, year, arxiv_id, arxiv_version, doi, url, stage,"
            " status, read_on, added_on, rating, notes, bibtex_key, learner)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        conn.exec_driver_sql(
            "INSERT INTO paper_tags (paper_id, tag, learner) VALUES (?, 'attention', ?)",
            [(i, store.learner) for i in ids],
        )


class _Counter:
    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> None:
        self.chars += len(text)


def _peak_while_streaming(store, as_json_text: bool) -> tuple[int, int]:
    """(peak bytes traced, characters written) for `paper list --all --json`."""
    from roadmap_cli.research.papers_query import PaperFilter, stream_papers

    out = _Counter()
    tracemalloc.start()
    try:
        with stream_papers(store, PaperFilter(), as_json_text=as_json_text) as (counts, rows):
            papers = EncodedRows(rows) if as_json_text else Rows(rows)
            write_envelope(out, "paper list", {**counts, "papers": papers})
        return tracemalloc.get_traced_memory()[1], out.chars
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("as_json_text", [True, False])
def test_paper_list_streams_in_constant_memory(as_json_text: bool):
    """The peak does not grow with the log: 5x the papers, the same peak
    (a batch of rows and its text), far below the size of the output."""
    from roadmap_cli import context

    store = context.current().store()
    _seed_many(store, 5_000)
    _peak_while_streaming(store, as_json_text)  # warm: first use compiles regexes, statements
    small_peak, small_chars = _peak_while_streaming(store, as_json_text)
    _seed_many(store, 20_000, first=5_001)
    big_peak, big_chars = _peak_while_streaming(store, as_json_text)
    assert big_chars > 4.5 * small_chars and big_chars > 7_000_000
    assert big_peak < 1.2 * small_peak + 200_000, (small_peak, big_peak)
    assert big_peak < 0.75 * big_chars  # a batch of 1,000 rows as dicts and text, not the document


def test_a_slow_reader_does_not_block_writers(roadmap_home: Path):
    from roadmap_cli.research.papers_query import PaperFilter, stream_papers
    from roadmap_cli import context

    store = context.current().store()
    _seed_many(store, 5_000)
    with stream_papers(store, PaperFilter(), as_json_text=True) as (counts, rows):
        first = next(rows)  # mid-stream, like `paper list --all --json | less`
        writer = sqlite3.connect(roadmap_home / "roadmap.db", timeout=0.5, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # would wait, then fail, if the reader held the write lock
        writer.execute(
            "INSERT INTO papers (title, title_key, status, added_on) VALUES ('New', 'new', 'read', ?)",
            (date.today().isoformat(),),
        )
        writer.execute("COMMIT")
        writer.close()
        rest = sum(1 for _ in rows)
    assert json.loads(first)["id"] == 5_000 and rest == 4_999  # the reader kept its snapshot


def test_a_database_error_while_streaming_is_one_line(run_cli, roadmap_home: Path):
    """The raw read bypasses SQLAlchemy's error hooks; its errors still end as one line, exit 3."""
    assert run_cli("paper", "log", "A").exit_code == 0
    db = sqlite3.connect(roadmap_home / "roadmap.db")
    db.execute("DROP TABLE paper_tags")  # a damaged database: the row query fails
    db.commit()
    db.close()
    result = run_cli("paper", "list", "--all", "--json")
    assert result.exit_code == 3 and "Traceback" not in result.stderr
    assert "database error" in result.stderr and "no such table" in result.stderr
