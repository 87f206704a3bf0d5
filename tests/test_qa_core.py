"""QA regressions for the core commands: status/next with curriculum text that
looks like rich markup, dates that do not exist, unusable homes, hand-edited
exports, and the schedule line for unusual start dates."""

from __future__ import annotations

import json
from pathlib import Path

# A valid curriculum whose text contains square brackets: rich would read
# "[/]" or "[/bold]" as markup and crash (or silently eat "[red]").
MARKUP_CURRICULUM = """\
format_version: 1
title: {zh: "测试 [bold]", en: "Test [/] [red]x"}
final_goal: {zh: 目标, en: Goal}
cadence:
  weekly_hours: {min: 10, max: 15}
milestones:
  - {number: 1, id: m1, title: {zh: "里程碑 [/]", en: "M [/x]"}, stages: [1]}
stages:
  - number: 1
    id: one
    title: {zh: "一 [/]", en: "C++ [templates] [/bold]"}
    goal: {zh: 一, en: One}
    planned_weeks: 2
    checkpoints:
      - id: s1-a
        kind: explain
        text: {zh: "甲 [/]", en: "A [/] [link=x]"}
"""


def _markup_curriculum(tmp_path: Path) -> Path:
    path = tmp_path / "markup.yaml"
    path.write_text(MARKUP_CURRICULUM, encoding="utf-8")
    return path


def test_status_shows_bracketed_curriculum_text_verbatim(run_cli, tmp_path: Path):
    path = _markup_curriculum(tmp_path)
    for lang in ("en", "zh"):
        result = run_cli("--curriculum", path, "--lang", lang, "status")
        assert result.exit_code == 0, result
    result = run_cli("--curriculum", path, "status")
    assert "Test [/] [red]x" in result.stdout
    assert "C++ [templates] [/bold]" in result.stdout
    assert "M [/x]" in result.stdout
    assert "A [/] [link=x]" in result.stdout


def test_next_shows_bracketed_checkpoint_text_verbatim(run_cli, tmp_path: Path):
    result = run_cli("--curriculum", _markup_curriculum(tmp_path), "next")
    assert result.exit_code == 0, result
    assert "A [/] [link=x]" in result.stdout


def test_a_date_that_does_not_exist_is_not_called_a_format_error(run_cli):
    result = run_cli("init", "--start-date", "2026-02-30")
    assert result.exit_code == 2
    assert "no such day" in result.stderr and "expected YYYY-MM-DD" not in result.stderr
    wrong_format = run_cli("init", "--start-date", "30.02.2026")
    assert wrong_format.exit_code == 2 and "expected YYYY-MM-DD" in wrong_format.stderr


def test_home_that_is_a_file_is_reported_as_such(run_cli, tmp_path: Path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = run_cli("--home", afile, "status")
    assert result.exit_code == 3, result
    assert "is a file, not a directory" in result.stderr
    assert result.stderr.count("\n") == 1  # one line
    assert afile.read_text() == "x"


def test_empty_home_option_is_refused_not_ignored(run_cli, roadmap_home: Path):
    result = run_cli("--home", "", "status")
    assert result.exit_code == 3, result
    assert "--home is empty" in result.stderr
    assert not (roadmap_home / "roadmap.db").exists()  # it did not quietly fall back to $ROADMAP_HOME


def test_schedule_line_for_a_future_start_and_a_finished_plan(run_cli):
    assert run_cli("init", "--start-date", "2099-01-01").exit_code == 0
    future = run_cli("status").stdout
    assert "starts 2099-01-01" in future and "started 2099" not in future
    assert run_cli("init", "--start-date", "1990-01-01").exit_code == 0
    past = run_cli("status").stdout
    assert "stage -" not in past and "planned weeks are over" in past


def _export(run_cli) -> dict:
    run_cli("check", "s1-explain-query-key-value", "--note", "n")
    run_cli("paper", "log", "Attention Is All You Need", "--arxiv", "1706.03762")
    result = run_cli("export")
    assert result.exit_code == 0, result
    return json.loads(result.stdout)


def test_import_of_hand_edited_exports_gives_one_line(run_cli, tmp_path: Path):
    data = _export(run_cli)
    bad_files = {
        "schema.json": {**data, "schema_version": "x"},
        "row.json": {**data, "tables": {**data["tables"], "papers": [1]}},
        "table.json": {**data, "tables": {**data["tables"], "papers": {"a": 1}}},
    }
    for name, content in bad_files.items():
        path = tmp_path / name
        path.write_text(json.dumps(content), encoding="utf-8")
        result = run_cli("import", path, "--replace")
        assert result.exit_code == 2, (name, result)
        assert result.exception is None and "Traceback" not in result.stderr
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    result = run_cli("import", binary)
    assert result.exit_code == 2 and "not UTF-8" in result.stderr, result


def test_import_refused_by_the_database_keeps_the_data(run_cli, tmp_path: Path):
    data = _export(run_cli)
    broken = json.loads(json.dumps(data))
    del broken["tables"]["papers"][0]["title"]  # NOT NULL column
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    result = run_cli("import", path, "--replace")
    assert result.exit_code == 2, result
    assert "papers" in result.stderr and "nothing was imported" in result.stderr
    assert json.loads(run_cli("export").stdout) == data  # nothing lost


def test_db_status_json_command_name_matches_the_command(run_cli):
    assert run_cli("db", "status", "--json").json()["command"] == "db status"


def test_did_you_mean_ignores_case_and_ranks_a_typed_prefix_first(run_cli):
    upper = run_cli("check", "S1-DRAW-TRANSFORMER-BLOCK")
    assert upper.exit_code == 2 and "did you mean 's1-draw-transformer-block'" in upper.stderr
    stage = run_cli("stage", "show", "BUILD-MINIGPT")
    assert "did you mean 'build-minigpt'" in stage.stderr
    typo = run_cli("check", "s1-explain-transfomer")
    assert "did you mean 's1-explain-transformer-to-non-ai-people'" in typo.stderr


def test_readings_refuse_an_unknown_kind(run_cli):
    result = run_cli("curriculum", "readings", "--kind", "papr")
    assert result.exit_code == 2 and "did you mean 'paper'" in result.stderr


def test_unusable_database_url_is_one_line(run_cli, monkeypatch):
    for url in ("garbage", "nosuchdialect://x"):
        monkeypatch.setenv("DATABASE_URL", url)
        result = run_cli("status")
        assert result.exit_code == 3, result
        assert "DATABASE_URL" in result.stderr and result.exception is None


def test_a_saved_curriculum_that_moved_says_how_to_recover(run_cli, tmp_path: Path):
    path = _markup_curriculum(tmp_path)
    assert run_cli("init", "--use-curriculum", path).exit_code == 0
    path.unlink()
    result = run_cli("status")
    assert result.exit_code == 2
    assert "roadmap init --use-curriculum" in result.stderr and "default" in result.stderr
    assert run_cli("init", "--use-curriculum", "default").exit_code == 0
    assert run_cli("status").exit_code == 0


def test_did_you_mean_for_a_typed_beginning():
    from roadmap_cli.errors import NotFoundError

    assert NotFoundError("entry kind", "exp", ["experiment", "hours"]).suggestions == ["experiment"]
    assert NotFoundError("lab", "flsh", ["flash-attention", "minigpt"]).suggestions == ["flash-attention"]
    assert NotFoundError("lab", "nope", ["flash-attention", "minigpt"]).suggestions == []
    assert NotFoundError("paper", "99", [], hint="see `roadmap paper list`").message == (
        "unknown paper '99' (see `roadmap paper list`)"
    )


def test_stage_without_topics_has_no_empty_topics_heading(run_cli, tmp_path: Path):
    result = run_cli("--curriculum", _markup_curriculum(tmp_path), "stage", "show", "1")
    assert result.exit_code == 0, result
    assert "Topics" not in result.stdout and "Checkpoints" in result.stdout


def test_stage_show_shows_what_check_recorded_and_no_evidence_is_lost(run_cli):
    cid = "s1-draw-transformer-block"
    assert run_cli("check", cid, "--note", "drew [it]", "--evidence", "https://a.example").exit_code == 0
    assert run_cli("check", cid, "--evidence", "https://b.example").exit_code == 0
    shown = run_cli("stage", "show", "1")
    assert "drew [it]" in shown.stdout and "https://a.example" in shown.stdout and "https://b.example" in shown.stdout
    cp = next(c for c in run_cli("stage", "show", "1", "--json").json()["data"]["checkpoints"] if c["id"] == cid)
    assert cp["evidence"] == "https://a.example" and cp["completed_at"]
    assert [n["text"] for n in cp["notes"]] == ["drew [it]", "evidence: https://b.example"]
    assert run_cli("uncheck", cid).exit_code == 0
    cp = next(c for c in run_cli("stage", "show", "1", "--json").json()["data"]["checkpoints"] if c["id"] == cid)
    assert not cp["done"] and "evidence: https://a.example" in [n["text"] for n in cp["notes"]]


def test_unknown_roadmap_lang_is_refused_like_the_option(run_cli, monkeypatch):
    monkeypatch.setenv("ROADMAP_LANG", "fr")
    result = run_cli("status", "--json")
    assert result.exit_code == 2 and "ROADMAP_LANG" in result.stderr, result


def test_import_refuses_malformed_dates_that_would_break_cadence_later(run_cli, tmp_path: Path):
    assert run_cli("log", "hours", "2").exit_code == 0
    data = json.loads(run_cli("export").stdout)
    data["tables"]["cadence_entries"][0]["on_date"] = "not-a-date"
    path = tmp_path / "bad-date.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = run_cli("import", path, "--replace")
    assert result.exit_code == 2 and "on_date 'not-a-date'" in result.stderr, result
    assert run_cli("cadence").exit_code == 0


def test_home_with_url_special_characters_keeps_the_database_inside(run_cli, tmp_path: Path):
    home = tmp_path / "a%20b?x#y"
    assert run_cli("--home", home, "log", "hours", "1").exit_code == 0
    assert (home / "roadmap.db").is_file()
    assert not (tmp_path / "a b").exists()  # where the unquoted URL put it


def test_root_options_after_the_command_are_understood(run_cli, tmp_path: Path):
    zh = run_cli("status", "--lang", "zh", "--json")
    assert zh.exit_code == 0, zh
    assert zh.json()["data"]["lang"] == "zh"
    other = tmp_path / "other-home"
    assert run_cli("log", "hours", "1", f"--home={other}").exit_code == 0
    assert (other / "roadmap.db").is_file()
    later_wins = run_cli("--lang", "en", "stage", "show", "1", "--lang", "zh", "--json")
    assert later_wins.json()["data"]["title"] == "Transformer 基础", later_wins
    assert run_cli("paper", "log", "--", "--lang").exit_code == 0  # after --, a title


def test_next_for_a_build_checkpoint_of_a_missing_lab_suggests_force(run_cli, tmp_path: Path):
    text = (
        MARKUP_CURRICULUM
        + """\
  - number: 2
    id: two
    title: {zh: 二, en: Two}
    goal: {zh: 二, en: Two}
    planned_weeks: 3
    checkpoints:
      - id: s2-b
        kind: build
        text: {zh: 乙, en: B}
        proved_by: [{lab: no-such-lab, part: p1}]
"""
    )
    path = tmp_path / "missing-lab.yaml"
    path.write_text(text, encoding="utf-8")
    result = run_cli("--curriculum", path, "next", "--json")
    commands = {a["checkpoint_id"]: a["command"] for a in result.json()["data"]}
    assert commands["s2-b"] == "roadmap check s2-b --force"
    shipped = run_cli("next", "-n", "12", "--json").json()["data"]
    assert any(a["command"].startswith("roadmap lab start minigpt") for a in shipped)
    # stage 1's explain checkpoints have quizzes: `next` sends the learner to the quiz first
    first = shipped[0]
    assert first["kind"] == "explain" and first["command"].startswith(f"roadmap quiz {first['checkpoint_id']}"), first


def test_stage_show_accepts_the_ways_people_name_a_stage(run_cli):
    for ref in ("s2", "stage 2", "Stage-2", "2", "build-minigpt"):
        result = run_cli("stage", "show", ref, "--json")
        assert result.exit_code == 0 and result.json()["data"]["number"] == 2, (ref, result)
    assert run_cli("stage", "show", "s11").exit_code == 2
