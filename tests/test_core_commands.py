"""init, status, next, check, uncheck, export/import through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roadmap_cli.curriculum import load_curriculum
from roadmap_cli.paths import default_curriculum_path


@pytest.fixture(scope="module")
def curriculum():
    return load_curriculum(default_curriculum_path())


def first_of_kind(curriculum, kind: str):
    return next(cp for cp in curriculum.all_checkpoints() if cp.kind == kind)


def test_status_on_a_fresh_home(run_cli, roadmap_home: Path):
    result = run_cli("status")
    assert result.exit_code == 0, result
    assert "0/46" in result.stdout
    assert (roadmap_home / "roadmap.db").exists()


def test_status_json_envelope(run_cli):
    result = run_cli("status", "--json")
    assert result.exit_code == 0, result
    env = result.json()
    assert env["roadmap"] == 1 and env["command"] == "status"
    data = env["data"]
    assert data["total"] == 46 and data["done"] == 0
    assert len(data["stages"]) == 10 and data["current_stage"] == 1
    assert len(data["milestones"]) == 3
    assert data["schedule"] is None
    assert data["next"], "a fresh learner gets next steps"


def test_check_keeps_first_date_and_counts(run_cli, curriculum):
    cp = first_of_kind(curriculum, "explain")
    assert run_cli("check", cp.id, "--note", "explained it to a friend").exit_code == 0
    first = run_cli("status", "--json").json()["data"]
    assert first["done"] == 1
    again = run_cli("check", cp.id, "--note", "second note")
    assert again.exit_code == 0 and "already done" in again.stdout
    exported = json.loads(run_cli("export").stdout)
    rows = exported["tables"]["checkpoint_progress"]
    assert len(rows) == 1
    assert [n["text"] for n in exported["tables"]["checkpoint_notes"]] == ["explained it to a friend", "second note"]
    assert run_cli("uncheck", cp.id).exit_code == 0
    assert run_cli("status", "--json").json()["data"]["done"] == 0
    # notes survive an uncheck
    assert len(json.loads(run_cli("export").stdout)["tables"]["checkpoint_notes"]) == 2


def test_unknown_checkpoint_has_did_you_mean(run_cli, curriculum):
    cp = first_of_kind(curriculum, "explain")
    typo = cp.id[:-1] + ("x" if cp.id[-1] != "x" else "y")
    result = run_cli("check", typo)
    assert result.exit_code == 2
    assert "did you mean" in result.stderr and cp.id in result.stderr
    assert "Traceback" not in result.stderr


def test_build_checkpoint_needs_a_lab_or_force(run_cli, curriculum):
    cp = first_of_kind(curriculum, "build")
    refused = run_cli("check", cp.id)
    assert refused.exit_code == 2 and "roadmap grade" in refused.stderr
    assert run_cli("check", cp.id, "--force").exit_code == 0
    rows = json.loads(run_cli("export").stdout)["tables"]["checkpoint_progress"]
    assert rows[0]["source"] == "self (forced)"


def test_next_suggests_commands(run_cli):
    result = run_cli("next", "--json", "-n", "4")
    assert result.exit_code == 0
    actions = result.json()["data"]
    assert len(actions) == 4 and all(a["command"].startswith("roadmap ") for a in actions)


def test_init_schedule_and_settings(run_cli):
    assert run_cli("init", "--start-date", "2026-01-05", "--weekly-hours", "12", "--set-lang", "zh").exit_code == 0
    data = run_cli("status", "--json").json()["data"]
    assert data["schedule"]["start_date"] == "2026-01-05"
    assert data["schedule"]["verdict"] in {"ahead", "on track", "behind"}
    assert data["lang"] == "en"  # ROADMAP_LANG=en (set by the test fixture) wins over the saved setting
    assert run_cli("init", "--start-date", "not-a-date").exit_code == 2


def test_export_import_export_is_identical(run_cli, curriculum, tmp_path: Path):
    cp = first_of_kind(curriculum, "explain")
    run_cli("check", cp.id, "--note", "中文笔记 with unicode", "--evidence", "https://example.org/post")
    run_cli("init", "--start-date", "2026-02-01")
    first = run_cli("export").stdout
    dump = tmp_path / "export.json"
    dump.write_text(first, encoding="utf-8")

    refused = run_cli("import", str(dump))
    assert refused.exit_code == 2 and "--replace" in refused.stderr

    other_home = tmp_path / "other"
    assert run_cli("--home", str(other_home), "import", str(dump)).exit_code == 0
    second = run_cli("--home", str(other_home), "export").stdout
    assert second == first

    # --replace keeps a backup of what was there
    assert run_cli("import", str(dump), "--replace").exit_code == 0
    assert list((Path(json.loads(run_cli("init", "--json").stdout)["data"]["home"]) / "backups").glob("*.json"))


def test_import_rejects_garbage(run_cli, tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = run_cli("import", str(bad))
    assert result.exit_code == 2 and "bad.json:1:2" in result.stderr


def test_cadence_line_without_hour_targets():
    """A curriculum without weekly hours still renders this week's line."""
    from rich.console import Console

    from roadmap_cli.cli.status_render import render_cadence_line

    console = Console(record=True, width=120)
    render_cadence_line(
        console,
        {
            "week": "2026-W49",
            "kinds": {"paper": {"done": 2, "target": 5}},
            "hours": {"done": 3.5, "min": None, "max": None},
            "streak": 4,
        },
    )
    text = console.export_text()
    assert "paper 2/5" in text and "hours 3.5" in text and "streak 4" in text


def test_streamed_export_has_the_bytes_of_the_in_memory_one(run_cli, roadmap_home, tmp_path):
    """`roadmap export` writes table by table as it reads (issue 13) and must
    stay byte-identical to json.dumps of the whole document."""
    from roadmap_cli.store import open_store
    from roadmap_cli.portable.archive import dumps, export_data

    assert run_cli("check", "s1-explain-query-key-value", "--note", '多头注意力 "quoted"').exit_code == 0
    assert run_cli("log", "hours", "2.5").exit_code == 0
    out = tmp_path / "e.json"
    assert run_cli("export", "-o", str(out)).exit_code == 0
    assert out.read_text(encoding="utf-8") == dumps(export_data(open_store(roadmap_home)))
    again = run_cli("export", "-o", str(out))
    assert again.exit_code == 2 and "exists" in again.stderr


def test_next_and_status_suggest_a_grade_for_a_started_lab(run_cli, tmp_path: Path):
    """`lab start X` refuses a lab already started: the suggestion there is the grade."""

    def commands(*args):
        return (
            {a["command"] for a in run_cli(*args).json()["data"]}
            if args[0] == "next"
            else {a["command"] for a in run_cli(*args).json()["data"]["next"]}
        )

    assert "roadmap lab start minigpt  # then: roadmap grade" in commands("next", "-n", "60", "--json")
    # A plan phase's lab (its checkpoints come in curriculum order: later than day one's three in `status`).
    phase_lab = next(
        a["command"].split()[3]
        for a in run_cli("next", "-n", "200", "--json").json()["data"]
        if a["phase"] and a["command"].startswith("roadmap lab start ")
    )
    for lab in ("minigpt", phase_lab):
        assert run_cli("lab", "start", lab).exit_code == 0
    assert run_cli("lab", "start", "minigpt").exit_code == 2  # what the old suggestion ran into
    after = commands("next", "-n", "60", "--json")
    assert "roadmap grade minigpt" in after and not any(c.startswith("roadmap lab start minigpt") for c in after)
    assert f"roadmap grade {phase_lab}" in commands("next", "-n", "200", "--json")
    assert not any(c.startswith("roadmap lab start") for c in commands("status", "--json"))
