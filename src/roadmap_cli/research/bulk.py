"""Adding many papers at once (BibTeX import): one read for duplicates, one
batched insert, one transaction.

Logging one paper asks the database three questions (same arXiv id? DOI?
title?) and flushes its insert. Doing that per entry made a 5,000-entry
import cost ~10,000 queries and ~10,000 flushes (~2 ms a paper). Here:

- `DuplicateIndex` reads the arXiv id, DOI and title key of every logged
  paper once (one SELECT) into three dicts, and learns each accepted entry as
  it goes, so an entry that repeats an earlier entry of the same file is
  caught too, without touching the database.
- `insert_papers` inserts all rows with one executemany, then their tags and
  reproduction entries with one executemany each. On SQLite the new ids are
  given explicitly, MAX(id)+1 on: what SQLite would pick itself for this
  table (no AUTOINCREMENT), and safe because the write lock is already held;
  asking for them back with RETURNING makes SQLAlchemy insert one row at a
  time (5x slower). Other databases use INSERT ... RETURNING. Each paper
  (and each reproduction entry) gets the learner's next number
  (research/numbers.py), read once for the batch.

Both run inside the caller's transaction (BEGIN IMMEDIATE holds the write
lock, so nothing can slip in between the read and the insert).
"""

from __future__ import annotations

from typing import Optional

from roadmap_cli.research.ids import duplicate_title_key


class DuplicateIndex:
    """arXiv id / DOI / title -> the first logged paper (or pending entry) that has it."""

    REASONS = (("arxiv_id", "same arXiv id"), ("doi", "same DOI"), ("title", "same title"))

    def __init__(self, conn, learner: str) -> None:
        from sqlalchemy import text

        self.by = {"arxiv_id": {}, "doi": {}, "title": {}}
        # Papers are reported by the learner's number (research/numbers.py).
        rows = conn.execute(
            text("SELECT number, arxiv_id, doi, title_key FROM papers WHERE learner = :l ORDER BY number"),
            {"l": learner},
        )
        by_arxiv, by_doi, by_title = self.by["arxiv_id"], self.by["doi"], self.by["title"]
        for paper_id, arxiv_id, doi, key in rows:
            if arxiv_id:
                by_arxiv.setdefault(arxiv_id, paper_id)  # setdefault: the oldest paper wins, as in find_duplicate
            if doi:
                by_doi.setdefault(doi, paper_id)
            if key:
                by_title.setdefault(duplicate_title_key(key), paper_id)

    @staticmethod
    def _keys(values: dict) -> dict:
        return {
            "arxiv_id": values.get("arxiv_id"),
            "doi": values.get("doi"),
            "title": duplicate_title_key(values.get("title_key") or ""),
        }

    def find(self, values: dict) -> Optional[tuple[object, str]]:
        """(the existing paper id or pending entry, reason), or None."""
        for (column, reason), value in zip(self.REASONS, self._keys(values).values()):
            if value and value in self.by[column]:
                return self.by[column][value], reason
        return None

    def add(self, values: dict, ref: object) -> None:
        """Remember a paper about to be inserted (`ref` stands for its id until then)."""
        for column, value in self._keys(values).items():
            if value:
                self.by[column].setdefault(value, ref)


def insert_papers(conn, rows: list[dict], tags: list[list[str]], *, created_at: str, learner: str) -> list[int]:
    """Insert prepared rows (+ tags, + a reproduction entry for each reproduced
    paper) in the caller's transaction, all owned by `learner`; return the new
    papers' numbers in row order."""
    if not rows:
        return []
    from roadmap_cli.research.numbers import next_number
    from roadmap_cli.store.tables import CadenceEntry, Paper, PaperTag

    from sqlalchemy import func, select

    first_number = next_number(conn, "papers", learner)
    numbers = list(range(first_number, first_number + len(rows)))
    rows = [{**row, "learner": learner, "number": number} for row, number in zip(rows, numbers)]

    papers = Paper.__table__
    sqlite = conn.dialect.name == "sqlite"
    if sqlite:
        first = (conn.execute(select(func.max(papers.c.id))).scalar() or 0) + 1
        ids = list(range(first, first + len(rows)))
        # Plain tuples through the driver's executemany: SQLAlchemy's per-row
        # parameter processing would be a tenth of the whole import.
        columns = list(rows[0])
        sql = f"INSERT INTO papers (id, {', '.join(columns)}) VALUES (?{', ?' * len(columns)})"
        conn.exec_driver_sql(sql, [(pid, *(row[c] for c in columns)) for pid, row in zip(ids, rows)])
    else:
        # sort_by_parameter_order: the ids come back in the order of `rows`.
        result = conn.execute(papers.insert().returning(papers.c.id, sort_by_parameter_order=True), rows)
        ids = [row[0] for row in result]
    tag_rows = [(pid, tag) for pid, paper_tags in zip(ids, tags) for tag in paper_tags]
    if tag_rows and sqlite:
        conn.exec_driver_sql(
            "INSERT INTO paper_tags (paper_id, tag, learner) VALUES (?, ?, ?)",
            [(pid, tag, learner) for pid, tag in tag_rows],
        )
    elif tag_rows:
        conn.execute(
            PaperTag.__table__.insert(), [{"paper_id": pid, "tag": tag, "learner": learner} for pid, tag in tag_rows]
        )
    reproductions = [
        {
            "kind": "reproduction",
            "title": row["title"],
            "on_date": row["read_on"] or row["added_on"],
            "hours": None,
            "paper_id": pid,
            "stage": row["stage"],
            "link": None,
            "lab_id": None,
            "note": None,
            "created_at": created_at,
            "learner": learner,
        }
        for pid, row in zip(ids, rows)
        if row["status"] == "reproduced"
    ]
    if reproductions:
        first_entry = next_number(conn, "cadence_entries", learner)
        for offset, entry in enumerate(reproductions):
            entry["number"] = first_entry + offset
        conn.execute(CadenceEntry.__table__.insert(), reproductions)
    return numbers
