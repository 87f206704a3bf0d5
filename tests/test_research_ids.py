"""arXiv ids, DOIs and title keys: examples plus property-based tests."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from roadmap_cli.errors import UserError
from roadmap_cli.research.ids import ArxivId, normalize_doi, parse_arxiv, title_key

# --- strategies ------------------------------------------------------------------

months = st.integers(1, 12)
versions = st.one_of(st.none(), st.integers(1, 30))


@st.composite
def new_style(draw):
    """YYMM.NNNN before 2015, YYMM.NNNNN from 1501 on."""
    yy = draw(st.integers(7, 99))
    mm = draw(months)
    digits = 5 if yy >= 15 else 4
    number = draw(st.integers(0, 10**digits - 1))
    return f"{yy:02d}{mm:02d}.{number:0{digits}d}"


@st.composite
def old_style(draw):
    archive = draw(st.sampled_from(["hep-th", "hep-ph", "math", "cs", "cond-mat", "quant-ph", "astro-ph"]))
    subject = draw(st.sampled_from(["", ".GT", ".LG", ".AI"])) if archive in ("math", "cs") else ""
    yy, mm, n = draw(st.integers(91, 99) | st.integers(0, 7)), draw(months), draw(st.integers(1, 999))
    return f"{archive}{subject}/{yy:02d}{mm:02d}{n:03d}"


arxiv_ids = st.one_of(new_style(), old_style())


def dressed(ident: str, version, wrapper: int) -> str:
    """The same id as a user might paste it."""
    v = f"v{version}" if version else ""
    return [
        f"{ident}{v}",
        f"arXiv:{ident}{v}",
        f"  ARXIV: {ident}{v} ",
        f"https://arxiv.org/abs/{ident}{v}",
        f"http://arxiv.org/pdf/{ident}{v}",
        f"https://arxiv.org/pdf/{ident}{v}.pdf",
        f"https://www.arxiv.org/abs/{ident}{v}?context=cs",
        f"arxiv.org/abs/{ident}{v}/",
    ][wrapper]


@given(arxiv_ids, versions, st.integers(0, 7))
def test_every_arxiv_spelling_gives_the_same_id_with_version_apart(ident, version, wrapper):
    parsed = parse_arxiv(dressed(ident, version, wrapper))
    assert parsed == ArxivId(ident, version)
    assert str(parsed) == (f"{ident}v{version}" if version else ident)


@given(arxiv_ids, versions)
def test_arxiv_round_trips_through_its_own_string(ident, version):
    parsed = ArxivId(ident, version)
    assert parse_arxiv(str(parsed)) == parsed
    assert parse_arxiv(parsed.url) == parsed


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2307.08691", ArxivId("2307.08691")),
        ("1501.00001v2", ArxivId("1501.00001", 2)),
        ("0704.0001", ArxivId("0704.0001")),
        ("hep-th/9901001", ArxivId("hep-th/9901001")),
        ("math.gt/0309136v1", ArxivId("math.GT/0309136", 1)),
        ("https://arxiv.org/pdf/2307.08691v2.pdf", ArxivId("2307.08691", 2)),
        ("10.48550/arXiv.2307.08691", ArxivId("2307.08691")),
        ("arXiv:2307.08691v1 [cs.LG]", ArxivId("2307.08691", 1)),
        ("https://arxiv.org/html/2307.08691v2", ArxivId("2307.08691", 2)),
        ("https://doi.org/10.48550/arXiv.2205.14135", ArxivId("2205.14135")),
    ],
)
def test_arxiv_examples(text, expected):
    assert parse_arxiv(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2307",
        "2307.086",
        "2307.086912",
        "2313.08691",
        "2300.08691",
        "hep-th/990100",
        "https://example.com/abs/2307.08691",
        "2307.08691v0",
        "arXiv:",
        "flash attention",
    ],
)
def test_not_arxiv_is_a_clear_error(text):
    with pytest.raises(UserError, match="not an arXiv id"):
        parse_arxiv(text)


# --- DOIs ---------------------------------------------------------------------------

doi_suffix = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30)


@st.composite
def dois(draw):
    registrant = draw(st.integers(1000, 999_999_999))
    return f"10.{registrant}/{draw(doi_suffix)}"


@given(dois(), st.sampled_from(["", "doi:", "DOI: ", "https://doi.org/", "http://dx.doi.org/", "https://dx.doi.org/"]))
def test_doi_prefixes_stripped_and_lower_cased(doi, prefix):
    # a trailing "." ends the sentence the DOI was copied from (unless the suffix is only dots)
    # (the suffix is everything after the first "/": "10.1000//." has the suffix "/.", which keeps its "/")
    suffix = doi.split("/", 1)[1]
    expected = doi.rstrip(".") if suffix.rstrip(".") else doi
    assert normalize_doi(prefix + doi) == expected.lower()


@given(dois())
def test_doi_normalisation_is_idempotent_and_case_blind(doi):
    once = normalize_doi(doi)
    assert normalize_doi(once) == once
    assert normalize_doi(doi.upper()) == normalize_doi(doi.lower())


@pytest.mark.parametrize("text", ["", "10.1/abc", "11.1145/3600006", "doi:", "https://doi.org/", "10.1145/"])
def test_not_a_doi_is_a_clear_error(text):
    with pytest.raises(UserError, match="not a DOI"):
        normalize_doi(text)


# --- titles -------------------------------------------------------------------------


def test_title_key_ignores_case_punctuation_braces_and_accents():
    assert title_key("{FlashAttention}-2: Faster  Attention!") == title_key("flashattention 2 faster attention")
    assert title_key("Über Attention") == title_key("uber attention")
    assert title_key("Attention Is All You Need") != title_key("Attention Is Not All You Need")


@given(st.text(max_size=60))
def test_title_key_is_idempotent(title):
    assert title_key(title_key(title)) == title_key(title)
