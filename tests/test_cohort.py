"""Cohort commands: status, board (ranked per device model), export; on
SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pg_writer import fake_run


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request) -> str:
    if request.param == "postgres":
        request.getfixturevalue("pg_url")  # sets DATABASE_URL to a fresh database
    return request.param


def _grade(
    lab_id: str, *, device: str, score: float, perf: list, outcome: str = "passed", sandbox: str | None = None
) -> None:
    """Record an attempt for $ROADMAP_LEARNER as `roadmap grade` would on SQLite, and as the cohort's worker
    does (verified) on PostgreSQL."""
    from roadmap_cli import context
    from roadmap_cli.grading.grade import attempt_writer
    from roadmap_cli.labs.spec import find_lab

    context.reset()
    lab = find_lab(lab_id)
    run = fake_run(lab, 0, 0)
    run.device, run.score, run.perf, run.outcome, run.sandbox = device, score, perf, outcome, sandbox
    store = context.current().store()
    store.write_sql(attempt_writer(lab, run, None, None, learner=store.learner, verified=True))


def _as(monkeypatch, learner: str) -> None:
    from roadmap_cli import context

    monkeypatch.setenv("ROADMAP_LEARNER", learner)
    context.reset()


H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"


def test_board_ranks_only_results_from_the_same_device_model(backend, run_cli, monkeypatch):
    def perf(ratio):
        return [{"test": "t", "name": "matmul", "value": 100.0, "unit": "TFLOP/s", "pct_of_baseline": 100 * ratio}]

    _as(monkeypatch, "ada")
    _grade("cuda-matmul", device=H100, score=40, perf=perf(0.8))
    _grade("cuda-matmul", device=H100, score=50, perf=perf(0.9))  # her best on the H100
    _grade("cuda-matmul", device=H100, score=50, perf=perf(2.0), outcome="timeout")  # never counts
    _as(monkeypatch, "grace")
    _grade("cuda-matmul", device=H100, score=50, perf=perf(1.1))  # same score, faster: ranked first
    _as(monkeypatch, "linus")
    _grade("cuda-matmul", device=A100, score=50, perf=perf(3.0))  # another GPU: its own ranking
    result = run_cli("cohort", "board", "cuda-matmul", "--json")
    assert result.exit_code == 0, result
    groups = {g["device"]: g["learners"] for g in result.json()["data"]["devices"]}
    assert set(groups) == {H100, A100}
    assert [(e["rank"], e["learner"]) for e in groups[H100]] == [(1, "grace"), (2, "ada")]
    ada = groups[H100][1]
    assert ada["best_score"] == 50 and ada["perf_ratio"] == pytest.approx(0.9) and ada["attempts"] == 2
    assert [(e["rank"], e["learner"]) for e in groups[A100]] == [(1, "linus")]
    people = run_cli("cohort", "board", "cuda-matmul")
    assert people.exit_code == 0 and "grace" in people.stdout and "same device model" in people.stdout
    unknown = run_cli("cohort", "board", "cuda-matmull")
    assert unknown.exit_code == 2 and "did you mean" in unknown.stderr


def test_a_weak_sandbox_result_never_ranks_above_a_strong_one(backend, run_cli, monkeypatch):
    _as(monkeypatch, "ada")
    _grade("cuda-matmul", device=H100, score=60, perf=[], sandbox="weak")  # higher, but without the OS wall
    _as(monkeypatch, "grace")
    _grade("cuda-matmul", device=H100, score=40, perf=[], sandbox="strong")
    _grade("cuda-matmul", device=H100, score=55, perf=[], sandbox="weak")  # her own weak best does not count first
    _as(monkeypatch, "linus")
    _grade("cuda-matmul", device=H100, score=70, perf=[])  # recorded before the sandbox was: unknown
    data = run_cli("cohort", "board", "cuda-matmul", "--json").json()["data"]
    ranked = [(e["rank"], e["learner"], e["best_score"], e["sandbox"]) for e in data["devices"][0]["learners"]]
    assert ranked == [(1, "grace", 40, "strong"), (2, "linus", 70, "unknown"), (3, "ada", 60, "weak")]
    assert "sandbox" in run_cli("cohort", "board", "cuda-matmul").stdout


def test_status_shows_every_learner_and_export_has_it_all(backend, run_cli, monkeypatch, tmp_path: Path):
    _as(monkeypatch, "ada")
    assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0
    assert run_cli("log", "hours", "2").exit_code == 0
    assert run_cli("paper", "log", "FlashAttention", "--arxiv", "2205.14135").exit_code == 0
    from roadmap_cli.labs.spec import find_lab

    minigpt = find_lab("minigpt")
    for part in minigpt.parts:  # every part passed (over several attempts): the lab counts as passed
        from roadmap_cli import context
        from roadmap_cli.grading.grade import attempt_writer

        run = fake_run(minigpt, 1, 1)
        run.parts[0].id = part.id
        context.reset()
        store = context.current().store()
        # As the cohort's worker records them: on a server only verified attempts pass a lab (a learner's own are
        # self-graded claims, tests/test_cohort_verified.py); a SQLite file's attempts are its own.
        store.write_sql(attempt_writer(minigpt, run, None, None, learner=store.learner, verified=True))
    from roadmap_cli import context

    phase_checkpoint = context.current().curriculum().phase_checkpoints()[0][2].id
    assert run_cli("check", phase_checkpoint, "--force").exit_code == 0  # a plan phase's own checkpoint
    _as(monkeypatch, "grace")
    assert run_cli("log", "hours", "1").exit_code == 0
    result = run_cli("cohort", "status", "--json")
    assert result.exit_code == 0, result
    rows = {r["learner"]: r for r in result.json()["data"]["learners"]}
    assert set(rows) == {"ada", "grace"}
    assert rows["ada"]["checkpoints_done"] >= 1 and rows["ada"]["labs_passed"] == ["minigpt"]
    assert rows["ada"]["week"] == {"papers": 1, "items": {}, "hours": 2.0}
    assert rows["grace"]["checkpoints_done"] == 0 and rows["grace"]["week"]["hours"] == 1.0
    assert rows["grace"]["stage"] == 1
    phases_total = len(context.current().curriculum().phase_checkpoints())
    assert (rows["ada"]["phase_checkpoints_done"], rows["ada"]["phase_checkpoints_total"]) == (1, phases_total)
    assert rows["grace"]["phase_checkpoints_done"] == 0
    shown = run_cli("cohort", "status").stdout
    assert "ada" in shown and "plan phases" in shown and f"1/{phases_total}" in shown
    exported = run_cli("cohort", "export")
    assert exported.exit_code == 0
    doc = json.loads(exported.stdout)
    assert {r["learner"] for r in doc["status"]["learners"]} == {"ada", "grace"}
    assert {b["lab"] for b in doc["boards"]} >= {"minigpt", "cuda-matmul"}
    target = tmp_path / "cohort.json"
    assert run_cli("cohort", "export", "-o", str(target), "--json").exit_code == 0
    assert json.loads(target.read_text())["status"]["learners"] == doc["status"]["learners"]
    assert run_cli("cohort", "export", "-o", str(target)).exit_code == 2  # never overwrites


def test_the_board_never_cuts_a_learner_id_on_an_80_column_terminal(tmp_path: Path):
    """A real terminal (pty, 80 columns): a long learner id and the outcome words come out whole."""
    import os
    import sys

    import pexpect

    learner = "ada.lovelace.long-address@example-university.org"
    env = dict(os.environ, ROADMAP_HOME=str(tmp_path / "home"), ROADMAP_LEARNER=learner, COLUMNS="80", TERM="xterm")
    env.pop("DATABASE_URL", None)
    record = (
        "from roadmap_cli import context\nfrom roadmap_cli.grading.grade import record_attempt\n"
        "from roadmap_cli.labs.spec import find_lab\nfrom pg_writer import fake_run\n"
        "lab = find_lab('cuda-matmul'); run = fake_run(lab, 0, 0); run.sandbox = 'strong'\n"
        "record_attempt(context.current().store(), lab, run, None, None)\n"
    )
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", record],
        env=dict(env, PYTHONPATH=str(Path(__file__).parent)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = pexpect.run(
        f"{sys.executable} -m roadmap_cli cohort board cuda-matmul",
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 80),
    )
    joined = "".join(out.splitlines())
    assert learner in joined and "sandbox strong" in joined and "…" not in out, out
