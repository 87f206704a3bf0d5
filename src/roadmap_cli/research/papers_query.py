"""Reading the paper log: `paper list` filters and `paper suggest`.

`paper list` must start as fast as `roadmap status` even with 10,000 papers,
so it is two SQL statements (a COUNT and a LIMITed page with the tags folded
in by GROUP_CONCAT), run on a Core connection: no ORM objects, no loading of
rows that are not shown.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import date
from typing import Iterator, Optional

from roadmap_cli.research.ids import duplicate_title_key, parse_arxiv, title_key
from roadmap_cli.research.papers import COUNTED_STATUSES, STATUSES

DEFAULT_LIMIT = 50

_COLUMNS = (
    "id",
    "title",
    "authors",
    "year",
    "arxiv_id",
    "arxiv_version",
    "doi",
    "url",
    "stage",
    "status",
    "read_on",
    "added_on",
    "rating",
)
# A paper's "id" is the learner's own number (research/numbers.py); p.id is the internal key.
_SELECTED = ", ".join("p.number" if c == "id" else f"p.{c}" for c in _COLUMNS)


@dataclass
class PaperFilter:
    status: Optional[str] = None
    tag: Optional[str] = None
    stage: Optional[int] = None
    since: Optional[date] = None  # read on (or, unread, added on) this date or later
    text: Optional[str] = None  # in title, authors, notes, ids or tags


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _where(flt: PaperFilter, learner: str) -> tuple[str, dict]:
    from roadmap_cli.errors import UserError

    clauses, params = ["p.learner = :learner"], {"learner": learner}
    if flt.status:
        if flt.status not in STATUSES:
            raise UserError(f"unknown status {flt.status!r} (choose {', '.join(STATUSES)})")
        clauses.append("p.status = :status")
        params["status"] = flt.status
    if flt.tag:
        # Uncorrelated: SQLite builds the id set once instead of probing per paper.
        clauses.append("p.id IN (SELECT t.paper_id FROM paper_tags t WHERE t.tag = :tag)")
        params["tag"] = flt.tag.strip().lower()
    if flt.stage is not None:
        clauses.append("p.stage = :stage")
        params["stage"] = flt.stage
    if flt.since:
        clauses.append("COALESCE(p.read_on, p.added_on) >= :since")
        params["since"] = flt.since.isoformat()
    if flt.text:
        # LIKE is case-insensitive for ASCII in SQLite; ESCAPE keeps % and _ literal.
        fields = ("p.title", "p.authors", "p.notes", "p.arxiv_id", "p.doi")
        inner = " OR ".join(f"{f} LIKE :text ESCAPE '\\'" for f in fields)
        clauses.append(f"({inner} OR p.id IN (SELECT t.paper_id FROM paper_tags t WHERE t.tag LIKE :text ESCAPE '\\'))")
        params["text"] = _like(flt.text.strip())
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _row_dict(row) -> dict:
    data = dict(zip(_COLUMNS, row[: len(_COLUMNS)]))
    version = data["arxiv_version"]
    data["arxiv"] = (f"{data['arxiv_id']}v{version}" if version else data["arxiv_id"]) if data["arxiv_id"] else None
    data["tags"] = sorted(row[len(_COLUMNS)].split("\x1f")) if row[len(_COLUMNS)] else []
    data["has_notes"] = bool(row[len(_COLUMNS) + 1])
    return data


def list_papers(store, flt: PaperFilter, *, limit: Optional[int] = DEFAULT_LIMIT) -> dict:
    """{"total": all matches, "shown": n, "papers": [...]}, newest first.

    `limit=None` returns every match. The page is one LIMITed query (SQLite
    keeps only the top N while scanning, and folds in the tags of those rows);
    the total needs a COUNT only when the page is full.
    """
    from sqlalchemy import text

    where, params = _where(flt, store.learner)
    columns = _SELECTED
    concat = (
        "GROUP_CONCAT(t.tag, char(31))" if store.engine.dialect.name == "sqlite" else "string_agg(t.tag, chr(31))"
    )  # PostgreSQL spells it so
    page = (
        f"SELECT {columns}, (SELECT {concat} FROM paper_tags t WHERE t.paper_id = p.id), "
        f"p.notes IS NOT NULL FROM papers p{where}{_ORDER}"
    )
    if limit is not None:
        page += " LIMIT :limit"
        params = {**params, "limit": limit}
    with store.engine.connect() as conn:
        rows = conn.execute(text(page), params).all()
        if limit is None or len(rows) < limit:
            total = len(rows)
        else:
            total = conn.execute(text(f"SELECT COUNT(*) FROM papers p{where}"), params).scalar_one()
        conn.rollback()
    papers = [_row_dict(r) for r in rows]
    return {"total": total, "shown": len(papers), "papers": papers}


# `paper list --json` rows as JSON text made by SQLite (json_object, in C):
# the same keys, in the same order, with the same values as `_row_dict`, and
# the same bytes as `json.dumps(row, ensure_ascii=False, separators=(",", ":"))`
# (tests/test_research_stream.py compares them on hostile strings). Making
# 100,000 dicts in Python and encoding them was most of the cost of
# `paper list --all --json`. json() around the tag array and the boolean keeps
# them JSON (a value's JSON subtype does not cross a subquery).
_ARXIV_SQL = (
    "CASE WHEN p.arxiv_id IS NULL THEN NULL WHEN p.arxiv_version IS NULL OR p.arxiv_version = 0"
    " THEN p.arxiv_id ELSE p.arxiv_id || 'v' || p.arxiv_version END"
)
_JSON_ROW = (
    "json_object("
    + ", ".join(f"'{c}', {'p.number' if c == 'id' else f'p.{c}'}" for c in _COLUMNS)
    + f", 'arxiv', {_ARXIV_SQL}"
    + ", 'tags', json((SELECT json_group_array(s.tag) FROM"
    " (SELECT t.tag FROM paper_tags t WHERE t.paper_id = p.id ORDER BY t.tag) s))"
    + ", 'has_notes', json(CASE WHEN p.notes IS NOT NULL THEN 'true' ELSE 'false' END))"
)
_ORDER = " ORDER BY COALESCE(p.read_on, p.added_on) DESC, p.number DESC"


def _store_error(store, exc: Exception):
    """A driver error on the raw read (which SQLAlchemy's error hooks do not
    see) as the one-line StoreError every other read gives (exit 3)."""
    from roadmap_cli.errors import StoreError

    return StoreError(
        f"database error on {store.path or store.url}: {exc}; if it persists, restore from `roadmap export` or a backup"
    )


def _fetched(store, cursor) -> Iterator[tuple]:
    """The cursor's rows, fetched 2,000 at a time (memory stays flat)."""
    import sqlite3

    while True:
        try:
            batch = cursor.fetchmany(2_000)
        except sqlite3.DatabaseError as exc:
            raise _store_error(store, exc) from None
        if not batch:
            return
        yield from batch


@contextlib.contextmanager
def stream_papers(
    store, flt: PaperFilter, *, limit: Optional[int] = None, as_json_text: bool = False
) -> Iterator[tuple[dict, Iterator]]:
    """`list_papers` for big outputs: ({"total", "shown"}, an iterator of the rows).

    With `as_json_text` the rows come as compact JSON texts (see _JSON_ROW),
    otherwise as the dicts `list_papers` returns. On SQLite the read is a
    deferred transaction on the driver's connection: one snapshot (the count
    and the rows agree) that takes no write lock, so a slow consumer
    (`| less`) never blocks other `roadmap` commands, and the rows are read as
    they are written (constant memory).
    """
    if store.engine.dialect.name != "sqlite":  # other databases: the ordinary read
        import json

        result = list_papers(store, flt, limit=limit)
        rows = result["papers"]
        if as_json_text:
            rows = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows]
        yield {"total": result["total"], "shown": result["shown"]}, iter(rows)
        return
    where, params = _where(flt, store.learner)
    columns = _SELECTED
    select = (
        _JSON_ROW
        if as_json_text
        else (
            f"{columns}, (SELECT GROUP_CONCAT(t.tag, char(31)) FROM paper_tags t WHERE t.paper_id = p.id), "
            "p.notes IS NOT NULL"
        )
    )
    page = f"SELECT {select} FROM papers p{where}{_ORDER}"
    if limit is not None:
        page += " LIMIT :limit"
        params = {**params, "limit": limit}
    import sqlite3

    raw = store.engine.raw_connection()
    try:
        cursor = raw.driver_connection.cursor()
        try:
            cursor.execute("BEGIN")  # deferred: a read snapshot (WAL), no write lock
            total = cursor.execute(f"SELECT COUNT(*) FROM papers p{where}", params).fetchone()[0]
            cursor.execute(page, params)
        except sqlite3.DatabaseError as exc:
            raise _store_error(store, exc) from None
        shown = total if limit is None else min(total, limit)
        try:
            rows = (r[0] for r in _fetched(store, cursor)) if as_json_text else map(_row_dict, _fetched(store, cursor))
            yield {"total": total, "shown": shown}, rows
        finally:
            if raw.driver_connection.in_transaction:
                raw.driver_connection.rollback()
    finally:
        raw.close()


def current_stage_number(store, curriculum) -> Optional[int]:
    """The lowest-numbered stage with an unchecked checkpoint (None: all done)."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        done = {
            r[0]
            for r in conn.execute(
                text("SELECT checkpoint_id FROM checkpoint_progress WHERE learner = :l"), {"l": store.learner}
            )
        }
        conn.rollback()
    for stage in sorted(curriculum.stages, key=lambda s: s.number):
        if any(cp.id not in done for cp in stage.checkpoints):
            return stage.number
    return None


def suggest(
    store, reading_list, current_stage: Optional[int], *, limit: Optional[int] = 10, kind: Optional[str] = None
) -> dict:
    """Unread papers from the reading list: the current stage's first, then the
    earlier stages' (backlog), then the later ones, each in list order.

    A reading item already logged (same arXiv id, title or URL), whatever its
    status, is never suggested: `paper log` on it would make a duplicate. The
    ones logged as to-read/reading are counted (`on_your_list`), since
    `paper list --status to-read` is where they are.
    """
    from sqlalchemy import text

    with store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, arxiv_id, title_key, status, url FROM papers WHERE learner = :l"), {"l": store.learner}
        ).all()
        conn.rollback()
    by_arxiv = {r[1]: r for r in rows if r[1]}
    by_title = {duplicate_title_key(r[2]): r for r in rows}
    by_url = {_url_key(r[4]): r for r in rows if r[4]}
    on_your_list = 0

    def bucket(stage: int) -> tuple[int, int]:
        if current_stage is None or stage == current_stage:
            return (0, 0)
        return (1, -stage) if stage < current_stage else (2, stage)

    items = []
    if kind is not None and kind not in {item.kind for item in reading_list}:
        from roadmap_cli.errors import NotFoundError

        kinds = sorted({item.kind for item in reading_list})
        raise NotFoundError(
            "reading kind", kind, kinds, hint=f"choose {', '.join(kinds)}" if kinds else "the reading list is empty"
        )
    for order, item in enumerate(reading_list):
        if kind is not None and item.kind != kind:
            continue
        arxiv_id = None
        if item.arxiv:
            try:
                arxiv_id = parse_arxiv(item.arxiv).id
            except Exception:  # noqa: BLE001 - a bad id in the list must not hide the rest
                arxiv_id = None
        logged = (
            (by_arxiv.get(arxiv_id) if arxiv_id else None)
            or by_title.get(duplicate_title_key(title_key(item.title)))
            or (by_url.get(_url_key(item.url)) if item.url else None)
        )
        if logged is not None:
            on_your_list += logged[3] not in COUNTED_STATUSES
            continue
        items.append(
            (
                (bucket(item.stage), order),
                {
                    "reading_id": item.id,
                    "title": item.title,
                    "authors": item.authors,
                    "year": item.year,
                    "arxiv": item.arxiv,
                    "url": item.url or (f"https://arxiv.org/abs/{item.arxiv}" if item.arxiv else None),
                    "stage": item.stage,
                    "kind": item.kind,
                },
            )
        )
    items.sort(key=lambda pair: pair[0])
    chosen = [data for _, data in items]
    total = len(chosen)
    if limit is not None:
        chosen = chosen[:limit]
    return {"current_stage": current_stage, "total_unread": total, "suggestions": chosen, "on_your_list": on_your_list}


def _url_key(url: str) -> str:
    """A URL as two spellings of one page share it: no scheme, no `www.`, no trailing slash, any case."""
    key = url.strip().lower().split("://", 1)[-1]
    return key.removeprefix("www.").rstrip("/")
