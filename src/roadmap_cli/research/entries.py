"""The rest of the cadence: reproductions, experiments, benchmarks, reports,
blog posts, open-source projects, workshop papers, and study hours.

Each is one row in `cadence_entries` dated with the learner's local date.
A reproduction that names a paper (`--paper ID`) marks that paper reproduced.
Entries and the papers they cite are known by the learner's own numbers
(research/numbers.py): "id" and "paper_id" here are those numbers; the
table's `id` and `paper_id` columns are internal keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Optional

from roadmap_cli.errors import NotFoundError, UserError
from roadmap_cli.research.papers import load_paper, mark_reproduced, one_line, utc_now_iso
from roadmap_cli.store.values import ENTRY_KINDS  # the kinds of `roadmap log KIND` (`paper` is the paper log)

ITEM_KINDS = ENTRY_KINDS[:-1]
MAX_HOURS_PER_DAY = 24.0


# What each kind is, for help text and messages ("an experiment", not "a experiment").
KIND_DESCRIPTIONS = {
    "reproduction": "a deep reproduction",
    "experiment": "an experiment",
    "benchmark": "a benchmark",
    "report": "a technical report",
    "blog": "a blog post",
    "oss": "an open-source project",
    "workshop-paper": "a workshop paper",
    "hours": "study hours",
}


def with_article(kind: str) -> str:
    """The kind as a phrase with its article: `experiment` -> `an experiment`."""
    return KIND_DESCRIPTIONS.get(kind, f"a {kind}")


@dataclass
class EntryInput:
    kind: str
    on_date: date
    title: Optional[str] = None
    hours: Optional[float] = None
    stage: Optional[int] = None
    link: Optional[str] = None
    paper_id: Optional[int] = None  # the paper's number
    lab_id: Optional[str] = None
    note: Optional[str] = None


def _future(day: date, today: date) -> None:
    if day > today:
        raise UserError(
            f"date {day.isoformat()} is in the future (today is {today.isoformat()}): log things once they happen"
        )


def _validate(inp: EntryInput, today: date) -> None:
    if inp.kind not in ENTRY_KINDS:
        raise NotFoundError("entry kind", inp.kind, ENTRY_KINDS)
    _future(inp.on_date, today)
    if inp.kind == "hours":
        if inp.hours is None or not 0 < inp.hours <= MAX_HOURS_PER_DAY:
            raise UserError(f"hours must be more than 0 and at most {MAX_HOURS_PER_DAY:g} for one day, got {inp.hours}")
    elif not one_line(inp.title):
        raise UserError(f"{with_article(inp.kind)} needs a title")
    elif inp.hours is not None:
        raise UserError(f"--hours applies to hours entries, not to {with_article(inp.kind)}")
    if inp.paper_id is not None and inp.kind == "hours":
        raise UserError("--paper applies to items, not hours")


def file_link(path: str) -> str:
    """A local file as the file:// link an entry stores (`log report --file`):
    absolute, so the link still works from another folder; it must exist now."""
    from pathlib import Path

    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise UserError(f"no such file: {path}" if not resolved.exists() else f"{path} is not a file")
    return resolved.as_uri()


def entry_dict(entry, paper_number: Optional[int]) -> dict:
    """An entry as the commands show it: its number, and the cited paper's number."""
    return {
        "id": entry.number,
        "kind": entry.kind,
        "title": entry.title,
        "on_date": entry.on_date,
        "hours": entry.hours,
        "stage": entry.stage,
        "link": entry.link,
        "paper_id": paper_number,
        "lab_id": entry.lab_id,
        "note": entry.note,
        "created_at": entry.created_at,
    }


def log_entry(store, inp: EntryInput, *, today: date) -> dict:
    """Record one entry; a reproduction of a logged paper marks it reproduced."""
    from roadmap_cli.research.numbers import session_next_number
    from roadmap_cli.store.tables import CadenceEntry

    _validate(inp, today)

    def write(session):  # run again as a whole if the server reports a conflict (Store.write)
        paper = None
        if inp.paper_id is not None:
            if inp.kind == "reproduction":
                paper = mark_reproduced(session, inp.paper_id, inp.on_date)
            else:
                paper = load_paper(session, inp.paper_id)
        entry = CadenceEntry(
            kind=inp.kind,
            title=one_line(inp.title) or None,
            on_date=inp.on_date.isoformat(),
            hours=inp.hours,
            stage=inp.stage,
            link=inp.link,
            paper_id=paper.id if paper else None,
            lab_id=inp.lab_id,
            note=inp.note,
            created_at=utc_now_iso(),
            number=session_next_number(session, "cadence_entries"),
        )
        session.add(entry)
        session.flush()
        return entry_dict(entry, inp.paper_id)

    return store.write(write)


def list_entries(
    store,
    *,
    kind: Optional[str] = None,
    since: Optional[date] = None,
    until: Optional[date] = None,
    limit: Optional[int] = 50,
) -> dict:
    """{"total", "shown", "entries"} newest first, optionally of one kind/date range."""
    from sqlmodel import func, select

    from roadmap_cli.store.tables import CadenceEntry, Paper

    if kind is not None and kind not in ENTRY_KINDS:
        raise NotFoundError("entry kind", kind, ENTRY_KINDS)
    query = (
        select(CadenceEntry, Paper.number)
        .join(Paper, CadenceEntry.paper_id == Paper.id, isouter=True)
        .where(CadenceEntry.learner == store.learner)
    )
    if kind:
        query = query.where(CadenceEntry.kind == kind)
    if since:
        query = query.where(CadenceEntry.on_date >= since.isoformat())
    if until:
        query = query.where(CadenceEntry.on_date <= until.isoformat())
    with store.session() as session:
        total = session.exec(select(func.count()).select_from(query.subquery())).one()
        query = query.order_by(CadenceEntry.on_date.desc(), CadenceEntry.number.desc())
        if limit is not None:
            query = query.limit(limit)
        entries = [entry_dict(e, number) for e, number in session.exec(query).all()]
    return {"total": total, "shown": len(entries), "entries": entries}


def _load(session, number: int):
    """The current learner's entry with this number, or NotFoundError naming their recent ones."""
    from sqlmodel import select

    from roadmap_cli.store.tables import CadenceEntry

    learner = session.info["store"].learner
    entry = session.exec(
        select(CadenceEntry).where(CadenceEntry.learner == learner, CadenceEntry.number == number)
    ).first()
    if entry is None:
        recent = session.exec(
            select(CadenceEntry.number)
            .where(CadenceEntry.learner == learner)
            .order_by(CadenceEntry.number.desc())
            .limit(20)
        ).all()
        raise NotFoundError("entry", str(number), [str(i) for i in recent], hint="see `roadmap log list`")
    return entry


def _paper_number(session, entry) -> Optional[int]:
    from roadmap_cli.store.tables import Paper

    if entry.paper_id is None:
        return None
    paper = session.get(Paper, entry.paper_id)
    return paper.number if paper is not None else None


def get_entry(store, entry_id: int) -> dict:
    with store.session() as session:
        entry = _load(session, entry_id)
        return entry_dict(entry, _paper_number(session, entry))


def edit_entry(store, entry_id: int, changes: dict, *, today: date) -> dict:
    """Change the given fields (keys absent are left alone); same checks as logging."""
    allowed = {"title", "on_date", "hours", "stage", "link", "paper_id", "lab_id", "note"}
    unknown = set(changes) - allowed
    if unknown:
        raise UserError(f"cannot edit {', '.join(sorted(unknown))}")
    with store.session() as session:
        entry = _load(session, entry_id)
        merged = EntryInput(
            kind=entry.kind,
            on_date=changes.get("on_date") or date.fromisoformat(entry.on_date),
            paper_id=changes.get("paper_id", _paper_number(session, entry)),
            **{k: changes.get(k, getattr(entry, k)) for k in ("title", "hours", "stage", "link", "lab_id", "note")},
        )
        if entry.kind != "hours" and "hours" not in changes:
            merged.hours = None  # older versions let `log edit --hours` set hours on an item

        _validate(merged, today)
        paper = load_paper(session, merged.paper_id) if merged.paper_id is not None else None
        entry.on_date = merged.on_date.isoformat()
        for key in ("title", "hours", "stage", "link", "lab_id", "note"):
            setattr(entry, key, getattr(merged, key))
        entry.paper_id = paper.id if paper is not None else None
        entry.title = one_line(merged.title) or None
        if entry.kind == "reproduction" and paper is not None:
            mark_reproduced(session, merged.paper_id, merged.on_date)
        return entry_dict(entry, merged.paper_id)


def delete_entry(store, entry_id: int) -> dict:
    """Delete one entry (a paper it marked reproduced stays reproduced)."""
    with store.session() as session:
        entry = _load(session, entry_id)
        data = entry_dict(entry, _paper_number(session, entry))
        session.delete(entry)
    return data


def parse_entry_id(text: str | int) -> int:
    value = str(text).strip().lstrip("#")
    if not value.isdigit():
        raise UserError(f"invalid entry id {text!r}: expected a number (see `roadmap log list`)")
    return int(value)
