"""QA regressions for the research log: help grammar, negative hours, hours on
items, unknown ids with a hint, filter dates, lab ids, and `paper export -o`."""

from __future__ import annotations

from pathlib import Path


def test_log_help_uses_the_right_article(run_cli):
    result = run_cli("log", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "Log a experiment" not in text and "Log a oss" not in text
    assert "Log an experiment" in text and "Log an open-source project" in text


def test_missing_title_message_has_the_right_article(run_cli):
    result = run_cli("log", "experiment", "")
    assert result.exit_code == 2
    assert "an experiment needs a title" in result.stderr


def test_negative_hours_reach_the_range_check(run_cli):
    result = run_cli("log", "hours", "-1")
    assert result.exit_code == 2
    assert "No such option" not in result.stderr
    assert "hours must be more than 0" in result.stderr


def test_hours_cannot_be_set_on_an_item(run_cli):
    assert run_cli("log", "experiment", "ablation").exit_code == 0
    result = run_cli("log", "edit", "1", "--hours", "3")
    assert result.exit_code == 2, result
    assert "--hours applies to hours entries" in result.stderr
    assert run_cli("log", "list", "--json").json()["data"]["entries"][0]["hours"] is None


def test_unknown_paper_and_entry_point_to_the_list(run_cli):
    paper = run_cli("paper", "show", "99")
    assert paper.exit_code == 2 and "roadmap paper list" in paper.stderr
    linked = run_cli("log", "reproduction", "x", "--paper", "99")
    assert linked.exit_code == 2 and "roadmap paper list" in linked.stderr
    entry = run_cli("log", "delete", "99", "--yes")
    assert entry.exit_code == 2 and "roadmap log list" in entry.stderr


def test_future_bounds_of_list_filters_are_fine(run_cli):
    assert run_cli("log", "hours", "2").exit_code == 0
    until = run_cli("log", "list", "--until", "2999-01-01", "--json")
    assert until.exit_code == 0, until
    assert until.json()["data"]["total"] == 1
    since = run_cli("paper", "list", "--since", "2999-01-01")
    assert since.exit_code == 0, since


def test_cadence_at_a_future_date_does_not_say_log_things(run_cli):
    result = run_cli("cadence", "--at", "2999-01-01")
    assert result.exit_code == 2
    assert "in the future" in result.stderr and "log things" not in result.stderr


def test_paper_list_refuses_an_unknown_stage(run_cli):
    result = run_cli("paper", "list", "--stage", "99")
    assert result.exit_code == 2 and "unknown stage '99'" in result.stderr


def test_unknown_lab_on_an_entry_has_did_you_mean(run_cli):
    result = run_cli("log", "experiment", "x", "--lab", "minigp")
    assert result.exit_code == 2, result
    assert "unknown lab 'minigp'" in result.stderr and "minigpt" in result.stderr
    assert run_cli("log", "experiment", "x", "--lab", "minigpt").exit_code == 0


def test_paper_export_never_overwrites_silently(run_cli, tmp_path: Path):
    run_cli("paper", "log", "A paper")
    target = tmp_path / "refs.bib"
    target.write_text("my hand-written bibliography", encoding="utf-8")
    refused = run_cli("paper", "export", "-o", target)
    assert refused.exit_code == 2 and "--force" in refused.stderr
    assert target.read_text(encoding="utf-8") == "my hand-written bibliography"
    assert run_cli("paper", "export", "-o", target, "--force").exit_code == 0
    assert "A paper" in target.read_text(encoding="utf-8")
    unwritable = run_cli("paper", "export", "-o", tmp_path / "no" / "such" / "dir.bib")
    assert unwritable.exit_code == 2 and unwritable.exception is None, unwritable


def _bibtex_round_trip(run_cli, tmp_path: Path, roadmap_home: Path, monkeypatch) -> tuple[str, str]:
    first = run_cli("paper", "export")
    assert first.exit_code == 0, first
    bib = tmp_path / "papers.bib"
    bib.write_text(first.stdout, encoding="utf-8")
    monkeypatch.setenv("ROADMAP_HOME", str(tmp_path / "second-home"))
    assert run_cli("paper", "import", bib).exit_code == 0
    return first.stdout, run_cli("paper", "export").stdout


def test_bibtex_round_trip_keeps_tildes_urls_and_note_lines(run_cli, tmp_path: Path, roadmap_home: Path, monkeypatch):
    note = "line1\n  indented } brace\n\nlast"
    assert (
        run_cli(
            "paper", "log", "A ~tilde & 100% title", "--url", "https://h.org/~u/a?b=1&c=%20", "--note", note
        ).exit_code
        == 0
    )
    first, second = _bibtex_round_trip(run_cli, tmp_path, roadmap_home, monkeypatch)
    assert first == second
    assert "url = {https://h.org/~u/a?b=1&c=%20}" in first  # URL fields are verbatim for biblatex
    paper = run_cli("paper", "show", "1", "--json").json()["data"]
    assert paper["title"] == "A ~tilde & 100% title"
    assert paper["url"] == "https://h.org/~u/a?b=1&c=%20"
    assert paper["notes"] == note


def test_bibtex_import_reads_escaped_urls_written_by_other_tools(run_cli, tmp_path: Path):
    bib = tmp_path / "old.bib"
    bib.write_text("@misc{k, title={T}, url={https://example.com/a?b=1\\&c=2}}\n", encoding="utf-8")
    assert run_cli("paper", "import", bib).exit_code == 0
    assert run_cli("paper", "show", "1", "--json").json()["data"]["url"] == "https://example.com/a?b=1&c=2"


def test_editing_a_paper_to_an_empty_title_is_refused_not_ignored(run_cli):
    assert run_cli("paper", "log", "Original").exit_code == 0
    result = run_cli("paper", "edit", "1", "--title", "")
    assert result.exit_code == 2 and "needs a title" in result.stderr
    assert run_cli("paper", "show", "1", "--json").json()["data"]["title"] == "Original"


def test_negative_limits_are_usage_errors(run_cli):
    for args in (("paper", "list"), ("log", "list"), ("paper", "suggest")):
        result = run_cli(*args, "--limit", "-1")
        assert result.exit_code == 2, (args, result)


def test_weekly_hours_from_init_is_the_weeks_hours_goal(run_cli):
    assert run_cli("init", "--weekly-hours", "3").exit_code == 0
    assert run_cli("log", "hours", "3").exit_code == 0
    hours = run_cli("cadence", "--json").json()["data"]["line"]["hours"]
    assert hours["min"] == 3 and hours["done"] == 3
    status = run_cli("status")
    assert "hours 3/3" in status.stdout, status


def test_titles_are_one_line_without_control_characters(run_cli):
    assert run_cli("paper", "log", "Red \x1b[31mtitle\nnext line").exit_code == 0
    assert run_cli("paper", "show", "1", "--json").json()["data"]["title"] == "Red [31mtitle next line"
    assert run_cli("log", "blog", "Post\nsecond\x07").exit_code == 0
    assert run_cli("log", "list", "--json").json()["data"]["entries"][0]["title"] == "Post second"
    assert run_cli("log", "blog", "\x07").exit_code == 2


def test_unknown_suggest_kind_lists_the_kinds(run_cli):
    result = run_cli("paper", "suggest", "--kind", "bogus")
    assert result.exit_code == 2 and "choose" in result.stderr and "paper" in result.stderr


def test_declining_a_deletion_says_nothing_was_deleted(run_cli, monkeypatch):
    monkeypatch.setattr("roadmap_cli.cli.research_options.stdin_is_terminal", lambda: True)  # someone to ask
    assert run_cli("paper", "log", "Keep me").exit_code == 0
    result = run_cli("paper", "delete", "1", input="n\n")
    assert result.exit_code == 1 and "nothing deleted" in result.stderr
    assert run_cli("paper", "show", "1").exit_code == 0
    assert run_cli("log", "hours", "1").exit_code == 0
    result = run_cli("log", "delete", "1", input="\n")
    assert result.exit_code == 1 and "nothing deleted" in result.stderr
    assert run_cli("paper", "delete", "1", input="y\n").exit_code == 0


def test_import_with_a_bad_status_option_fails_once(run_cli, tmp_path: Path):
    bib = tmp_path / "one.bib"
    bib.write_text("@misc{k, title={T}}\n", encoding="utf-8")
    result = run_cli("paper", "import", bib, "--status", "bogus")
    assert result.exit_code == 2 and "unknown status 'bogus'" in result.stderr, result


def test_log_list_with_since_after_until_says_so(run_cli):
    result = run_cli("log", "list", "--since", "2026-12-05", "--until", "2026-12-01")
    assert result.exit_code == 2 and "is after --until" in result.stderr, result
