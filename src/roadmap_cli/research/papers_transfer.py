"""`paper import FILE.bib` and `paper export --format bibtex|json|csv`.

Imported entries without a `roadmap_status` field get the status chosen by
the learner (default to-read, undated: importing a library is not reading
it, so it must not fill this week's paper count). A duplicate (same arXiv
id, DOI or title as a logged paper, or as an earlier entry of the same file)
is skipped and reported with the existing id, unless `force`.

Ids are the learner's paper numbers (research/numbers.py): imported papers
are numbered on from the learner's last one, whatever the file came from, so
an import never clashes with papers already logged; an export's "id" is that
number.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.research.bibtex import BibEntry, LineIndex, parse_bibtex
from roadmap_cli.research.ids import doi_from_url, looks_like_arxiv
from roadmap_cli.research.latex import (
    authors_from_bibtex,
    authors_to_bibtex,
    latex_source_to_bibtex,
    latex_to_text,
    text_to_latex,
    url_from_bibtex,
    url_to_bibtex,
)
from roadmap_cli.research.papers import STATUSES, PaperInput, normalize_tags, prepare, utc_now_iso

EXPORT_FORMATS = ("bibtex", "json", "csv")
CSV_COLUMNS = (
    "id",
    "title",
    "authors",
    "year",
    "arxiv",
    "doi",
    "url",
    "stage",
    "status",
    "read_on",
    "added_on",
    "rating",
    "tags",
    "notes",
    "venue",
)
_ARXIV_IN_TEXT = re.compile(
    r"arxiv(?:\.org/(?:abs|pdf)/|:\s*|\s+preprint\s+arxiv:)\s*([\w.\-/]+?)(?:\.pdf)?(?:[\s,}]|$)", re.I
)
_KEYWORD_SPLIT = re.compile(r"[;,]")


class BadField(UserError):
    """A field's value cannot be used; `field` lets the report point at it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _arxiv_of(fields: dict[str, str]) -> Optional[str]:
    prefix = latex_to_text(fields.get("archiveprefix") or fields.get("eprinttype") or "").lower()
    eprint = latex_to_text(fields["eprint"]) if fields.get("eprint") else None
    if eprint and (prefix == "arxiv" or looks_like_arxiv(eprint)):
        return eprint
    for name in ("url", "journal", "note", "howpublished"):
        value = fields.get(name)
        if not value or "arxiv" not in value.lower():  # the regex only for fields that can match
            continue
        match = _ARXIV_IN_TEXT.search(latex_to_text(value) if name != "url" else value)
        if match and looks_like_arxiv(match.group(1)):
            return match.group(1)
    return None


def _whole_number(fields: dict[str, str], name: str, what: str, low: int, high: Optional[int] = None) -> Optional[int]:
    """An integer field in [low, high], or BadField naming it ({-3} is not a stage)."""
    raw = fields.get(name)
    if raw is None or not raw.strip():
        return None
    text = latex_to_text(raw)
    number = int(text) if text.isdigit() else None
    if number is None or number < low or (high is not None and number > high):
        allowed = f"{low} to {high}" if high is not None else f"{low} or more"
        raise BadField(name, f"has {name} = {text!r}: {what} must be a whole number, {allowed}")
    return number


def entry_to_input(entry: BibEntry, *, default_status: str, today: date) -> PaperInput:
    """Map one BibTeX entry to the log's fields (raises UserError when it cannot).

    Only the fields the log keeps are converted from LaTeX (a journal name or
    an abstract is never read, so it costs nothing).
    """
    fields = entry.fields
    title = latex_to_text(fields.get("title", ""))
    if not title:
        raise UserError("has no title")
    year = latex_to_text(fields.get("year", ""))
    arxiv = _arxiv_of(fields)
    url = url_from_bibtex(fields["url"]) if fields.get("url") else None
    if url and arxiv and "arxiv.org" in url.lower():
        url = None  # the arXiv id already gives the link
    doi = latex_to_text(fields["doi"]) if fields.get("doi") else None
    if not doi and url:
        doi = doi_from_url(url)  # the DOI given only as a doi.org link
    read_on = latex_to_text(fields.get("roadmap_read_on", ""))
    note = latex_to_text(fields["annote"], keep_lines=True) if fields.get("annote") else None
    try:
        read_date = date.fromisoformat(read_on) if read_on else None
    except ValueError:
        raise BadField("roadmap_read_on", f"has roadmap_read_on = {read_on!r}: expected a date YYYY-MM-DD") from None
    return PaperInput(
        title=title,
        authors=authors_from_bibtex(fields["author"]) if fields.get("author") else None,
        year=int(year) if year.isdigit() else None,
        arxiv=arxiv,
        doi=doi,
        url=url,
        tags=normalize_tags(_KEYWORD_SPLIT.split(latex_to_text(fields.get("keywords", "")))),
        stage=_whole_number(fields, "roadmap_stage", "a stage", 1),
        status=latex_to_text(fields.get("roadmap_status", "")) or default_status,
        rating=_whole_number(fields, "roadmap_rating", "a rating", 1, 5),
        note=note or None,
        read_on=read_date,
        bibtex_key=entry.key,
    )


def import_bibtex(
    store,
    text: str,
    *,
    source: str,
    today: date,
    default_status: str = "to-read",
    tags: Optional[list[str]] = None,
    force: bool = False,
    stages: Optional[set[int]] = None,
) -> dict:
    """Import every good entry in one transaction; report the rest.

    `stages`: the curriculum's stage numbers, when known; a roadmap_stage
    outside them is refused like any bad value.

    Cost is linear in the entries: one parse, one SELECT for duplicates, one
    batched INSERT (see `bulk`).
    """
    from roadmap_cli.research.bulk import DuplicateIndex, insert_papers

    if default_status not in STATUSES:  # the user's one mistake, not every entry's
        raise UserError(f"unknown status {default_status!r} (choose {', '.join(STATUSES)})")
    entries, problems = parse_bibtex(text, source=source)
    extra_tags = normalize_tags(tags)
    lines: Optional[LineIndex] = None
    rows, row_tags, accepted, duplicates = [], [], [], []
    with store.session() as session:
        conn = session.connection()
        index = None if force else DuplicateIndex(conn, store.learner)
        for entry in entries:
            try:
                inp = entry_to_input(entry, default_status=default_status, today=today)
                if stages and inp.stage is not None and inp.stage not in stages:
                    raise BadField(
                        "roadmap_stage",
                        f"has roadmap_stage = '{inp.stage}': the curriculum has no such "
                        f"stage (stages {min(stages)} to {max(stages)})",
                    )
                values = prepare(inp, today=today)
            except UserError as exc:
                line, col = entry.line, entry.col
                if isinstance(exc, BadField) and exc.field in entry.field_at:
                    lines = lines or LineIndex(text)
                    line, col = lines.where(entry.field_at[exc.field])
                problems.append(f"{source}:{line}:{col}: entry {entry.key!r} {exc.message} (skipped)")
                continue
            if index is not None:
                found = index.find(values)
                if found is not None:
                    duplicates.append({"key": entry.key, "existing_id": found[0], "reason": found[1]})
                    continue
                index.add(values, ("pending", len(rows)))
            rows.append(values)
            row_tags.append(normalize_tags(inp.tags + extra_tags))
            accepted.append(entry.key)
        ids = insert_papers(conn, rows, row_tags, created_at=utc_now_iso(), learner=store.learner)
    # A duplicate of an entry earlier in the same file names that entry's new id.
    for duplicate in duplicates:
        ref = duplicate["existing_id"]
        if isinstance(ref, tuple):
            duplicate["existing_id"] = ids[ref[1]]
    imported = [{"id": pid, "key": key, "title": row["title"]} for pid, key, row in zip(ids, accepted, rows)]
    problems.sort(key=lambda p: [int(n) if n.isdigit() else n for n in re.split(r"(\d+)", p)])
    return {"source": source, "imported": imported, "duplicates": duplicates, "problems": problems}


def all_papers(store) -> list[dict]:
    """Every paper with tags and notes, oldest first (export order is stable)."""
    from roadmap_cli.research.papers_query import PaperFilter, list_papers
    from sqlalchemy import text

    papers = list_papers(store, PaperFilter(), limit=None)["papers"]
    with store.engine.connect() as conn:
        extra = {
            r[0]: r[1:]
            for r in conn.execute(
                text(
                    "SELECT number, notes, bibtex_key, venue, abstract, pdf_url, metadata_source FROM papers "
                    "WHERE learner = :l"
                ),
                {"l": store.learner},
            )
        }
        conn.rollback()
    for paper in papers:
        (
            paper["notes"],
            paper["bibtex_key"],
            paper["venue"],
            paper["abstract"],
            paper["pdf_url"],
            paper["metadata_source"],
        ) = extra[paper["id"]]
        del paper["has_notes"]
    return sorted(papers, key=lambda p: p["id"])


def _citation_key(paper: dict, taken: set[str]) -> str:
    if paper.get("bibtex_key") and paper["bibtex_key"] not in taken:
        return paper["bibtex_key"]
    first_author = (paper.get("authors") or "").split(",")[0].split()
    last = re.sub(r"[^a-z]", "", (first_author[-1] if first_author else "anon").lower()) or "anon"
    words = [w for w in re.findall(r"[a-z0-9]+", paper["title"].lower()) if w not in {"a", "an", "the", "on", "of"}]
    base = f"{last}{paper.get('year') or ''}{words[0] if words else 'paper'}"
    key, n = base, 0
    while key in taken:
        n += 1
        key = f"{base}{chr(ord('a') + n - 1)}" if n <= 26 else f"{base}{n}"
    return key


_ARXIV_CATEGORY = re.compile(r"[a-z-]+(?:\.[A-Za-z-]+)?")  # cs.LG, hep-th, math.GT


def to_bibtex(papers: list[dict]) -> str:
    taken: set[str] = set()
    chunks = []
    for p in papers:
        key = _citation_key(p, taken)
        taken.add(key)
        # arXiv's titles and abstracts are LaTeX source already (\emph, $math$): written as they are, not
        # escaped again. Everything else is text the learner typed, escaped so that it reads back the same.
        source_latex = latex_source_to_bibtex if p.get("metadata_source") == "arxiv" else text_to_latex
        fields = [("title", f"{{{source_latex(p['title'])}}}")]
        if p.get("authors"):
            fields.append(("author", f"{{{authors_to_bibtex(p['authors'])}}}"))
        if p.get("year"):
            fields.append(("year", str(p["year"])))
        if p.get("arxiv"):
            fields += [("eprint", f"{{{p['arxiv']}}}"), ("archiveprefix", "{arXiv}")]
        venue = p.get("venue")
        if venue and p.get("arxiv") and _ARXIV_CATEGORY.fullmatch(venue):
            fields.append(("primaryclass", f"{{{venue}}}"))  # what arXiv's own BibTeX calls the category
        elif venue:
            fields.append(("journal" if p.get("doi") else "howpublished", f"{{{text_to_latex(venue)}}}"))
        for name in ("doi", "url"):
            if p.get(name) and not (name == "url" and p.get("arxiv") and "arxiv.org" in p[name]):
                fields.append((name, f"{{{url_to_bibtex(p[name]) if name == 'url' else p[name]}}}"))
        if p.get("tags"):
            fields.append(("keywords", f"{{{', '.join(p['tags'])}}}"))
        if p.get("abstract"):
            fields.append(("abstract", f"{{{source_latex(p['abstract'])}}}"))
        if p.get("notes"):
            fields.append(("annote", f"{{{text_to_latex(p['notes'])}}}"))
        fields.append(("roadmap_status", f"{{{p['status']}}}"))
        for name in ("read_on", "stage", "rating"):
            if p.get(name) is not None:
                fields.append((f"roadmap_{name}", f"{{{p[name]}}}"))
        body = ",\n".join(f"  {name} = {value}" for name, value in fields)
        chunks.append(f"@{'article' if p.get('doi') else 'misc'}{{{key},\n{body}\n}}\n")
    return "\n".join(chunks)


def export_papers(store, fmt: str) -> str:
    """The whole paper log as BibTeX, JSON (a list) or CSV text."""
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"unknown format {fmt!r} (choose {', '.join(EXPORT_FORMATS)})")
    papers = all_papers(store)
    if fmt == "bibtex":
        return to_bibtex(papers)
    if fmt == "json":
        return json.dumps(papers, ensure_ascii=False, indent=2) + "\n"
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for p in papers:
        writer.writerow({**p, "tags": ";".join(p["tags"])})
    return out.getvalue()


__all__ = ["import_bibtex", "export_papers", "to_bibtex", "entry_to_input"]
