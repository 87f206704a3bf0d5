"""Logging a paper by its id (issue 40), through the real HTTP client against a
local server that answers in the registries' formats (tests/fixtures_papers).

Each test sets how the server behaves for one path; the server counts the
requests it saw, so "from the cache, no network" is a count that stays put.
"""

from __future__ import annotations

import json
import time

import pytest
from paper_registry import FIXTURES, fixture, serve_registry  # noqa: F401  (FIXTURES: the recorded responses)

FA2_TITLE = "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning"
PAGED_DOI = "10.1145/3600006.3613165"


@pytest.fixture
def registry(monkeypatch):
    reg, stop = serve_registry(monkeypatch)
    yield reg
    stop()


def papers(run_cli) -> list[dict]:
    return run_cli("paper", "list", "--json").json()["data"]["papers"]


# ---------------------------------------------------------------- the happy paths


def test_log_by_arxiv_option_alone_fills_in_the_paper(run_cli, registry):
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    result = run_cli("paper", "log", "--arxiv", "2307.08691", "--json")
    assert result.exit_code == 0, result
    paper = result.json()["data"]
    assert paper["title"] == FA2_TITLE  # the feed's hard wrap is gone
    assert (paper["authors"], paper["year"], paper["venue"]) == ("Tri Dao", 2023, "cs.LG")
    assert paper["abstract"].startswith(
        "Scaling Transformers to longer sequence lengths has been a major problem in the last"
    )
    assert paper["pdf_url"] == "https://arxiv.org/pdf/2307.08691v1"
    assert paper["metadata"]["source"] == "arxiv"
    assert registry.count("arxiv:") == 1


def test_the_http_request_names_the_tool_and_the_contact(run_cli, registry, monkeypatch):
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    monkeypatch.setenv("ROADMAP_CONTACT_EMAIL", "ada@example.org")
    assert run_cli("paper", "log", "2307.08691").exit_code == 0
    agent = registry.requests[0][1]["User-Agent"]
    assert agent.startswith("roadmap-cli/") and "mailto:ada@example.org" in agent


@pytest.mark.parametrize("text", ["https://arxiv.org/abs/2307.08691v2", "arXiv:2307.08691v2"])
def test_a_bare_arxiv_url_with_version_is_recognised(run_cli, registry, text):
    registry.serve("arxiv:2307.08691v2", fixture("arxiv-2307.08691.xml"))
    result = run_cli("paper", "log", text, "--json")
    assert result.exit_code == 0, result
    paper = result.json()["data"]
    assert (paper["title"], paper["arxiv_id"], paper["arxiv_version"]) == (FA2_TITLE, "2307.08691", 2)
    assert registry.count("arxiv:2307.08691v2") == 1  # the version asked for is the version fetched


def test_an_old_style_arxiv_id_is_recognised(run_cli, registry):
    registry.serve("arxiv:hep-th/9711200", fixture("arxiv-hep-th-9711200.xml"))
    paper = run_cli("paper", "log", "hep-th/9711200", "--json").json()["data"]
    assert paper["title"] == "The Large N Limit of Superconformal Field Theories and Supergravity"
    assert (paper["authors"], paper["year"]) == ("Juan M. Maldacena", 1997)
    assert paper["venue"] == "Adv.Theor.Math.Phys.2:231-252,1998"  # the journal reference beats the category


@pytest.mark.parametrize("args", [[PAGED_DOI], [f"https://doi.org/{PAGED_DOI}"], ["--doi", f"doi:{PAGED_DOI}"]])
def test_a_doi_is_looked_up_at_crossref(run_cli, registry, args):
    registry.serve(
        f"crossref:{PAGED_DOI}", fixture("crossref-10.1145-3600006.3613165.json", content_type="application/json")
    )
    result = run_cli("paper", "log", *args, "--json")
    assert result.exit_code == 0, result
    paper = result.json()["data"]
    assert paper["title"] == "Efficient Memory Management for Large Language Model Serving with PagedAttention"
    assert paper["authors"].split(", ")[:2] == ["Woosuk Kwon", "Zhuohan Li"] and paper["authors"].endswith("Ion Stoica")
    assert (paper["year"], paper["doi"]) == (2023, PAGED_DOI)
    assert paper["venue"] == "Proceedings of the 29th Symposium on Operating Systems Principles"
    assert paper["abstract"].startswith("High throughput serving of large language models")  # JATS tags gone
    assert "<jats" not in paper["abstract"] and not paper["abstract"].startswith("Abstract")
    assert registry.count("datacite:") == 0


def test_a_doi_crossref_does_not_know_is_looked_up_at_datacite(run_cli, registry):
    doi = "10.5281/zenodo.8339040"
    registry.serve(
        f"datacite:{doi}", fixture("datacite-10.5281-zenodo.8339040.json", content_type="application/vnd.api+json")
    )
    paper = run_cli("paper", "log", doi, "--json").json()["data"]
    assert paper["title"] == "A reproduction of PagedAttention's block manager"
    assert (paper["authors"], paper["year"], paper["venue"]) == ("Ada Example, Grace Tester", 2023, "Zenodo")
    assert registry.count("crossref:") == 1 and registry.count("datacite:") == 1


def test_typed_values_win_over_fetched_ones(run_cli, registry):
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    paper = run_cli(
        "paper", "log", "FA2", "--arxiv", "2307.08691", "--authors", "T. Dao", "--year", "2024", "--json"
    ).json()["data"]
    assert (paper["title"], paper["authors"], paper["year"]) == ("FA2", "T. Dao", 2024)
    assert paper["venue"] == "cs.LG" and paper["abstract"]  # what was not typed is filled


def test_a_second_log_of_the_same_id_is_answered_by_the_cache(run_cli, registry):
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    assert run_cli("paper", "log", "2307.08691").exit_code == 0
    again = run_cli("paper", "log", "2307.08691", "--force", "--json")
    assert again.exit_code == 0 and again.json()["data"]["title"] == FA2_TITLE
    assert registry.count() == 1
    duplicate = run_cli("paper", "log", "2307.08691")
    assert duplicate.exit_code == 2 and "already logged" in duplicate.stderr


def test_show_prints_the_abstract_and_export_writes_the_fetched_fields(run_cli, registry):
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    registry.serve(
        f"crossref:{PAGED_DOI}", fixture("crossref-10.1145-3600006.3613165.json", content_type="application/json")
    )
    run_cli("paper", "log", "2307.08691")
    run_cli("paper", "log", PAGED_DOI)
    shown = run_cli("paper", "show", "1")
    assert "abstract" in shown.stdout and "Scaling Transformers" in shown.stdout and "fetched" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) < 2000  # piped: the abstract unpadded
    bib = run_cli("paper", "export").stdout
    assert "primaryclass = {cs.LG}" in bib and "abstract = {Scaling Transformers" in bib
    assert "journal = {Proceedings of the 29th Symposium on Operating Systems Principles}" in bib


# ---------------------------------------------------------------- failures: one line, nothing written


@pytest.mark.parametrize(
    "key, reply, text, words",
    [
        ("arxiv:2512.99999", fixture("arxiv-empty.xml"), "2512.99999", "arXiv has no paper 2512.99999"),
        ("arxiv:1312.99999", fixture("arxiv-error.xml"), "1312.99999", "arXiv refused the query: incorrect id format"),
        ("arxiv:2307.08691", (200, {}, b"<feed><entry>unclosed"), "2307.08691", "not valid XML"),
        ("arxiv:2307.08691", (200, {}, b'<?xml version="1.0"?><html/>'), "2307.08691", "not an Atom feed"),
        ("arxiv:2307.08691", (404, {}, b"Not Found"), "2307.08691", "answered HTTP 404"),
        (f"crossref:{PAGED_DOI}", (200, {}, b'{"status": "ok", "message": '), PAGED_DOI, "not valid JSON"),
        (f"crossref:{PAGED_DOI}", (200, {}, b"[1, 2]"), PAGED_DOI, "not an object"),
        (
            "crossref:10.9999/nothing",
            (404, {}, b"Resource not found."),
            "10.9999/nothing",
            "neither Crossref nor DataCite knows",
        ),
    ],
)
def test_a_failed_lookup_is_one_line_and_writes_nothing(run_cli, registry, key, reply, text, words):
    registry.serve(key, reply)
    result = run_cli("paper", "log", text)
    assert result.exit_code != 0 and result.exception is None, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert "--title" in lines[0] and "--no-fetch" in lines[0]  # how to log it by hand
    assert papers(run_cli) == []


def test_offline_says_the_registry_cannot_be_reached(run_cli, monkeypatch):
    # conftest points every registry at a closed loopback port
    result = run_cli("paper", "log", "--arxiv", "2307.08691")
    assert result.exit_code == 6, result
    assert "cannot reach 127.0.0.1:1 (connection refused)" in result.stderr and "--no-fetch" in result.stderr
    assert papers(run_cli) == []


def test_with_a_title_an_unreachable_registry_still_logs_what_was_typed(run_cli):
    result = run_cli("paper", "log", "FlashAttention-2", "--arxiv", "2307.08691", "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["title"] == "FlashAttention-2" and result.json()["data"]["authors"] is None
    assert "metadata not fetched" in result.stderr and "paper refresh" in result.stderr


def test_429_with_retry_after_is_waited_for_when_it_fits(run_cli, registry):
    registry.serve("arxiv:2307.08691", (429, {"Retry-After": "1"}, b"Rate exceeded."), fixture("arxiv-2307.08691.xml"))
    started = time.monotonic()
    result = run_cli("paper", "log", "2307.08691", "--json")
    assert result.exit_code == 0 and result.json()["data"]["title"] == FA2_TITLE, result
    assert registry.count() == 2 and time.monotonic() - started >= 1.0


def test_429_asking_for_a_long_wait_fails_at_once_and_says_so(run_cli, registry):
    registry.serve("arxiv:2307.08691", (429, {"Retry-After": "120"}, b"Rate exceeded."))
    started = time.monotonic()
    result = run_cli("paper", "log", "2307.08691")
    assert result.exit_code == 6 and "asked to wait 120 s" in result.stderr, result
    assert registry.count() == 1 and time.monotonic() - started < 5
    assert papers(run_cli) == []


def test_503_is_retried_then_reported(run_cli, registry):
    registry.serve(f"crossref:{PAGED_DOI}", (503, {"Retry-After": "0"}, b"busy"))
    result = run_cli("paper", "log", PAGED_DOI)
    assert result.exit_code == 6 and "unavailable (HTTP 503" in result.stderr, result
    assert registry.count() == 3  # the first try and two retries


def _stall(handler):
    time.sleep(8)


def _drip(handler):
    handler.send_response(200)
    handler.send_header("Content-Type", "application/atom+xml")
    handler.end_headers()
    try:
        for _ in range(40):  # one byte every 0.2 s: each read is quick, their sum is not
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.2)
    except (BrokenPipeError, ConnectionResetError):
        pass


@pytest.mark.parametrize("reply", [_stall, _drip], ids=["no-answer", "drip"])
def test_a_slow_registry_is_given_up_on_at_the_budget(run_cli, registry, monkeypatch, reply):
    monkeypatch.setenv("ROADMAP_FETCH_TIMEOUT", "1.5")
    registry.serve("arxiv:2307.08691", reply)
    started = time.monotonic()
    result = run_cli("paper", "log", "2307.08691")
    elapsed = time.monotonic() - started
    assert result.exit_code == 6 and "no answer within 1.5 s" in result.stderr, result
    assert elapsed < 4, elapsed
    assert papers(run_cli) == []


def test_the_budget_is_ten_seconds_and_a_setting_only_shortens_it(monkeypatch):
    from roadmap_cli.research import fetch

    assert fetch.budget_from_env() == 10.0
    monkeypatch.setenv("ROADMAP_FETCH_TIMEOUT", "60")
    assert fetch.budget_from_env() == 10.0
    monkeypatch.setenv("ROADMAP_FETCH_TIMEOUT", "2")
    assert fetch.budget_from_env() == 2.0


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_oversized_body_is_refused_while_it_is_read(run_cli, registry, declared):
    from roadmap_cli.research.fetch import MAX_BODY

    big = b"<feed>" + b" " * (MAX_BODY + 10)
    if declared:
        registry.serve("arxiv:2307.08691", (200, {}, big))
    else:

        def chunked(handler):
            handler.send_response(200)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            try:
                for start in range(0, len(big), 65536):
                    piece = big[start : start + 65536]
                    handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                handler.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

        registry.serve("arxiv:2307.08691", chunked)
    result = run_cli("paper", "log", "2307.08691")
    assert result.exit_code == 6 and "byte limit" in result.stderr, result
    assert papers(run_cli) == []


# ---------------------------------------------------------------- --no-fetch and refresh


def test_no_fetch_logs_under_the_id_and_refresh_fills_it_in_later(run_cli, registry):
    result = run_cli("paper", "log", "2307.08691", "--no-fetch", "--json")
    assert result.exit_code == 0 and registry.count() == 0, result
    assert result.json()["data"]["title"] == "arXiv:2307.08691"
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    refreshed = run_cli("paper", "refresh", "1", "--json")
    assert refreshed.exit_code == 0, refreshed
    row = refreshed.json()["data"]["papers"][0]
    assert row["result"] == "filled" and {"title", "authors", "year", "abstract"} <= set(row["fields"])
    paper = run_cli("paper", "show", "1", "--json").json()["data"]
    assert (paper["title"], paper["authors"], paper["year"]) == (FA2_TITLE, "Tri Dao", 2023)
    # the duplicate check now knows the real title
    dup = run_cli("paper", "log", FA2_TITLE, "--no-fetch")
    assert dup.exit_code == 2 and "already logged" in dup.stderr


def test_refresh_never_overwrites_what_was_typed_and_uses_the_cache(run_cli, registry):
    run_cli("paper", "log", "My FA2 notes", "--arxiv", "2307.08691", "--authors", "Dao", "--no-fetch")
    run_cli("paper", "log", "PagedAttention", "--doi", PAGED_DOI, "--no-fetch")
    run_cli("paper", "log", "A paper with no id", "--no-fetch")
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    registry.serve(
        f"crossref:{PAGED_DOI}", fixture("crossref-10.1145-3600006.3613165.json", content_type="application/json")
    )
    first = run_cli("paper", "refresh", "--all", "--json")
    assert first.exit_code == 0, first
    data = first.json()["data"]
    assert (data["filled"], data["failed"], len(data["papers"])) == (
        2,
        0,
        2,
    )  # the paper without an id is not looked up
    fa2 = run_cli("paper", "show", "1", "--json").json()["data"]
    assert (fa2["title"], fa2["authors"], fa2["year"]) == ("My FA2 notes", "Dao", 2023)
    calls = registry.count()
    second = run_cli("paper", "refresh", "--all", "--json").json()["data"]
    assert second["up_to_date"] == 2 and registry.count() == calls  # answered from the cache


def test_refresh_reports_a_failure_per_paper_and_exits_non_zero(run_cli, registry):
    run_cli("paper", "log", "A", "--arxiv", "2307.08691", "--no-fetch")
    run_cli("paper", "log", "B", "--arxiv", "2512.99999", "--no-fetch")
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    registry.serve("arxiv:2512.99999", fixture("arxiv-empty.xml"))
    result = run_cli("paper", "refresh", "--all")
    assert result.exit_code == 6, result
    assert "filled" in result.stdout and "failed: arXiv has no paper 2512.99999" in result.stdout
    assert "1 of 2 papers could not be refreshed" in result.stderr


@pytest.mark.parametrize(
    "args, words", [([], "give paper ids, or --all"), (["1", "--all"], "not both"), (["42"], "unknown paper '42'")]
)
def test_refresh_mistakes_are_one_line(run_cli, args, words):
    result = run_cli("paper", "refresh", *args)
    assert result.exit_code == 2 and words in result.stderr and result.exception is None, result


def test_two_different_ids_or_titles_are_refused(run_cli):
    assert "two arXiv ids" in run_cli("paper", "log", "2307.08691", "--arxiv", "2205.14135").stderr
    assert "two titles" in run_cli("paper", "log", "One", "--title", "Two").stderr
    nothing = run_cli("paper", "log")
    assert nothing.exit_code == 2 and "needs a title, or an arXiv id or DOI" in nothing.stderr


def test_a_damaged_cache_entry_is_fetched_again(run_cli, registry, roadmap_home):
    registry.serve("arxiv:2307.08691", fixture("arxiv-2307.08691.xml"))
    assert run_cli("paper", "log", "2307.08691").exit_code == 0
    (entry,) = (roadmap_home / "cache" / "papers" / "arxiv").glob("*.json")
    assert json.loads(entry.read_text())["fetched_on"]
    entry.write_text("{not json")
    assert run_cli("paper", "log", "2307.08691", "--force").exit_code == 0
    assert registry.count() == 2
