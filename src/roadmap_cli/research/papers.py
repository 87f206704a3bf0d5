"""The paper log: log (with duplicate refusal), show, read, note, edit, delete.

Listing and suggestions live in `papers_query`; BibTeX in `bibtex`.

Papers are known by the learner's own number (research/numbers.py): every
function here takes and returns that number as the paper's "id"; the
table's `id` is internal (tags and entries refer to it) and never shown.

A paper counts for the cadence ("5 papers a week") in the ISO week of its
`read_on` date once its status is `read` or `reproduced`. A paper logged as
`reproduced` also gets a reproduction entry on that date (one per paper), and
`roadmap log reproduction --paper ID` marks the paper reproduced — so the
weekly "1 deep reproduction" is always counted from reproduction entries,
exactly once, whichever way the learner records it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Optional

from roadmap_cli.errors import NotFoundError, UserError
from roadmap_cli.research.ids import doi_from_url, duplicate_title_key, normalize_doi, parse_arxiv, title_key
from roadmap_cli.store.values import COUNTED_PAPER_STATUSES as COUNTED_STATUSES  # count for the cadence on read_on
from roadmap_cli.store.values import PAPER_STATUSES as STATUSES

PAPER_HINT = "see `roadmap paper list`"  # paper ids are numbers: a did-you-mean rarely helps


def one_line(text: Optional[str]) -> str:
    """A title as one line: runs of whitespace collapse, and control characters
    go (an escape sequence pasted with a title would otherwise recolour the
    terminal every time the list is shown)."""
    if not text:
        return ""
    if text.isprintable():  # the usual case, checked in C: no character to drop
        return " ".join(text.split())
    return " ".join("".join(ch for ch in text if ch.isspace() or ch.isprintable()).split())


@dataclass
class PaperInput:
    """What the learner typed (or a BibTeX entry held), before validation."""

    title: str
    authors: Optional[str] = None
    year: Optional[int] = None
    arxiv: Optional[str] = None
    doi: Optional[str] = None
    url: Optional[str] = None
    tags: list[str] = field(default_factory=list)
    stage: Optional[int] = None
    status: str = "read"
    rating: Optional[int] = None
    note: Optional[str] = None
    read_on: Optional[date] = None  # defaults to today for read/reproduced
    bibtex_key: Optional[str] = None
    # Filled from arXiv / Crossref / DataCite (research/lookup.py), or typed.
    venue: Optional[str] = None
    abstract: Optional[str] = None
    pdf_url: Optional[str] = None
    metadata_source: Optional[str] = None  # where the fetched fields came from
    metadata_fetched_on: Optional[str] = None  # YYYY-MM-DD


class DuplicatePaperError(UserError):
    def __init__(self, existing_id: int, reason: str, title: str) -> None:
        super().__init__(f"already logged as #{existing_id} ({reason}): {title!r} — use --force to log it again")
        self.existing_id = existing_id


def parse_paper_id(text: str | int) -> int:
    value = str(text).strip().lstrip("#")
    if not value.isdigit():
        raise UserError(f"invalid paper id {text!r}: expected a number such as 12 (see `roadmap paper list`)")
    return int(value)


def normalize_tags(tags: list[str] | str | None) -> list[str]:
    """Tags are lower case, comma/space separated on input, unique, in order."""
    if not tags:
        return []
    items = tags.split(",") if isinstance(tags, str) else [t for raw in tags for t in str(raw).split(",")]
    seen: list[str] = []
    for tag in (t.strip().lower().replace(" ", "-") for t in items):
        if tag and tag not in seen:
            seen.append(tag)
    return seen


def _check_status(status: str) -> str:
    if status not in STATUSES:
        raise UserError(f"unknown status {status!r} (choose {', '.join(STATUSES)})")
    return status


def _check_rating(rating: Optional[int]) -> Optional[int]:
    if rating is not None and not 1 <= rating <= 5:
        raise UserError(f"rating {rating} out of range (1 to 5)")
    return rating


def prepare(inp: PaperInput, *, today: date) -> dict:
    """Validate and normalise into column values (raises UserError)."""
    title = one_line(inp.title)
    if not title:
        raise UserError("a paper needs a title")
    status = _check_status(inp.status)
    if inp.read_on is not None and inp.read_on > today:
        raise UserError(
            f"date {inp.read_on.isoformat()} is in the future (today is {today.isoformat()}): log things once they happen"
        )
    arxiv = parse_arxiv(inp.arxiv) if inp.arxiv else None
    doi = normalize_doi(inp.doi) if inp.doi else None
    if doi is None and inp.url:
        doi = doi_from_url(inp.url)  # a doi.org link names the paper as well as a DOI field
    if arxiv is None and doi and doi.startswith("10.48550/arxiv."):
        arxiv = parse_arxiv(doi)  # arXiv's own DOI names the paper: catch duplicates by id too
    if inp.year is not None and not 1000 <= inp.year <= today.year + 1:
        raise UserError(f"year {inp.year} does not look like a publication year")
    return {
        "title": title,
        "title_key": title_key(title),
        "authors": one_line(inp.authors) or None,
        "year": inp.year,
        "arxiv_id": arxiv.id if arxiv else None,
        "arxiv_version": arxiv.version if arxiv else None,
        "doi": doi,
        "url": inp.url.strip() if inp.url else None,
        "stage": inp.stage,
        "status": status,
        # Only a paper that was read has a read date; to-read/reading have none.
        "read_on": (inp.read_on or today).isoformat() if status in COUNTED_STATUSES else None,
        "added_on": today.isoformat(),
        "rating": _check_rating(inp.rating),
        "notes": inp.note.strip() if inp.note and inp.note.strip() else None,
        "bibtex_key": inp.bibtex_key,
        "venue": one_line(inp.venue) or None,
        "abstract": _abstract(inp.abstract),
        "pdf_url": inp.pdf_url.strip() if inp.pdf_url and inp.pdf_url.strip() else None,
        "metadata_source": inp.metadata_source,
        "metadata_fetched_on": inp.metadata_fetched_on,
    }


MAX_ABSTRACT = 20_000  # characters; real abstracts are under 3,000


def _abstract(text: Optional[str]) -> Optional[str]:
    value = (text or "").strip()
    return value[:MAX_ABSTRACT] or None


def find_duplicate(session, values: dict, exclude_id: Optional[int] = None) -> Optional[tuple[int, str, str]]:
    """(number, reason, title) of a logged paper with the same arXiv id, DOI or title;
    `exclude_id` is the internal id of the paper being edited.

    Titles compare without spaces (`duplicate_title_key`), so "Paged-Attention"
    and "PagedAttention" are one paper. Importing many papers uses
    `bulk.DuplicateIndex` instead: one query for the whole file.
    """
    from sqlalchemy import func
    from sqlmodel import select

    from roadmap_cli.store.tables import Paper

    checks = (
        (Paper.arxiv_id, values.get("arxiv_id"), "same arXiv id"),
        (Paper.doi, values.get("doi"), "same DOI"),
        (func.replace(Paper.title_key, " ", ""), duplicate_title_key(values.get("title_key") or ""), "same title"),
    )
    for column, value, reason in checks:
        if not value:
            continue
        query = select(Paper.number, Paper.title).where(column == value, Paper.learner == session.info["store"].learner)
        if exclude_id is not None:
            query = query.where(Paper.id != exclude_id)
        row = session.exec(query.order_by(Paper.id).limit(1)).first()
        if row is not None:
            return row[0], reason, row[1]
    return None


def refuse_logged(store, inp: PaperInput) -> None:
    """DuplicatePaperError if the learner already logged the paper `inp` names (arXiv id, DOI or typed
    title): `paper log` asks this before it fetches anything, so a repeat costs no network call."""
    arxiv = parse_arxiv(inp.arxiv) if inp.arxiv else None
    doi = normalize_doi(inp.doi) if inp.doi else (doi_from_url(inp.url) if inp.url else None)
    if arxiv is None and doi and doi.startswith("10.48550/arxiv."):
        arxiv = parse_arxiv(doi)
    title = one_line(inp.title)
    values = {"arxiv_id": arxiv.id if arxiv else None, "doi": doi, "title_key": title_key(title) if title else None}
    with store.session() as session:
        duplicate = find_duplicate(session, values)
    if duplicate:
        raise DuplicatePaperError(*duplicate)


def insert_paper(session, values: dict, tags: list[str]) -> int:
    """Insert one prepared paper (+ tags, + a reproduction entry if reproduced); its number."""
    from roadmap_cli.research.numbers import session_next_number
    from roadmap_cli.store.tables import Paper, PaperTag

    paper = Paper(**values, number=session_next_number(session, "papers"))
    session.add(paper)
    session.flush()
    for tag in tags:
        session.add(PaperTag(paper_id=paper.id, tag=tag))
    if values["status"] == "reproduced":
        _ensure_reproduction_entry(session, paper)
    return paper.number


def utc_now_iso() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _ensure_reproduction_entry(session, paper) -> None:
    from sqlmodel import select

    from roadmap_cli.research.numbers import session_next_number
    from roadmap_cli.store.tables import CadenceEntry

    exists = session.exec(
        select(CadenceEntry.id).where(CadenceEntry.kind == "reproduction", CadenceEntry.paper_id == paper.id)
    ).first()
    if exists is None:
        session.add(
            CadenceEntry(
                kind="reproduction",
                title=paper.title,
                on_date=paper.read_on or paper.added_on,
                paper_id=paper.id,
                stage=paper.stage,
                created_at=utc_now_iso(),
                number=session_next_number(session, "cadence_entries"),
            )
        )


def log_paper(store, inp: PaperInput, *, today: date, force: bool = False) -> dict:
    """Log one paper; a duplicate is refused with the existing id unless `force`."""
    values = prepare(inp, today=today)
    tags = normalize_tags(inp.tags)

    def write(session):  # run again as a whole if the server reports a conflict (Store.write)
        if not force:
            duplicate = find_duplicate(session, values)
            if duplicate:
                raise DuplicatePaperError(*duplicate)
        return insert_paper(session, values, tags)

    return get_paper(store, store.write(write))


def load_paper(session, number: int):
    """The current learner's paper with this number (their own sequence), or NotFoundError naming their recent ones."""
    from sqlmodel import select

    from roadmap_cli.store.tables import Paper

    learner = session.info["store"].learner
    paper = session.exec(select(Paper).where(Paper.learner == learner, Paper.number == number)).first()
    if paper is None:
        nearby = session.exec(
            select(Paper.number).where(Paper.learner == learner).order_by(Paper.number.desc()).limit(20)
        ).all()
        raise NotFoundError("paper", str(number), [str(i) for i in nearby], hint=PAPER_HINT)
    return paper


def paper_dict(paper, tags: list[str]) -> dict:
    arxiv = None
    if paper.arxiv_id:
        arxiv = f"{paper.arxiv_id}v{paper.arxiv_version}" if paper.arxiv_version else paper.arxiv_id
    return {
        "id": paper.number,
        "title": paper.title,
        "authors": paper.authors,
        "year": paper.year,
        "arxiv": arxiv,
        "arxiv_id": paper.arxiv_id,
        "arxiv_version": paper.arxiv_version,
        "doi": paper.doi,
        "url": paper.url or (f"https://arxiv.org/abs/{arxiv}" if arxiv else None),
        "stage": paper.stage,
        "status": paper.status,
        "read_on": paper.read_on,
        "added_on": paper.added_on,
        "rating": paper.rating,
        "tags": tags,
        "notes": paper.notes,
        "bibtex_key": paper.bibtex_key,
        "venue": paper.venue,
        "abstract": paper.abstract,
        "pdf_url": paper.pdf_url,
        "metadata": (
            {"source": paper.metadata_source, "fetched_on": paper.metadata_fetched_on}
            if paper.metadata_source
            else None
        ),
    }


def get_paper(store, paper_id: int) -> dict:
    """One paper with its tags and the cadence entries that cite it."""
    from sqlmodel import select

    from roadmap_cli.store.tables import CadenceEntry, PaperTag

    with store.session() as session:
        paper = load_paper(session, paper_id)
        tags = session.exec(select(PaperTag.tag).where(PaperTag.paper_id == paper.id).order_by(PaperTag.tag)).all()
        entries = session.exec(
            select(CadenceEntry)
            .where(CadenceEntry.paper_id == paper.id)
            .order_by(CadenceEntry.on_date, CadenceEntry.number)
        ).all()
        data = paper_dict(paper, list(tags))
        data["entries"] = [{"id": e.number, "kind": e.kind, "title": e.title, "on_date": e.on_date} for e in entries]
    return data


def mark_read(store, paper_id: int, *, on: date, today: date) -> dict:
    """Mark a paper read on `on` (a reproduced paper stays reproduced)."""
    if on > today:
        raise UserError(
            f"date {on.isoformat()} is in the future (today is {today.isoformat()}): log things once they happen"
        )
    with store.session() as session:
        paper = load_paper(session, paper_id)
        if paper.status != "reproduced":
            paper.status = "read"
        paper.read_on = on.isoformat()
    return get_paper(store, paper_id)


def mark_reproduced(session, paper_id: int, on: date):
    """Called by `log reproduction --paper NUMBER` inside its transaction; the paper."""
    paper = load_paper(session, paper_id)
    paper.status = "reproduced"
    if not paper.read_on:  # reproducing a paper means it was read by then
        paper.read_on = on.isoformat()
    return paper


def set_notes(store, paper_id: int, text: str, *, append: bool) -> dict:
    with store.session() as session:
        paper = load_paper(session, paper_id)
        text = text.strip()
        if append and paper.notes:
            paper.notes = f"{paper.notes}\n\n{text}" if text else paper.notes
        else:
            paper.notes = text or None
    return get_paper(store, paper_id)


def current_notes(store, paper_id: int) -> str:
    with store.session() as session:
        return load_paper(session, paper_id).notes or ""


def edit_paper(store, paper_id: int, changes: dict, *, today: date, force: bool = False) -> dict:
    """Change the given fields (None values are left alone); same checks as log."""
    from sqlmodel import delete

    from roadmap_cli.store.tables import PaperTag

    with store.session() as session:
        paper = load_paper(session, paper_id)
        current = paper_dict(paper, [])
        merged = PaperInput(
            title=changes["title"] if "title" in changes else paper.title,  # "" is refused, not ignored
            authors=changes.get("authors", current["authors"]),
            year=changes.get("year", paper.year),
            arxiv=changes.get("arxiv", current["arxiv"]),
            doi=changes.get("doi", paper.doi),
            url=changes.get("url", paper.url),
            stage=changes.get("stage", paper.stage),
            status=changes["status"] if "status" in changes else paper.status,
            rating=changes.get("rating", paper.rating),
            note=paper.notes,
            read_on=changes.get("read_on") or (date.fromisoformat(paper.read_on) if paper.read_on else None),
            bibtex_key=paper.bibtex_key,
            venue=paper.venue,
            abstract=paper.abstract,
            pdf_url=paper.pdf_url,
            metadata_source=paper.metadata_source,
            metadata_fetched_on=paper.metadata_fetched_on,
        )
        values = prepare(merged, today=today)
        values["added_on"] = paper.added_on
        if not force:
            duplicate = find_duplicate(session, values, exclude_id=paper.id)
            if duplicate:
                raise DuplicatePaperError(*duplicate)
        for key, value in values.items():
            setattr(paper, key, value)
        if changes.get("tags") is not None:
            session.exec(delete(PaperTag).where(PaperTag.paper_id == paper.id))
            for tag in normalize_tags(changes["tags"]):
                session.add(PaperTag(paper_id=paper.id, tag=tag))
        if values["status"] == "reproduced":
            _ensure_reproduction_entry(session, paper)
    return get_paper(store, paper_id)


def papers_with_ids(store, paper_ids: Optional[list[int]]) -> list[dict]:
    """The learner's papers as stored (the raw url, not the arXiv link made
    from the id), for `paper refresh`: the given ids, or every paper that has
    an arXiv id or DOI. An unknown id is refused before anything is fetched."""
    from sqlmodel import or_, select

    from roadmap_cli.store.tables import Paper

    with store.session() as session:
        if paper_ids is None:
            learner = session.info["store"].learner
            rows = session.exec(
                select(Paper)
                .where(Paper.learner == learner)
                .where(or_(Paper.arxiv_id.is_not(None), Paper.doi.is_not(None)))
                .order_by(Paper.number)
            ).all()
        else:
            rows = [load_paper(session, pid) for pid in dict.fromkeys(paper_ids)]
        return [
            {
                "id": p.number,
                "title": p.title,
                "authors": p.authors,
                "year": p.year,
                "arxiv": (f"{p.arxiv_id}v{p.arxiv_version}" if p.arxiv_version else p.arxiv_id) if p.arxiv_id else None,
                "doi": p.doi,
                "url": p.url,
                "venue": p.venue,
                "abstract": p.abstract,
                "pdf_url": p.pdf_url,
            }
            for p in rows
        ]


def fill_paper(store, paper_id: int, values: dict, *, source: str, fetched_on: str) -> None:
    """Write fetched values into empty fields (research/lookup.py chose them)."""
    with store.session() as session:
        paper = load_paper(session, paper_id)
        for key, value in values.items():
            setattr(paper, key, _abstract(value) if key == "abstract" else value)
        if "title" in values:
            paper.title_key = title_key(values["title"])
        paper.metadata_source = source
        paper.metadata_fetched_on = fetched_on


def delete_paper(store, paper_id: int) -> dict:
    """Delete a paper and its tags; entries that cited it keep their own record."""
    from sqlmodel import delete, update

    from roadmap_cli.store.tables import CadenceEntry, PaperTag

    data = get_paper(store, paper_id)
    with store.session() as session:
        paper = load_paper(session, paper_id)
        session.exec(delete(PaperTag).where(PaperTag.paper_id == paper.id))
        session.exec(update(CadenceEntry).where(CadenceEntry.paper_id == paper.id).values(paper_id=None))
        session.delete(paper)
    return data
