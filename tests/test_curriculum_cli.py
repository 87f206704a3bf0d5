"""The curriculum commands through the real CLI: curriculum show|validate|readings, stages, stage show."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_curriculum_loader import MINIMAL


def mark_done(home: Path, *checkpoint_ids: str) -> None:
    """Complete checkpoints the way the progress service does: one row each."""
    from roadmap_cli.store import open_store
    from roadmap_cli.store.tables import CheckpointProgress

    home.mkdir(parents=True, exist_ok=True)
    store = open_store(home)
    with store.session() as s:
        for cid in checkpoint_ids:
            s.add(CheckpointProgress(checkpoint_id=cid, completed_at="2026-01-01T00:00:00Z", source="self"))
    store.engine.dispose()


def test_stages_table_and_json(run_cli, roadmap_home):
    mark_done(roadmap_home, "s1-draw-transformer-block", "s1-explain-query-key-value", "s2-implement-tokenizer")
    result = run_cli("stages", "--json")
    assert result.exit_code == 0, result
    env = result.json()
    assert env["roadmap"] == 1 and env["command"] == "stages"
    rows = env["data"]
    assert [r["number"] for r in rows] == list(range(1, 11))
    assert (rows[0]["done"], rows[0]["total"], rows[1]["done"], rows[2]["done"]) == (2, 6, 1, 0)
    assert sum(r["planned_weeks"] for r in rows) == 52
    assert rows[0]["title"] == "Transformer Fundamentals"

    table = run_cli("stages")
    assert table.exit_code == 0 and "2/6" in table.stdout and "Build MiniGPT" in table.stdout


def test_stages_in_chinese(run_cli):
    result = run_cli("--lang", "zh", "stages", "--json")
    assert result.json()["data"][1]["title"] == "从零实现 MiniGPT"


@pytest.mark.parametrize("ref", ["2", "build-minigpt"])
def test_stage_show_by_number_or_id(run_cli, roadmap_home, ref):
    mark_done(roadmap_home, "s2-implement-tokenizer")
    result = run_cli("stage", "show", ref, "--json")
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert data["id"] == "build-minigpt" and data["goal"] == "Implement a minimal working GPT from scratch"
    first = data["checkpoints"][0]
    assert (first["id"], first["kind"], first["done"], first["proved_by"]) == (
        "s2-implement-tokenizer",
        "build",
        True,
        ["minigpt/tokenizer"],
    )
    assert data["done"] == 1 and data["total"] == 6
    assert data["milestones"] == ["m1"]
    assert any(
        t["terms"] == ["Context Window", "Sequence Length", "Forward", "Backward", "Loss", "Optimizer"]
        for t in data["topics"]
    )


def test_stage_show_for_people_in_one_language(run_cli, roadmap_home):
    mark_done(roadmap_home, "s9-read-flashattention-paper")
    zh = run_cli("--lang", "zh", "stage", "show", "9")
    assert zh.exit_code == 0, zh
    assert "能读懂 FlashAttention 论文" in zh.stdout and "Can read and understand" not in zh.stdout
    assert "✓ explain  s9-read-flashattention-paper" in zh.stdout and "arXiv:2205.14135" in zh.stdout
    en = run_cli("stage", "show", "1")
    assert "Can draw a Transformer block" in en.stdout and "能画出" not in en.stdout
    assert "softmax(Q @ K.T)" in en.stdout


def test_unknown_stage_is_one_line_with_did_you_mean(run_cli):
    result = run_cli("stage", "show", "flash-atention")
    assert result.exit_code == 2
    assert "unknown stage 'flash-atention' (did you mean 'flash-attention'?)" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert run_cli("stage", "show", "11").exit_code == 2


def test_curriculum_show_json(run_cli):
    result = run_cli("curriculum", "show", "--json")
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert len(data["stages"]) == 10
    assert data["checkpoints"] == {"total": 46, "explain": 12, "build": 34}
    assert len(data["milestones"]) == 3 and len(data["levels"]) == 5
    assert [len(p["phases"]) for p in data["plans"]] == [6, 4]
    assert {"period": "week", "kind": "paper", "count": 5, "text": "Read 5 papers"} in data["cadence"]["targets"]
    assert data["reading_list"]["total"] >= 20
    text = run_cli("curriculum", "show")
    assert text.exit_code == 0 and "46 checkpoints" in text.stdout and "Foundation Model Researcher" in text.stdout


def test_validate_the_active_curriculum(run_cli):
    result = run_cli("curriculum", "validate", "--json")
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert data["valid"] is True and data["errors"] == []
    assert data["path"].endswith("curriculum.yaml")
    text = run_cli("curriculum", "validate")
    assert text.exit_code == 0 and f"{data['path']}: valid" in text.stdout


def test_validate_a_bad_file_lists_every_problem_and_exits_2(run_cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        MINIMAL.replace("planned_weeks: 2", "planned_weeks: two").replace("    id: two", "    id: one"),
        encoding="utf-8",
    )
    result = run_cli("curriculum", "validate", str(bad))
    assert result.exit_code == 2, result
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{bad}:11:20: stages[0].planned_weeks:")
    assert f"{bad}: 1 problem(s)" in result.stdout  # schema errors stop before reference checks
    as_json = run_cli("curriculum", "validate", str(bad), "--json")
    assert as_json.exit_code == 2 and as_json.json()["data"]["valid"] is False


def test_validate_warnings_do_not_fail(run_cli, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(MINIMAL, encoding="utf-8")
    result = run_cli("curriculum", "validate", str(good))
    assert result.exit_code == 0, result
    assert "warning: checkpoint 's2-b': lab 'no-such-lab' does not exist yet" in result.stdout
    assert "valid (1 warning(s))" in result.stdout


def test_validate_missing_file(run_cli, tmp_path):
    result = run_cli("curriculum", "validate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2 and "curriculum file not found" in result.stderr


def test_a_broken_user_curriculum_is_reported_not_a_traceback(run_cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.replace("kind: explain", "kind: [explain"), encoding="utf-8")
    result = run_cli("--curriculum", str(bad), "stages")
    assert result.exit_code == 2, result
    assert f"{bad}: 1 problem(s)" in result.stderr and f"{bad}:15:" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_user_curriculum_is_used(run_cli, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(MINIMAL, encoding="utf-8")
    result = run_cli("--curriculum", str(mine), "stages", "--json")
    assert [r["id"] for r in result.json()["data"]] == ["one", "two"]


def test_readings(run_cli):
    result = run_cli("curriculum", "readings", "--stage", "9", "--json")
    assert result.exit_code == 0, result
    rows = result.json()["data"]
    assert {r["arxiv"] for r in rows} >= {"2205.14135", "2307.08691", "2407.08608"}
    assert all(r["stage"] == 9 for r in rows)
    papers = run_cli("curriculum", "readings", "--kind", "book", "--json").json()["data"]
    assert papers and all(r["kind"] == "book" for r in papers)
    assert run_cli("curriculum", "readings", "--stage", "42").exit_code == 2
    listing = run_cli("curriculum", "readings").stdout
    assert (
        "1706.03762" in listing
        and f"{len(run_cli('curriculum', 'readings', '--json').json()['data'])} reading(s)" in listing
    )


@pytest.mark.parametrize(
    "args",
    [["curriculum", "show"], ["curriculum", "validate"], ["curriculum", "readings"], ["stages"], ["stage", "show"]],
)
def test_every_command_has_help(run_cli, args):
    result = run_cli(*args, "--help")
    assert result.exit_code == 0, result
    assert "--json" in result.stdout
    # the command's docstring is its help text
    assert len([line for line in result.stdout.splitlines() if line.strip()]) > 4


def test_curriculum_text_is_shown_literally_not_as_markup(run_cli, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        MINIMAL.replace("title: {zh: 一, en: One}", 'title: {zh: 一, en: "[red]One[/red]"}'), encoding="utf-8"
    )
    result = run_cli("--curriculum", str(mine), "stage", "show", "1")
    assert result.exit_code == 0, result
    assert "Stage 1 · [red]One[/red]" in result.stdout
