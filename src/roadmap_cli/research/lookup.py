"""Logging a paper by its id: recognise an arXiv id or DOI, fetch what the
registries know, and merge it under what the learner typed; `paper refresh`
fills in what older entries lack.

The rule everywhere: a value the learner typed is never replaced. Fetched
values fill empty fields only; the one exception is the stand-in title a paper
logged with `--no-fetch` gets ("arXiv:2307.08691"), which a fetched title
replaces because the learner never typed it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Callable, Iterable, Optional, Sequence

from roadmap_cli.errors import RoadmapError, UserError
from roadmap_cli.research.ids import doi_from_url, normalize_doi, parse_arxiv
from roadmap_cli.research.metadata import PaperMetadata
from roadmap_cli.research.papers import PaperInput

# Columns a fetch may fill (each only while empty).
FILLABLE = ("authors", "year", "venue", "abstract", "pdf_url", "url")


@dataclass(frozen=True)
class PaperRef:
    kind: str  # "arxiv" | "doi"
    value: str  # the arXiv id with its version if given, or the normalised DOI

    def __str__(self) -> str:
        return f"arXiv:{self.value}" if self.kind == "arxiv" else f"doi:{self.value}"


def recognise(text: str) -> Optional[PaperRef]:
    """An arXiv id or URL, or a DOI or doi.org URL, in `text`; None for a title.

    Ordered so that arXiv's own DOIs (10.48550/arXiv.2307.08691) read as arXiv
    ids: the export API is the better source for them.
    """
    value = text.strip()
    if not value or " " in value:
        return None  # titles have spaces; ids and URLs never do
    try:
        return PaperRef("arxiv", str(parse_arxiv(value)))
    except UserError:
        pass
    doi = doi_from_url(value)
    if doi is None:
        try:
            doi = normalize_doi(value) if value.lower().startswith(("10.", "doi:")) else None
        except UserError:
            doi = None
    return PaperRef("doi", doi) if doi else None


def split_title_or_id(
    text: Optional[str], *, title: Optional[str], arxiv: Optional[str], doi: Optional[str]
) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """`paper log X`: X is a title, or an id or link standing alone.

    Returns (title, arxiv, doi). Two different ids of one kind, or two titles,
    are refused rather than one silently winning.
    """
    if text is None:
        return title, arxiv, doi
    ref = recognise(text)
    if ref is None:
        if title is not None:
            raise UserError(f"two titles given ({text!r} and --title {title!r}): give one")
        return text, arxiv, doi
    if ref.kind == "arxiv":
        if arxiv and str(parse_arxiv(arxiv)) != ref.value:
            raise UserError(f"two arXiv ids given ({ref.value} and --arxiv {arxiv}): give one")
        return title, ref.value, doi
    if doi and normalize_doi(doi) != ref.value:
        raise UserError(f"two DOIs given ({ref.value} and --doi {doi}): give one")
    return title, arxiv, ref.value


def placeholder_title(ref: PaperRef) -> str:
    """The title of a paper logged by id with --no-fetch, until a refresh."""
    return str(ref)


def ref_of(inp: PaperInput) -> Optional[PaperRef]:
    """What to look the paper up by: its arXiv id first, else its DOI."""
    if inp.arxiv:
        return PaperRef("arxiv", str(parse_arxiv(inp.arxiv)))
    if inp.doi:
        return PaperRef("doi", normalize_doi(inp.doi))
    return None


def fetch(fetcher, ref: PaperRef):
    return fetcher.arxiv(ref.value) if ref.kind == "arxiv" else fetcher.doi(ref.value)


def merge_into(inp: PaperInput, meta: PaperMetadata, fetched_on: str) -> PaperInput:
    """`inp` with every empty field filled from `meta`; typed values win."""
    changes: dict = {"metadata_source": meta.source, "metadata_fetched_on": fetched_on}
    if not (inp.title or "").strip() and meta.title:
        changes["title"] = meta.title
    if not inp.authors and meta.authors:
        changes["authors"] = ", ".join(meta.authors)
    if inp.year is None and meta.year:
        changes["year"] = meta.year
    for name in ("venue", "abstract", "pdf_url"):
        if not getattr(inp, name) and getattr(meta, name):
            changes[name] = getattr(meta, name)
    if not inp.url and meta.url and meta.source != "arxiv":
        changes["url"] = meta.url  # an arXiv paper's link is made from its id
    return replace(inp, **changes)


@dataclass
class LogPlan:
    """What `paper log` will write, and what to tell the learner about the fetch."""

    inp: PaperInput
    notice: Optional[str] = None  # e.g. "metadata not fetched: ..."; the CLI adds `paper refresh NUMBER`
    from_cache: bool = False


def by_hand_command(inp: PaperInput, ref: PaperRef, *, force: bool = False, root_options: Sequence[str] = ()) -> str:
    """`paper log` as the learner would type it to log this paper without a fetch: a title to fill in,
    and every option they gave (the root's --home/--curriculum, tags, status, date, ...), so that nothing
    they asked for is lost."""
    import shlex

    words = ["roadmap", *root_options, "paper", "log", "--title", '"…"', f"--{ref.kind}", ref.value]
    if inp.doi and ref.kind != "doi":
        words += ["--doi", inp.doi]
    options = (
        ("--authors", inp.authors),
        ("--year", inp.year),
        ("--url", inp.url),
        ("--tags", ",".join(inp.tags) if inp.tags else None),
        ("--stage", inp.stage),
        ("--status", inp.status if inp.status != "read" else None),
        ("--rating", inp.rating),
        ("--note", inp.note),
        ("--date", inp.read_on.isoformat() if inp.read_on else None),
    )
    words += [part for name, value in options if value is not None for part in (name, str(value))]
    if force:
        words.append("--force")
    return " ".join(w if w == '"…"' else shlex.quote(w) for w in words)


def plan_log(
    inp: PaperInput,
    *,
    fetch_metadata: bool,
    fetcher_factory: Callable[[], object],
    force: bool = False,
    root_options: Sequence[str] = (),
) -> LogPlan:
    """Decide the paper to log from what was typed, fetching when asked.

    Raises the fetch's error (one line, saying how to log by hand with every
    option given: `force` is one) when no title was typed: there is nothing
    worth logging without one.
    """
    ref = ref_of(inp)
    typed_title = bool((inp.title or "").strip())
    if ref is None:
        if not typed_title:
            raise UserError(
                "a paper needs a title, or an arXiv id or DOI to fetch one "
                '(e.g. roadmap paper log 2307.08691, or roadmap paper log "Title")'
            )
        return LogPlan(inp)
    if not fetch_metadata:
        if typed_title:
            return LogPlan(inp)
        return LogPlan(replace(inp, title=placeholder_title(ref)), notice="logged under its id without metadata")
    try:
        lookup = fetch(fetcher_factory(), ref)
    except RoadmapError as exc:
        if typed_title:
            return LogPlan(inp, notice=f"metadata not fetched ({exc.message}); logged what you typed")
        raise type(exc)(
            f"{exc.message} — log it by hand: {by_hand_command(inp, ref, force=force, root_options=root_options)}, "
            f"or add --no-fetch to log it under its id now"
        ) from None
    merged = merge_into(inp, lookup.metadata, lookup.fetched_on)
    if not (merged.title or "").strip():
        raise UserError(f'{ref} has no title in the registry\'s record — log it with --title "…"')
    return LogPlan(merged, from_cache=lookup.from_cache)


# ---------------------------------------------------------------- refresh


def stored_ref(paper: dict) -> Optional[PaperRef]:
    """How a logged paper is looked up: its arXiv id (with version), else its DOI."""
    if paper.get("arxiv"):
        return PaperRef("arxiv", paper["arxiv"])
    if paper.get("doi"):
        return PaperRef("doi", paper["doi"])
    return None


def missing_fields(paper: dict, meta: PaperMetadata) -> dict:
    """The column values a refresh writes: only fields the paper lacks."""
    values: dict = {}
    ref = stored_ref(paper)
    if meta.title and ref is not None and paper["title"] in (placeholder_title(ref), placeholder_title(_bare(ref))):
        values["title"] = meta.title
    if not paper.get("authors") and meta.authors:
        values["authors"] = ", ".join(meta.authors)
    if paper.get("year") is None and meta.year:
        values["year"] = meta.year
    for name in ("venue", "abstract", "pdf_url"):
        if not paper.get(name) and getattr(meta, name):
            values[name] = getattr(meta, name)
    if not paper.get("url") and meta.url and meta.source != "arxiv":
        values["url"] = meta.url
    return values


def _bare(ref: PaperRef) -> PaperRef:
    if ref.kind != "arxiv":
        return ref
    return PaperRef("arxiv", str(parse_arxiv(ref.value).id))


def refresh_papers(
    store,
    paper_ids: Optional[Iterable[int]],
    fetcher,
    *,
    today: date,
    on_step: Callable[[dict], None] = lambda row: None,
) -> dict:
    """Fill in missing metadata for the given papers (None: every paper with
    an id). Each paper is looked up once (the cache answers repeats); a
    failure is reported for that paper and the rest go on."""
    from roadmap_cli.research.papers import fill_paper, papers_with_ids

    targets = papers_with_ids(store, None if paper_ids is None else list(paper_ids))
    rows = []
    for paper in targets:
        ref = stored_ref(paper)
        row: dict = {"id": paper["id"], "title": paper["title"], "ref": str(ref) if ref else None}
        if ref is None:
            row.update(result="skipped", reason="no arXiv id or DOI to look up")
        else:
            try:
                lookup = fetch(fetcher, ref)
            except RoadmapError as exc:
                row.update(result="failed", reason=exc.message)
            else:
                values = missing_fields(paper, lookup.metadata)
                if values:
                    fill_paper(store, paper["id"], values, source=lookup.metadata.source, fetched_on=lookup.fetched_on)
                    row.update(result="filled", fields=sorted(values), title=values.get("title", paper["title"]))
                else:
                    row.update(result="up to date")
                row["from_cache"] = lookup.from_cache
        rows.append(row)
        on_step(row)
    counts = {k: sum(1 for r in rows if r["result"] == k) for k in ("filled", "up to date", "skipped", "failed")}
    return {
        "papers": rows,
        **{k.replace(" ", "_"): v for k, v in counts.items()},
        "network_calls": getattr(fetcher, "network_calls", 0),
    }
