"""Paper identifiers: arXiv ids, DOIs and the normalised title used to spot
a paper that is already in the log.

arXiv ids come in two styles:

- new style (April 2007 on): ``YYMM.NNNN`` (4-digit number, 0704-1412) and
  ``YYMM.NNNNN`` (5-digit number, 1501 on), e.g. ``2307.08691``;
- old style: ``archive[.SUBJ]/YYMMNNN``, e.g. ``hep-th/9901001``, ``math.GT/0309136``.

Either may carry a version (``v2``), an ``arXiv:`` prefix, or come as an
abs/pdf URL (``https://arxiv.org/pdf/2307.08691v2.pdf``). We store the id
without its version and keep the version apart, so v1 and v2 of one paper are
the same paper.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Optional

from roadmap_cli.errors import UserError

# YYMM.NNNN(N) with an optional version. The month must be 01-12.
_NEW_STYLE = r"(?P<new>\d{2}(?:0[1-9]|1[0-2])\.\d{4,5})"
# archive (letters and dashes), optional .SUBJECT class, then YYMMNNN.
_OLD_STYLE = r"(?P<old>[a-z][a-z-]*(?:\.[a-z]{2})?/\d{2}(?:0[1-9]|1[0-2])\d{3})"
_VERSION = r"(?:v(?P<version>[1-9]\d*))?"
_ARXIV_ID = re.compile(rf"(?:{_NEW_STYLE}|{_OLD_STYLE}){_VERSION}", re.IGNORECASE)
_ARXIV_URL = re.compile(
    r"^(?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/(?P<rest>.+?)(?:\.pdf)?/?(?:[?#].*)?$",
    re.IGNORECASE,
)
_ARXIV_PREFIX = re.compile(r"^arxiv:\s*", re.IGNORECASE)
# arXiv listings print "arXiv:2307.08691 [cs.LG]": the category is not part of the id.
_CATEGORY_SUFFIX = re.compile(r"\s*\[[a-z-]+(?:\.[a-z-]+)?\]$", re.IGNORECASE)
# An arXiv DOI (since 2022 every arXiv paper also has one) carries the id too.
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(?P<rest>.+)$", re.IGNORECASE)

_DOI_PREFIX = re.compile(r"^(?:doi:\s*|(?:https?://)?(?:dx\.)?doi\.org/)", re.IGNORECASE)
# Registrant code "10.NNNN" (4-9 digits, optional sub-codes) then a non-empty suffix.
_DOI = re.compile(r"^10\.\d{4,9}(?:\.\d+)*/\S+$")


@dataclass(frozen=True)
class ArxivId:
    id: str  # without version: "2307.08691", "hep-th/9901001"
    version: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.id}v{self.version}" if self.version else self.id

    @property
    def url(self) -> str:
        return f"https://arxiv.org/abs/{self}"


def _match_arxiv(text: str) -> Optional[ArxivId]:
    match = _ARXIV_ID.fullmatch(text)
    if match is None:
        return None
    if match.group("new"):
        ident = match.group("new")
    else:
        # Archive names are lower case; the subject class is upper case (math.GT).
        archive, number = match.group("old").split("/")
        name, _, subject = archive.partition(".")
        ident = f"{name.lower()}{'.' + subject.upper() if subject else ''}/{number}"
    version = match.group("version")
    return ArxivId(ident, int(version) if version else None)


def parse_arxiv(text: str) -> ArxivId:
    """Parse a bare id, an ``arXiv:`` id, an abs/pdf URL or an arXiv DOI.

    Raises UserError with the text when it is none of those.
    """
    value = _CATEGORY_SUFFIX.sub("", text.strip())
    url = _ARXIV_URL.match(value)
    if url:
        value = url.group("rest")
    else:
        value = _ARXIV_PREFIX.sub("", value)
        doi = _ARXIV_DOI.match(_DOI_PREFIX.sub("", value))
        if doi:
            value = doi.group("rest")
    parsed = _match_arxiv(value)
    if parsed is None:
        raise UserError(
            f"not an arXiv id or URL: {text!r} (expected e.g. 2307.08691, hep-th/9901001 or https://arxiv.org/abs/2307.08691)"
        )
    return parsed


def looks_like_arxiv(text: str) -> bool:
    try:
        parse_arxiv(text)
    except UserError:
        return False
    return True


def normalize_doi(text: str) -> str:
    """Strip ``doi:`` / ``https://doi.org/`` / ``http://dx.doi.org/`` and lower-case.

    DOIs are case-insensitive by definition, so lower case is the canonical
    form for comparing them. A trailing ``.`` is the end of the sentence a
    DOI was copied from, not part of it, so it goes too (unless nothing of
    the suffix would be left).
    """
    value = _DOI_PREFIX.sub("", text.strip())
    if value.endswith(".") and _DOI.match(value.rstrip(".")):
        value = value.rstrip(".")
    if not _DOI.match(value):
        raise UserError(f"not a DOI: {text!r} (expected e.g. 10.1145/3600006.3613165 or https://doi.org/...)")
    return value.lower()


_DOI_URL = re.compile(r"^(?:https?://)?(?:dx\.)?doi\.org/(?P<doi>10\..+)$", re.IGNORECASE)


def doi_from_url(url: str) -> Optional[str]:
    """The DOI of a ``https://doi.org/10....`` link (percent-escapes undone), else None.

    A BibTeX entry often gives its DOI only as such a link; reading it lets
    duplicates be caught by DOI all the same.
    """
    from urllib.parse import unquote

    match = _DOI_URL.match(url.strip())
    if match is None:
        return None
    try:
        return normalize_doi(unquote(match.group("doi")))
    except UserError:
        return None


_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _drop_combining(match: re.Match) -> str:
    return "" if unicodedata.combining(match.group(0)) else match.group(0)


def title_key(title: str) -> str:
    """The title reduced to lower-case words: case, accents, punctuation,
    LaTeX braces and spacing no longer matter when comparing two titles.

    >>> title_key("FlashAttention-2: Faster  Attention")
    'flashattention 2 faster attention'
    """
    if title.isascii():  # nothing to decompose (checked in C; most titles)
        text = title
    else:
        # Decompose, then drop the accents: only non-ASCII characters are looked at.
        text = _NON_ASCII.sub(_drop_combining, unicodedata.normalize("NFKD", title))
    return _NON_WORD.sub(" ", text.casefold()).strip()


def duplicate_title_key(title_key_value: str) -> str:
    """What two titles must share to be the same paper: `title_key` without
    its spaces, so "Paged-Attention", "Paged Attention" and "PagedAttention"
    all read `pagedattention`.

    The stored column keeps the spaced form (readable, and what databases
    already hold); SQL compares ``REPLACE(title_key, ' ', '')`` to this.
    """
    return title_key_value.replace(" ", "")
