"""Checkpoints of a long-range plan's phases (issue 29): work the ten stages do
not cover, kept apart from the stages' ids, shown under the plan's phases by
`status`, suggested by `next`, counted by `report`, marked by `check` and by a
grade of the lab part that proves them."""

from __future__ import annotations

from pathlib import Path

PHASED = """\
format_version: 1
title: {zh: 测试, en: Test}
final_goal: {zh: 目标, en: Goal}
cadence:
  weekly_hours: {min: 10, max: 15}
stages:
  - number: 1
    id: one
    title: {zh: 一, en: One}
    goal: {zh: 一, en: One}
    planned_weeks: 2
    checkpoints:
      - {id: s1-a, kind: explain, text: {zh: 甲, en: A}}
      - {id: s1-b, kind: explain, text: {zh: 乙, en: B}}
      - {id: s1-c, kind: explain, text: {zh: 丙, en: C}}
      - {id: s1-d, kind: explain, text: {zh: 丁, en: D}}
plans:
  - id: long-plan
    source: "002"
    title: {zh: 长计划, en: Long plan}
    phases:
      - id: p2-engines
        number: 2
        title: {zh: 推理引擎, en: Inference engines}
        span: {zh: 7-14 个月, en: months 7-14}
        start_month: 0
        checkpoints:
          - {id: lp-p2-explain-graphs, kind: explain, text: {zh: 解释计算图, en: Explain compute graphs}}
          - id: lp-p2-build-adder
            kind: build
            text: {zh: 加法器, en: Build the adder}
            proved_by: [{lab: adder, part: add}]
"""


def _write(tmp_path: Path, text: str = PHASED) -> Path:
    path = tmp_path / "phased.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_status_shows_phase_checkpoints_apart_from_the_stages(run_cli, tmp_path: Path):
    path = _write(tmp_path)
    assert run_cli("--curriculum", path, "check", "lp-p2-explain-graphs").exit_code == 0
    data = run_cli("--curriculum", path, "status", "--json").json()["data"]
    assert (data["done"], data["total"]) == (0, 4)  # the stages' totals are the ten-stage plan's, unchanged
    assert data["phases"] == [
        {
            "plan": "long-plan",
            "id": "p2-engines",
            "number": 2,
            "title": "Inference engines",
            "span": "months 7-14",
            "done": 1,
            "total": 2,
        }
    ]
    text = run_cli("--curriculum", path, "status").stdout
    assert "Plan phases" in text and "P2 Inference engines (months 7-14): 1/2" in text


def test_next_suggests_phase_work_in_curriculum_order(run_cli, tmp_path: Path):
    """A phase's checkpoints take their place by the phase's start month among the stages (by their planned
    weeks): a phase that starts with the plan comes after the first stage's work, a later one later."""
    path = _write(tmp_path)
    actions = run_cli("--curriculum", path, "next", "-n", "5", "--json").json()["data"]
    assert [a["checkpoint_id"] for a in actions] == ["s1-a", "s1-b", "s1-c", "s1-d", "lp-p2-explain-graphs"]
    assert actions[-1]["stage"] is None and actions[-1]["phase"] == "long-plan/p2-engines"
    shown = run_cli("--curriculum", path, "next", "-n", "5").stdout
    assert "Phase: Inference engines" in shown
    # with every stage checkpoint done, the phases take every slot
    for cid in ("s1-a", "s1-b", "s1-c", "s1-d"):
        assert run_cli("--curriculum", path, "check", cid).exit_code == 0
    actions = run_cli("--curriculum", path, "next", "--json").json()["data"]
    assert [a["checkpoint_id"] for a in actions] == ["lp-p2-explain-graphs", "lp-p2-build-adder"]
    # -n 1 with stage work left still leaves that one slot to the stages
    assert run_cli("--curriculum", path, "uncheck", "s1-d").exit_code == 0
    assert [a["checkpoint_id"] for a in run_cli("--curriculum", path, "next", "-n", "1", "--json").json()["data"]] == [
        "s1-d"
    ]
    # A phase that starts later than the stages (month 7: after stage 2's 4+4 weeks) waits for them.
    later = _write(
        tmp_path,
        PHASED.replace("start_month: 0", "start_month: 7")
        .replace(
            "plans:",
            "  - number: 2\n    id: two\n    title: {zh: 二, en: Two}\n    goal: {zh: 二, en: Two}\n"
            "    planned_weeks: 40\n    checkpoints:\n      - {id: s2-a, kind: explain, text: {zh: 甲, en: A2}}\n"
            "plans:",
        )
        .replace("planned_weeks: 2", "planned_weeks: 4"),
    )
    for cid in ("s1-a", "s1-b", "s1-c"):
        assert run_cli("--curriculum", later, "uncheck", cid).exit_code == 0
    ids = [a["checkpoint_id"] for a in run_cli("--curriculum", later, "next", "-n", "9", "--json").json()["data"]]
    assert ids == ["s1-a", "s1-b", "s1-c", "s1-d", "s2-a", "lp-p2-explain-graphs", "lp-p2-build-adder"], ids


def test_next_on_day_one_follows_the_shipped_curriculum(run_cli):
    """The shipped plans: seed 002's phase 2 (months 7-14) is not day-one work; it comes once stage 7's
    work (planned from week 30) is reached, before stage 8's."""
    day_one = run_cli("next", "--json").json()["data"]
    assert [a["stage"] for a in day_one] == [1] * len(day_one) and all(a["phase"] is None for a in day_one)
    assert all(a["phase"] is None for a in run_cli("status", "--json").json()["data"]["next"])
    every = run_cli("next", "-n", "200", "--json").json()["data"]
    first_phase = next(i for i, a in enumerate(every) if a["phase"])
    assert every[first_phase]["phase"] == "infra-28-months/p2-inference-engine"
    assert every[first_phase - 1]["stage"] == 7 and every[-1]["phase"], every[first_phase - 1]
    stages = [a["stage"] for a in every if a["stage"]]
    assert stages == sorted(stages) and 8 in stages[stages.index(7) :]


def test_a_phase_checkpoint_that_looks_like_a_stages_is_refused(run_cli, tmp_path: Path):
    path = _write(tmp_path, PHASED.replace("lp-p2-explain-graphs", "s9-explain-graphs"))
    result = run_cli("curriculum", "validate", path)
    assert result.exit_code != 0
    assert "looks like a stage's" in result.stdout + result.stderr
    # one id for a stage's checkpoint and a phase's: both live in the same progress table
    dup = _write(tmp_path, PHASED.replace("lp-p2-explain-graphs", "shared-id").replace("id: s1-a,", "id: shared-id,"))
    result = run_cli("curriculum", "validate", dup)
    assert result.exit_code != 0 and "duplicate checkpoint id" in result.stdout + result.stderr, result


def test_report_counts_phase_checkpoints(run_cli, tmp_path: Path):
    from datetime import date

    path = _write(tmp_path)
    assert run_cli("--curriculum", path, "check", "lp-p2-explain-graphs").exit_code == 0
    assert run_cli("--curriculum", path, "check", "s1-a").exit_code == 0
    month = date.today().strftime("%Y-%m")
    out = tmp_path / "r.md"
    result = run_cli("--curriculum", path, "report", "--month", month, "-o", out)
    assert result.exit_code == 0, result
    text = out.read_text(encoding="utf-8")
    assert "1 of 4 in all" in text and "and 1 of the plan phases' 2" in text
    assert "| P2 Inference engines | explain | Explain compute graphs (lp-p2-explain-graphs)" in text


def test_a_grade_marks_the_phase_checkpoint_its_part_proves(run_cli, tmp_path: Path, adder_workspace: Path):
    """The fixture lab's `add` part proves `fake-add` (its lab.yaml); here that id is a plan phase's checkpoint."""
    import shutil

    # The fixture labs' folder, by path: `from conftest import ...` would pick up whichever conftest module
    # pytest imported first (tests/fixtures_labs/ has one too), so it works or not depending on the test order.
    fixture_labs = Path(__file__).parent / "fixtures_labs"
    path = _write(tmp_path, PHASED.replace("lp-p2-build-adder", "fake-add"))
    shutil.copy(fixture_labs / "labs" / "adder" / "solution" / "adder.py", adder_workspace / "adder.py")
    result = run_cli("--curriculum", path, "grade", "adder", "--part", "add", "--json")
    assert result.exit_code == 0, result
    assert "fake-add" in result.json()["data"]["checkpoints_marked"], result.json()["data"]
    phase = run_cli("--curriculum", path, "status", "--json").json()["data"]["phases"][0]
    assert (phase["done"], phase["total"]) == (1, 2)
