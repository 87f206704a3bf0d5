"""`paper import FILE.bib` and `paper export --format bibtex|json|csv`.

Imported entries without a `roadmap_status` field get the status chosen by
the learner (default to-read, undated: importing a library is not reading
it, so it must not fill this week's paper count). A duplicate (same arXiv
id, DOI or title as a logged paper, or as an earlier entry of the same file)
is skipped and reported with the existing id, unless `force`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.research.bibtex import (BibEntry, authors_from_bibtex, authors_to_bibtex, latex_to_text,
                                         parse_bibtex, text_to_latex, url_from_bibtex, url_to_bibtex)
from roadmap_cli.research.ids import looks_like_arxiv
from roadmap_cli.research.papers import STATUSES, PaperInput, find_duplicate, insert_paper, normalize_tags, prepare

EXPORT_FORMATS = ("bibtex", "json", "csv")
CSV_COLUMNS = ("id", "title", "authors", "year", "arxiv", "doi", "url", "stage", "status", "read_on",
               "added_on", "rating", "tags", "notes")


def _arxiv_of(fields: dict[str, str]) -> Optional[str]:
    prefix = (fields.get("archiveprefix") or fields.get("eprinttype") or "").lower()
    eprint = fields.get("eprint")
    if eprint and (prefix == "arxiv" or looks_like_arxiv(eprint)):
        return eprint
    for name in ("url", "journal", "note", "howpublished"):
        value = fields.get(name, "")
        match = re.search(r"arxiv(?:\.org/(?:abs|pdf)/|:\s*|\s+preprint\s+arxiv:)\s*([\w.\-/]+?)(?:\.pdf)?(?:[\s,}]|$)", value, re.I)
        if match and looks_like_arxiv(match.group(1)):
            return match.group(1)
    return None


def entry_to_input(entry: BibEntry, *, default_status: str, today: date) -> PaperInput:
    """Map one BibTeX entry to the log's fields (raises UserError when it cannot)."""
    # notes keep their line breaks; every other field is one line
    f = {k: latex_to_text(v, keep_lines=k == "annote") if k != "author" else v for k, v in entry.fields.items()}
    if not f.get("title"):
        raise UserError("has no title")
    year = f.get("year", "")
    arxiv = _arxiv_of(f)
    url = url_from_bibtex(entry.fields["url"]) if entry.fields.get("url") else None
    if url and arxiv and "arxiv.org" in url.lower():
        url = None  # the arXiv id already gives the link
    read_on = f.get("roadmap_read_on")
    stage, rating = f.get("roadmap_stage"), f.get("roadmap_rating")
    try:
        return PaperInput(
            title=f["title"], authors=authors_from_bibtex(entry.fields["author"]) if entry.fields.get("author") else None,
            year=int(year) if year.isdigit() else None, arxiv=arxiv, doi=f.get("doi") or None, url=url,
            tags=normalize_tags(re.split(r"[;,]", f.get("keywords", ""))), stage=int(stage) if stage else None,
            status=f.get("roadmap_status") or default_status, rating=int(rating) if rating else None,
            note=f.get("annote") or None, read_on=date.fromisoformat(read_on) if read_on else None,
            bibtex_key=entry.key,
        )
    except ValueError as exc:
        raise UserError(f"bad value: {exc}") from None


def import_bibtex(store, text: str, *, source: str, today: date, default_status: str = "to-read",
                  tags: Optional[list[str]] = None, force: bool = False) -> dict:
    """Import every good entry in one transaction; report the rest."""
    if default_status not in STATUSES:  # the user's one mistake, not every entry's
        raise UserError(f"unknown status {default_status!r} (choose {', '.join(STATUSES)})")
    entries, problems = parse_bibtex(text, source=source)
    imported, duplicates = [], []
    with store.session() as session:
        for entry in entries:
            where = f"{source}:{entry.line}:{entry.col}"
            try:
                values = prepare(entry_to_input(entry, default_status=default_status, today=today), today=today)
            except UserError as exc:
                problems.append(f"{where}: entry {entry.key!r} {exc.message} (skipped)")
                continue
            if not force:
                duplicate = find_duplicate(session, values)
                if duplicate:
                    duplicates.append({"key": entry.key, "existing_id": duplicate[0], "reason": duplicate[1]})
                    continue
            entry_tags = normalize_tags(re.split(r"[;,]", entry.fields.get("keywords", ""))) + normalize_tags(tags)
            paper_id = insert_paper(session, values, normalize_tags(entry_tags))
            imported.append({"id": paper_id, "key": entry.key, "title": values["title"]})
    problems.sort(key=lambda p: [int(n) if n.isdigit() else n for n in re.split(r"(\d+)", p)])
    return {"source": source, "imported": imported, "duplicates": duplicates, "problems": problems}


def all_papers(store) -> list[dict]:
    """Every paper with tags and notes, oldest first (export order is stable)."""
    from roadmap_cli.research.papers_query import PaperFilter, list_papers
    from sqlalchemy import text

    papers = list_papers(store, PaperFilter(), limit=None)["papers"]
    with store.engine.connect() as conn:
        extra = {r[0]: (r[1], r[2]) for r in conn.execute(text("SELECT id, notes, bibtex_key FROM papers"))}
        conn.rollback()
    for paper in papers:
        paper["notes"], paper["bibtex_key"] = extra[paper["id"]]
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


def to_bibtex(papers: list[dict]) -> str:
    taken: set[str] = set()
    chunks = []
    for p in papers:
        key = _citation_key(p, taken)
        taken.add(key)
        fields = [("title", f"{{{text_to_latex(p['title'])}}}")]
        if p.get("authors"):
            fields.append(("author", f"{{{authors_to_bibtex(p['authors'])}}}"))
        if p.get("year"):
            fields.append(("year", str(p["year"])))
        if p.get("arxiv"):
            fields += [("eprint", f"{{{p['arxiv']}}}"), ("archiveprefix", "{arXiv}")]
        for name in ("doi", "url"):
            if p.get(name) and not (name == "url" and p.get("arxiv") and "arxiv.org" in p[name]):
                fields.append((name, f"{{{url_to_bibtex(p[name]) if name == 'url' else p[name]}}}"))
        if p.get("tags"):
            fields.append(("keywords", f"{{{', '.join(p['tags'])}}}"))
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
