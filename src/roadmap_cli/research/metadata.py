"""A paper's metadata as the public registries describe it, read from their
responses: arXiv's export API (an Atom feed), Crossref's and DataCite's REST
APIs (JSON). Pure parsing, no network (that is `research/fetch.py`), so every
quirk below is tested on bytes.

The quirks worth knowing, each handled here:

- arXiv answers an id it does not know with an empty feed, and a malformed
  query with HTTP 200 and one entry titled "Error" (its summary says what was
  wrong): a status code alone never tells success.
- arXiv's titles and abstracts arrive hard-wrapped mid-sentence: whitespace is
  collapsed.
- Crossref wraps a work in ``{"status": "ok", "message": {...}}``; titles are
  lists, dates are ``{"date-parts": [[2023, 10, 23]]}`` under several keys
  (``published``, ``published-print``, ``issued``...), abstracts are JATS XML.
- DataCite uses JSON:API: ``{"data": {"attributes": {...}}}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Optional

from roadmap_cli.errors import UserError

ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV_NS = "{http://arxiv.org/schemas/atom}"
OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"

_SPACES = re.compile(r"\s+")
_TAGS = re.compile(r"<[^>]+>")


class MetadataError(UserError):
    """A registry's answer could not be turned into metadata (unknown id,
    malformed body). The message names what failed; the caller adds how to
    log the paper by hand."""


@dataclass
class PaperMetadata:
    """What a registry says about one paper; every field may be missing."""

    source: str  # "arxiv" | "crossref" | "datacite"
    title: Optional[str] = None
    authors: list[str] = field(default_factory=list)
    year: Optional[int] = None
    venue: Optional[str] = None  # journal / proceedings; for arXiv, the primary category (cs.LG)
    abstract: Optional[str] = None
    url: Optional[str] = None  # the landing page
    pdf_url: Optional[str] = None
    doi: Optional[str] = None
    arxiv_id: Optional[str] = None  # with its version when the registry names one ("2307.08691v1")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "PaperMetadata":
        known = {name: data.get(name) for name in cls.__dataclass_fields__ if name in data}
        known["authors"] = [str(a) for a in known.get("authors") or []]
        return cls(**known)


def clean(text: Optional[str]) -> Optional[str]:
    """Collapse the registries' hard wraps and runs of spaces; '' becomes None."""
    if text is None:
        return None
    value = _SPACES.sub(" ", text).strip()
    return value or None


# ---------------------------------------------------------------- arXiv (Atom)


def parse_arxiv_feed(body: bytes, wanted: str) -> PaperMetadata:
    """The entry for arXiv id `wanted` (without version) in an export-API feed.

    Raises MetadataError for a body that is not a feed, an "Error" entry, or a
    feed without the paper.
    """
    # xml.etree on Python >= 3.11 uses expat >= 2.4.1, which refuses entity
    # expansion bombs; external entities are never fetched. The body's size is
    # bounded before it gets here (fetch.py).
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise MetadataError(f"arXiv sent a response that is not valid XML ({exc})") from None
    if root.tag != f"{ATOM}feed":
        raise MetadataError("arXiv sent XML that is not an Atom feed")
    for entry in root.findall(f"{ATOM}entry"):
        title = clean(entry.findtext(f"{ATOM}title"))
        entry_id = clean(entry.findtext(f"{ATOM}id")) or ""
        if title == "Error" and "/api/errors" in entry_id:
            reason = clean(entry.findtext(f"{ATOM}summary")) or "no reason given"
            raise MetadataError(f"arXiv refused the query: {reason}")
        ident = _arxiv_id_of(entry_id)
        if ident is None or _strip_version(ident) != _strip_version(wanted):
            continue
        return _arxiv_entry(entry, ident, title)
    raise MetadataError(f"arXiv has no paper {wanted}")


def _strip_version(ident: str) -> str:
    return re.sub(r"v\d+$", "", ident)


def _arxiv_id_of(entry_id: str) -> Optional[str]:
    # Entry ids are abs URLs: http(s)://arxiv.org/abs/2307.08691v1 or .../abs/hep-th/9711200v3.
    match = re.search(r"/abs/(.+)$", entry_id)
    return match.group(1) if match else None


def _arxiv_entry(entry, ident: str, title: Optional[str]) -> PaperMetadata:
    authors = [name for a in entry.findall(f"{ATOM}author") if (name := clean(a.findtext(f"{ATOM}name")))]
    published = clean(entry.findtext(f"{ATOM}published")) or ""
    year = int(published[:4]) if published[:4].isdigit() else None
    primary = entry.find(f"{ARXIV_NS}primary_category")
    venue = clean(entry.findtext(f"{ARXIV_NS}journal_ref")) or (primary.get("term") if primary is not None else None)
    page = pdf = None
    for link in entry.findall(f"{ATOM}link"):
        href = link.get("href")
        if link.get("title") == "pdf" or link.get("type") == "application/pdf":
            pdf = pdf or href
        elif link.get("rel") == "alternate":
            page = page or href
    return PaperMetadata(
        source="arxiv",
        title=title,
        authors=authors,
        year=year,
        venue=venue,
        abstract=clean(entry.findtext(f"{ATOM}summary")),
        url=_https(page),
        pdf_url=_https(pdf),
        doi=clean(entry.findtext(f"{ARXIV_NS}doi")),
        arxiv_id=ident,
    )


def _https(url: Optional[str]) -> Optional[str]:
    # Older feeds still write http:// links; arXiv serves every page over https.
    if url and url.startswith("http://arxiv.org/"):
        return "https://" + url[len("http://") :]
    return url


# ---------------------------------------------------------------- Crossref (JSON)


def _json(body: bytes, who: str) -> dict:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetadataError(f"{who} sent a response that is not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise MetadataError(f"{who} sent JSON that is not an object")
    return data


def _first(value) -> Optional[str]:
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, str) and v.strip()), None)
    return clean(value) if isinstance(value, str) else None


def _year_of(work: dict) -> Optional[int]:
    # The first date Crossref has, earliest meaning first: when it was published.
    for key in ("published", "published-print", "published-online", "issued", "created"):
        parts = (work.get(key) or {}).get("date-parts") if isinstance(work.get(key), dict) else None
        if parts and isinstance(parts[0], list) and parts[0] and isinstance(parts[0][0], int):
            return parts[0][0]
    return None


def jats_to_text(text: Optional[str]) -> Optional[str]:
    """Crossref abstracts are JATS XML (<jats:p>...): the words without the tags."""
    if not text:
        return None
    import html

    value = clean(html.unescape(_TAGS.sub(" ", text)))
    if value and value.lower().startswith("abstract "):
        value = value[len("abstract ") :]  # JATS often opens with a <jats:title>Abstract</jats:title>
    return value


def parse_crossref_work(body: bytes) -> PaperMetadata:
    data = _json(body, "Crossref")
    work = data.get("message")
    if data.get("status") != "ok" or not isinstance(work, dict):
        raise MetadataError("Crossref sent JSON without a work in it")
    authors = []
    for person in work.get("author") or []:
        if not isinstance(person, dict):
            continue
        name = " ".join(p for p in (person.get("given"), person.get("family")) if isinstance(p, str) and p.strip())
        name = name or (person.get("name") if isinstance(person.get("name"), str) else "")
        if clean(name):
            authors.append(clean(name))
    pdf = None
    for link in work.get("link") or []:
        if (
            isinstance(link, dict)
            and link.get("content-type") == "application/pdf"
            and isinstance(link.get("URL"), str)
        ):
            pdf = link["URL"]
            break
    doi = work.get("DOI")
    return PaperMetadata(
        source="crossref",
        title=_first(work.get("title")),
        authors=authors,
        year=_year_of(work),
        venue=_first(work.get("container-title"))
        or _first(work.get("event", {}).get("name") if isinstance(work.get("event"), dict) else None),
        abstract=jats_to_text(work.get("abstract") if isinstance(work.get("abstract"), str) else None),
        url=f"https://doi.org/{doi}" if isinstance(doi, str) else None,
        pdf_url=pdf,
        doi=doi.lower() if isinstance(doi, str) else None,
    )


# ---------------------------------------------------------------- DataCite (JSON:API)


def parse_datacite_doi(body: bytes) -> PaperMetadata:
    data = _json(body, "DataCite")
    attrs = (data.get("data") or {}).get("attributes") if isinstance(data.get("data"), dict) else None
    if not isinstance(attrs, dict):
        raise MetadataError("DataCite sent JSON without a record in it")
    titles = [t.get("title") for t in attrs.get("titles") or [] if isinstance(t, dict)]
    authors = []
    for person in attrs.get("creators") or []:
        if not isinstance(person, dict):
            continue
        given, family = person.get("givenName"), person.get("familyName")
        name = f"{given} {family}" if isinstance(given, str) and isinstance(family, str) else person.get("name")
        if isinstance(name, str) and clean(name):
            authors.append(clean(name))
    abstracts = [
        d.get("description")
        for d in attrs.get("descriptions") or []
        if isinstance(d, dict) and d.get("descriptionType") == "Abstract"
    ]
    year = attrs.get("publicationYear")
    doi = attrs.get("doi")
    return PaperMetadata(
        source="datacite",
        title=_first(titles),
        authors=authors,
        year=int(year) if isinstance(year, (int, str)) and str(year).isdigit() else None,
        venue=_first(
            attrs.get("publisher")
            if isinstance(attrs.get("publisher"), str)
            else (attrs.get("publisher") or {}).get("name")
            if isinstance(attrs.get("publisher"), dict)
            else None
        ),
        abstract=_first(abstracts),
        url=f"https://doi.org/{doi}" if isinstance(doi, str) else None,
        doi=doi.lower() if isinstance(doi, str) else None,
    )
