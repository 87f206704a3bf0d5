"""The BibTeX reader/writer, malformed entries, and import -> export round trips."""

from __future__ import annotations

from datetime import date

from roadmap_cli.research.bibtex import authors_from_bibtex, latex_to_text, parse_bibtex, text_to_latex

GOOD = r"""
% text outside entries is ignored
@string{neurips = "Advances in Neural Information Processing Systems"}

@article{dao2023flashattention2,
  title   = {{FlashAttention-2}: Faster Attention with Better Parallelism and Work Partitioning},
  author  = {Dao, Tri},
  year    = 2023,
  eprint  = {2307.08691},
  archivePrefix = {arXiv},
  keywords = {attention; kernels},
}

@inproceedings{vaswani2017attention,
  title = "Attention is All you Need",
  author = {Vaswani, Ashish and Shazeer, Noam and others},
  booktitle = neurips # " 30",
  year = {2017},
  month = dec,
  url = {https://arxiv.org/abs/1706.03762v7}
}

@comment{ @article{not, an = {entry}} }

@inproceedings{kwon2023vllm,
  title = {Efficient Memory Management for Large Language Model Serving with {PagedAttention}},
  author = {Woosuk Kwon and Zhuohan Li},
  doi = {10.1145/3600006.3613165},
  year = {2023}
}
"""

MALFORMED = r"""@misc{ok1,
  title = {First good entry},
}

@misc{broken,
  title = {Missing {the closing brace,
  year = 2020
}

@misc{ok2, title = {Second good entry}}
@misc{bad2, title = undefinedmacro}
@misc{ok3, title = {Third good entry}, year = {2021}}
"""


def test_reader_handles_braces_quotes_macros_concatenation_and_comments():
    entries, problems = parse_bibtex(GOOD)
    assert problems == []
    assert [e.key for e in entries] == ["dao2023flashattention2", "vaswani2017attention", "kwon2023vllm"]
    dao, vaswani, kwon = entries
    assert dao.type == "article" and dao.fields["archiveprefix"] == "arXiv"
    assert dao.fields["title"].startswith("{FlashAttention-2}: Faster")
    assert vaswani.fields["booktitle"] == "Advances in Neural Information Processing Systems 30"
    assert vaswani.fields["month"] == "12"
    assert (dao.line, dao.col) == (5, 1)
    assert kwon.fields["doi"] == "10.1145/3600006.3613165"


def test_malformed_entries_are_reported_with_location_and_skipped():
    entries, problems = parse_bibtex(MALFORMED, source="refs.bib")
    assert [e.key for e in entries] == ["ok1", "ok2", "ok3"]
    assert len(problems) == 2
    assert problems[0].startswith("refs.bib:6:11: unbalanced braces")
    assert "line 5" in problems[0]
    assert problems[1].startswith("refs.bib:11:21: unknown macro 'undefinedmacro'")


def test_latex_text_conversions():
    assert latex_to_text(r"{FlashAttention}-2: Fast \& {\"u}ber~100\%") == "FlashAttention-2: Fast & über 100%"
    assert latex_to_text(r"Caf\'{e} na\"ive") == "Café naïve"
    for plain in ("A & B", "50% of {braces}", "under_score #1 $5"):
        assert latex_to_text(text_to_latex(plain)) == plain
    assert (
        authors_from_bibtex("Dao, Tri and Fu, Daniel Y. and Christopher R{\\'e}")
        == "Tri Dao, Daniel Y. Fu, Christopher Ré"
    )


def _import(run_cli, tmp_path, text, *extra):
    path = tmp_path / "in.bib"
    path.write_text(text, encoding="utf-8")
    return run_cli("paper", "import", str(path), "--json", *extra)


def test_import_then_export_round_trip(run_cli, tmp_path, monkeypatch):
    result = _import(run_cli, tmp_path, GOOD)
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert len(data["imported"]) == 3 and data["problems"] == [] and data["duplicates"] == []
    run_cli("paper", "read", "1", "--date", "2024-01-02")
    run_cli("paper", "note", "1", "--text", "tiling over the sequence; 50% faster & simpler")
    run_cli("paper", "edit", "2", "--rating", "5", "--stage", "1")
    before = run_cli("paper", "list", "--json", "--all").json()["data"]["papers"]

    exported = run_cli("paper", "export", "--format", "bibtex")
    assert exported.exit_code == 0, exported
    assert "roadmap_status = {read}" in exported.stdout and "roadmap_read_on = {2024-01-02}" in exported.stdout
    entries, problems = parse_bibtex(exported.stdout)
    assert problems == [] and len(entries) == 3

    # Into a fresh home: the same papers come back.
    monkeypatch.setenv("ROADMAP_HOME", str(tmp_path / "other-home"))
    again = _import(run_cli, tmp_path, exported.stdout)
    assert len(again.json()["data"]["imported"]) == 3, again
    after = run_cli("paper", "list", "--json", "--all").json()["data"]["papers"]
    strip = lambda papers: sorted(
        ({k: v for k, v in p.items() if k not in ("id", "added_on")} for p in papers), key=lambda p: p["title"]
    )  # noqa: E731
    assert strip(after) == strip(before)
    shown = run_cli("paper", "show", "1", "--json").json()["data"]
    assert shown["notes"] == "tiling over the sequence; 50% faster & simpler"
    assert shown["authors"] == "Tri Dao" and shown["arxiv"] == "2307.08691"


def test_import_values_and_defaults(run_cli, tmp_path):
    _import(run_cli, tmp_path, GOOD, "--tags", "survey")
    papers = {p["title"]: p for p in run_cli("paper", "list", "--json").json()["data"]["papers"]}
    vaswani = papers["Attention is All you Need"]
    assert vaswani["arxiv"] == "1706.03762v7" and vaswani["url"] is None  # arXiv URL became the id
    assert vaswani["status"] == "to-read" and vaswani["read_on"] is None  # importing is not reading
    assert vaswani["tags"] == ["survey"]
    flash = next(p for t, p in papers.items() if t.startswith("FlashAttention-2"))
    assert flash["tags"] == ["attention", "kernels", "survey"]
    kwon = next(p for t, p in papers.items() if "PagedAttention" in t)
    assert kwon["doi"] == "10.1145/3600006.3613165"


def test_import_skips_malformed_and_duplicates_but_imports_the_rest(run_cli, tmp_path):
    run_cli("paper", "log", "Second good entry", "--date", "2024-01-01")
    result = _import(
        run_cli, tmp_path, MALFORMED + "@misc{dup, title = {FIRST good entry!}}\n@misc{notitle, year = 2020}\n"
    )
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert [i["key"] for i in data["imported"]] == ["ok1", "ok3"]
    assert {(d["key"], d["existing_id"]) for d in data["duplicates"]} == {("ok2", 1), ("dup", 2)}
    assert len(data["problems"]) == 3
    assert any("entry 'notitle' has no title" in p for p in data["problems"])
    human = run_cli("paper", "import", str(tmp_path / "in.bib"))  # people see the same locations
    assert human.exit_code == 0 and "in.bib:6:11: unbalanced braces" in human.stdout
    assert "already logged as #1" in human.stdout


def test_export_json_and_csv(run_cli):
    run_cli("paper", "log", "A paper, with comma", "--arxiv", "2307.08691", "--tags", "a,b", "--date", "2024-05-05")
    as_json = run_cli("paper", "export", "--format", "json")
    import csv
    import io
    import json

    papers = json.loads(as_json.stdout)
    assert papers[0]["title"] == "A paper, with comma" and papers[0]["tags"] == ["a", "b"]
    rows = list(csv.DictReader(io.StringIO(run_cli("paper", "export", "--format", "csv").stdout)))
    assert rows[0]["title"] == "A paper, with comma" and rows[0]["tags"] == "a;b" and rows[0]["read_on"] == "2024-05-05"
    bad = run_cli("paper", "export", "--format", "yaml")
    assert bad.exit_code == 2 and "unknown format" in bad.stderr


def test_import_of_missing_file_is_one_line(run_cli, tmp_path):
    result = run_cli("paper", "import", str(tmp_path / "nope.bib"))
    assert result.exit_code == 2 and "cannot read" in result.stderr and "Traceback" not in result.stderr


def test_dates_in_import_are_local_dates():
    from roadmap_cli.research.bibtex import BibEntry
    from roadmap_cli.research.papers_transfer import entry_to_input

    entry = BibEntry("misc", "k", {"title": "T", "roadmap_status": "read", "roadmap_read_on": "2024-02-29"})
    assert entry_to_input(entry, default_status="to-read", today=date(2024, 3, 1)).read_on == date(2024, 2, 29)
