"""The `paper` and `log` command groups through the real CLI (CliRunner, --json)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def _data(result):
    assert result.exit_code == 0, result
    return result.json()["data"]


def log(run_cli, title, *args):
    return run_cli("paper", "log", title, "--json", *args)


# --- logging and duplicates --------------------------------------------------------------


def test_log_defaults_to_read_today_and_parses_ids(run_cli):
    from roadmap_cli.research.periods import local_today

    paper = _data(
        log(
            run_cli,
            "FlashAttention-2",
            "--arxiv",
            "https://arxiv.org/pdf/2307.08691v2.pdf",
            "--doi",
            "https://doi.org/10.48550/ARXIV.2307.08691",
            "--tags",
            "Attention, kernels,attention",
            "--authors",
            "Tri Dao",
            "--year",
            "2023",
            "--rating",
            "5",
            "--note",
            "read twice",
        )
    )
    assert paper["status"] == "read" and paper["read_on"] == local_today().isoformat()
    assert (paper["arxiv_id"], paper["arxiv_version"], paper["arxiv"]) == ("2307.08691", 2, "2307.08691v2")
    assert paper["doi"] == "10.48550/arxiv.2307.08691"
    assert paper["tags"] == ["attention", "kernels"] and paper["notes"] == "read twice"


def test_arxiv_doi_also_gives_the_arxiv_id(run_cli):
    paper = _data(log(run_cli, "A", "--doi", "https://doi.org/10.48550/arXiv.2307.08691"))
    assert paper["arxiv_id"] == "2307.08691"
    refused = log(run_cli, "B", "--arxiv", "2307.08691v3")
    assert "already logged as #1 (same arXiv id)" in refused.stderr


def test_titles_are_never_read_as_markup(run_cli):
    _data(log(run_cli, "[RFC] Attention [bold]x[/bold]", "--authors", "[red]A[/red]"))
    shown = run_cli("paper", "show", "1").stdout
    assert "[RFC] Attention [bold]x[/bold]" in shown and "[red]A[/red]" in shown
    assert "[RFC] Attention" in run_cli("paper", "list").stdout
    run_cli("log", "blog", "[draft] post")
    assert "[draft] post" in run_cli("log", "list").stdout


def test_add_is_an_alias_of_log(run_cli):
    assert _data(run_cli("paper", "add", "Some paper", "--status", "to-read", "--json"))["read_on"] is None


@pytest.mark.parametrize(
    "first, second, reason",
    [
        (["A", "--arxiv", "2307.08691v1"], ["B", "--arxiv", "arXiv:2307.08691v2"], "same arXiv id"),
        (["A", "--doi", "10.1145/3600006.3613165"], ["B", "--doi", "doi:10.1145/3600006.3613165".upper()], "same DOI"),
        (["Attention Is All You Need"], ["attention is all you need."], "same title"),
    ],
)
def test_duplicates_refused_with_the_existing_id_unless_force(run_cli, first, second, reason):
    _data(log(run_cli, *first))
    refused = log(run_cli, *second)
    assert refused.exit_code == 2
    assert f"already logged as #1 ({reason})" in refused.stderr and "--force" in refused.stderr
    assert _data(log(run_cli, *second, "--force"))["id"] == 2


def test_future_date_refused_past_allowed(run_cli):
    refused = log(run_cli, "From the future", "--date", "2999-01-01")
    assert refused.exit_code == 2 and "in the future" in refused.stderr and "Traceback" not in refused.stderr
    assert _data(log(run_cli, "From the past", "--date", "2019-03-04"))["read_on"] == "2019-03-04"
    assert run_cli("log", "hours", "2", "--date", "2999-01-01").exit_code == 2


def test_bad_values_are_one_line_errors(run_cli):
    for args, message in [
        (["--arxiv", "nope"], "not an arXiv id"),
        (["--doi", "12.3/x"], "not a DOI"),
        (["--status", "skimmed"], "unknown status"),
        (["--rating", "6"], "rating 6 out of range"),
        (["--date", "31/12/2020"], "expected YYYY-MM-DD"),
    ]:
        result = log(run_cli, "T", *args)
        assert result.exit_code == 2 and message in result.stderr, (args, result)


# --- list / show / read / note / edit / delete ---------------------------------------------


@pytest.fixture
def library(run_cli):
    _data(
        log(
            run_cli,
            "FlashAttention",
            "--arxiv",
            "2205.14135",
            "--tags",
            "attention",
            "--stage",
            "9",
            "--date",
            "2024-01-10",
        )
    )
    _data(
        log(
            run_cli,
            "PagedAttention vLLM",
            "--tags",
            "serving,kv-cache",
            "--stage",
            "5",
            "--date",
            "2024-02-01",
            "--authors",
            "Woosuk Kwon",
        )
    )
    _data(log(run_cli, "Attention Is All You Need", "--status", "to-read", "--stage", "1"))
    _data(log(run_cli, "100% of 5_ms", "--date", "2023-06-01"))


def _titles(run_cli, *args):
    return [p["title"] for p in _data(run_cli("paper", "list", "--json", *args))["papers"]]


def test_list_filters(run_cli, library):
    assert _titles(run_cli)[1:] == ["PagedAttention vLLM", "FlashAttention", "100% of 5_ms"]  # newest first
    assert _titles(run_cli, "--status", "to-read") == ["Attention Is All You Need"]
    assert _titles(run_cli, "--tag", "serving") == ["PagedAttention vLLM"]
    assert _titles(run_cli, "--stage", "9") == ["FlashAttention"]
    assert "100% of 5_ms" not in _titles(run_cli, "--since", "2024-01-01")
    assert _titles(run_cli, "--search", "kwon") == ["PagedAttention vLLM"]
    assert _titles(run_cli, "-s", "kv-cache") == ["PagedAttention vLLM"]
    assert _titles(run_cli, "-s", "2205.14135") == ["FlashAttention"]
    assert _titles(run_cli, "-s", "0%") == ["100% of 5_ms"]  # % and _ are literal
    assert _titles(run_cli, "-s", "5_m") == ["100% of 5_ms"]
    assert _titles(run_cli, "-s", "x_y") == []
    page = _data(run_cli("paper", "list", "--json", "--limit", "2"))
    assert (page["total"], page["shown"]) == (4, 2)
    human = run_cli("paper", "list", "--limit", "2").stdout
    assert "2 of 4 shown" in human
    assert run_cli("paper", "list", "--status", "done").exit_code == 2


def test_show_read_note_edit(run_cli, library, monkeypatch, tmp_path):
    shown = _data(run_cli("paper", "show", "3", "--json"))
    assert shown["status"] == "to-read" and shown["read_on"] is None
    missing = run_cli("paper", "show", "33")
    assert missing.exit_code == 2 and "unknown paper '33'" in missing.stderr and "did you mean '3'" in missing.stderr

    read = _data(run_cli("paper", "read", "#3", "--date", "2024-03-01", "--json"))
    assert (read["status"], read["read_on"]) == ("read", "2024-03-01")

    run_cli("paper", "note", "3", "--text", "first")
    run_cli("paper", "note", "3", "--text", "second")
    assert _data(run_cli("paper", "show", "3", "--json"))["notes"] == "first\n\nsecond"
    run_cli("paper", "note", "3", "--text", "only", "--replace")
    assert _data(run_cli("paper", "show", "3", "--json"))["notes"] == "only"
    # positional text, like `check ID --note`: `paper note 3 "text"`
    assert run_cli("paper", "note", "3", "positional").exit_code == 0
    assert _data(run_cli("paper", "show", "3", "--json"))["notes"] == "only\n\npositional"
    both = run_cli("paper", "note", "3", "a", "--text", "b")
    assert both.exit_code == 2 and len(both.stderr.strip().splitlines()) == 1
    assert _data(run_cli("paper", "show", "3", "--json"))["notes"] == "only\n\npositional"
    run_cli("paper", "note", "3", "only", "--replace")

    import sys

    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\np = sys.argv[1]\nold = open(p).read()\nopen(p, 'w').write(old + '\\nfrom the editor\\n')\n"
    )
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    assert run_cli("paper", "note", "3").exit_code == 0
    assert _data(run_cli("paper", "show", "3", "--json"))["notes"] == "only\nfrom the editor"
    monkeypatch.setenv("EDITOR", f"{sys.executable} -c 'raise SystemExit(3)'")
    failed = run_cli("paper", "note", "3")
    assert failed.exit_code == 2 and "exited with status 3" in failed.stderr
    monkeypatch.delenv("EDITOR")
    assert "set $EDITOR" in run_cli("paper", "note", "3").stderr

    edited = _data(
        run_cli(
            "paper", "edit", "3", "--title", "Attention!", "--tags", "transformer", "--arxiv", "1706.03762", "--json"
        )
    )
    assert (edited["title"], edited["tags"], edited["arxiv"], edited["notes"]) == (
        "Attention!",
        ["transformer"],
        "1706.03762",
        "only\nfrom the editor",
    )
    clash = run_cli("paper", "edit", "3", "--arxiv", "2205.14135")
    assert clash.exit_code == 2 and "already logged as #1" in clash.stderr
    cleared = _data(run_cli("paper", "edit", "3", "--arxiv", "", "--status", "to-read", "--json"))
    assert cleared["arxiv"] is None and cleared["read_on"] is None


def test_delete_asks_or_takes_yes(run_cli, library, monkeypatch):
    monkeypatch.setattr("roadmap_cli.cli.research_options.stdin_is_terminal", lambda: True)  # someone to ask
    declined = run_cli("paper", "delete", "2", input="n\n")
    assert declined.exit_code == 1
    assert _data(run_cli("paper", "show", "2", "--json"))["id"] == 2
    assert run_cli("paper", "delete", "2", input="y\n").exit_code == 0
    assert run_cli("paper", "show", "2").exit_code == 2
    assert run_cli("paper", "delete", "1", "--yes").exit_code == 0
    assert _data(run_cli("paper", "list", "--json"))["total"] == 2


# --- the other cadence entries -----------------------------------------------------------


def test_log_every_kind_then_list_edit_delete(run_cli):
    kinds = ("reproduction", "experiment", "benchmark", "report", "blog", "oss", "workshop-paper")
    for i, kind in enumerate(kinds):
        entry = _data(
            run_cli(
                "log",
                kind,
                f"{kind} one",
                "--date",
                f"2024-01-{i + 1:02d}",
                "--link",
                "https://x.y",
                "--lab",
                "flash-attention",
                "--note",
                "n",
                "--json",
            )
        )
        assert (entry["kind"], entry["title"], entry["on_date"]) == (kind, f"{kind} one", f"2024-01-{i + 1:02d}")
    hours = _data(run_cli("log", "hours", "2.5", "--date", "2024-01-09", "--json"))
    assert hours["hours"] == 2.5 and hours["kind"] == "hours"
    assert run_cli("log", "hours", "0").exit_code == 2 and run_cli("log", "hours", "25").exit_code == 2

    listing = _data(run_cli("log", "list", "--json"))
    assert listing["total"] == 8 and listing["entries"][0]["kind"] == "hours"
    assert [e["kind"] for e in _data(run_cli("log", "list", "--kind", "blog", "--json"))["entries"]] == ["blog"]
    assert _data(run_cli("log", "list", "--since", "2024-01-03", "--until", "2024-01-04", "--json"))["total"] == 2
    assert "unknown entry kind 'blgo'" in run_cli("log", "list", "--kind", "blgo").stderr

    edited = _data(run_cli("log", "edit", "8", "--hours", "3", "--date", "2024-01-10", "--json"))
    assert (edited["hours"], edited["on_date"]) == (3.0, "2024-01-10")
    assert run_cli("log", "edit", "8", "--date", "2999-01-01").exit_code == 2
    no_terminal = run_cli("log", "delete", "8", input="y\n")  # nothing is read from a pipe: --yes says it
    assert no_terminal.exit_code == 2 and "roadmap log delete 8 --yes" in no_terminal.stderr, no_terminal
    assert run_cli("log", "delete", "8", "--yes").exit_code == 0
    assert "unknown entry '8'" in run_cli("log", "edit", "8", "--note", "x").stderr


def test_reproduction_of_a_paper_marks_it_reproduced_and_counts_once(run_cli):
    _data(log(run_cli, "To reproduce", "--status", "to-read"))
    _data(run_cli("log", "reproduction", "my FA reproduction", "--paper", "1", "--date", "2024-01-05", "--json"))
    paper = _data(run_cli("paper", "show", "1", "--json"))
    assert (paper["status"], paper["read_on"]) == ("reproduced", "2024-01-05")
    assert [e["kind"] for e in paper["entries"]] == ["reproduction"]
    # Logged straight as reproduced: a reproduction entry is created once.
    _data(log(run_cli, "Reproduced directly", "--status", "reproduced", "--date", "2024-01-06"))
    _data(run_cli("paper", "edit", "2", "--rating", "4", "--json"))
    assert _data(run_cli("log", "list", "--kind", "reproduction", "--json"))["total"] == 2
    assert "unknown paper '9'" in run_cli("log", "reproduction", "x", "--paper", "9").stderr


# --- suggestions ------------------------------------------------------------------------


def _reading(id_, stage, title, arxiv=None, kind="paper"):
    return SimpleNamespace(id=id_, title=title, authors=None, year=None, arxiv=arxiv, url=None, stage=stage, kind=kind)


@pytest.fixture
def reading_curriculum(monkeypatch):
    from roadmap_cli import context

    stages = [SimpleNamespace(number=n, checkpoints=[SimpleNamespace(id=f"s{n}-a")]) for n in (1, 2, 3)]
    cur = SimpleNamespace(
        cadence=None,
        stages=stages,
        reading_list=[
            _reading("attention", 1, "Attention Is All You Need", "1706.03762"),
            _reading("gpt2", 1, "Language Models are Unsupervised Multitask Learners", kind="blog"),
            _reading("rope", 2, "RoFormer", "2104.09864"),
            _reading("gqa", 2, "GQA", "2305.13245"),
            _reading("vllm", 3, "PagedAttention", "2309.06180"),
        ],
    )
    monkeypatch.setattr(context.AppContext, "curriculum", lambda self: cur)
    return cur


def test_suggest_current_stage_first_then_backlog_then_later(run_cli, reading_curriculum, roadmap_home):
    from roadmap_cli.tracker.progress import mark_done
    from roadmap_cli.store import open_store

    _data(log(run_cli, "whatever title", "--arxiv", "1706.03762v5"))  # read: not suggested
    _data(log(run_cli, "GQA", "--status", "to-read"))  # already logged: never suggested (a log would duplicate it)
    with open_store(roadmap_home).session() as session:
        mark_done(session, "s1-a", "self")  # stage 1 done -> current stage 2
    data = _data(run_cli("paper", "suggest", "--json"))
    assert data["current_stage"] == 2 and data["total_unread"] == 3 and data["on_your_list"] == 1
    assert [s["reading_id"] for s in data["suggestions"]] == ["rope", "gpt2", "vllm"]
    assert "1 more already logged to read" in run_cli("paper", "suggest").stdout
    forced = _data(run_cli("paper", "suggest", "--stage", "3", "--limit", "2", "--json"))
    assert [s["reading_id"] for s in forced["suggestions"]] == ["vllm", "rope"]
    assert "unknown stage '7'" in run_cli("paper", "suggest", "--stage", "7").stderr
    assert "log one: roadmap paper log RoFormer --arxiv 2104.09864 --stage 2" in run_cli("paper", "suggest").stdout
    assert [s["reading_id"] for s in _data(run_cli("paper", "suggest", "--kind", "blog", "--json"))["suggestions"]] == [
        "gpt2"
    ]
    assert "unknown reading kind 'blgo'" in run_cli("paper", "suggest", "--kind", "blgo").stderr


def test_stage_checked_against_the_curriculum(run_cli, reading_curriculum):
    refused = log(run_cli, "T", "--stage", "12")
    assert refused.exit_code == 2 and "unknown stage '12'" in refused.stderr


# --- help ---------------------------------------------------------------------------------


def test_every_research_command_and_option_has_help():
    import typer.main

    from roadmap_cli.cli import app

    root = typer.main.get_command(app)
    groups = {name: root.commands[name] for name in ("paper", "log")}
    commands = [root.commands["cadence"]] + [c for g in groups.values() for c in g.commands.values()]
    assert {"log", "add", "list", "show", "read", "note", "edit", "delete", "import", "export", "suggest"} <= set(
        groups["paper"].commands
    )
    assert {
        "reproduction",
        "experiment",
        "benchmark",
        "report",
        "blog",
        "oss",
        "workshop-paper",
        "hours",
        "list",
        "edit",
        "delete",
    } <= set(groups["log"].commands)
    for command in commands:
        assert command.help, command.name
        for param in command.params:
            assert getattr(param, "help", None), f"{command.name} {param.name}"


def test_suggest_never_offers_a_paper_logged_under_another_spelling_of_its_link(run_cli, reading_curriculum):
    item = _reading("blog", 1, "The Illustrated Transformer")
    item.url = "https://jalammar.github.io/illustrated-transformer/"
    reading_curriculum.reading_list.append(item)
    assert "blog" in [s["reading_id"] for s in _data(run_cli("paper", "suggest", "--json"))["suggestions"]]
    _data(
        log(
            run_cli,
            "Jay's transformer post",
            "--url",
            "http://www.jalammar.github.io/illustrated-transformer",
            "--status",
            "reading",
        )
    )
    data = _data(run_cli("paper", "suggest", "--json"))
    assert "blog" not in [s["reading_id"] for s in data["suggestions"]] and data["on_your_list"] == 1
