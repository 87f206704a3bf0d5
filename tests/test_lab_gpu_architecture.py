"""The gpu-architecture lab: its checkpoints became lab-proved (build) without
losing a learner's earlier self-assessment, and its reference grades on a CPU
with the GPU part honestly reported as not graded here."""

from __future__ import annotations

from pathlib import Path

from test_curriculum_cli import mark_done

S8 = ("s8-explain-warp", "s8-explain-occupancy", "s8-explain-shared-memory", "s8-analyze-kernel-bottlenecks")


def test_self_checked_stage8_checkpoints_stay_done(run_cli, roadmap_home: Path):
    # Done when they were still "explain" (self-assessed): the rows are keyed by id, so they stay done.
    mark_done(roadmap_home, "s8-explain-warp", "s8-explain-occupancy")
    stage = run_cli("stage", "show", "8", "--json")
    assert stage.exit_code == 0, stage
    checkpoints = {c["id"]: c for c in stage.json()["data"]["checkpoints"]}
    assert {cid for cid in S8 if checkpoints[cid]["done"]} == {"s8-explain-warp", "s8-explain-occupancy"}
    assert all(checkpoints[cid]["kind"] == "build" for cid in S8)

    exported = run_cli("export")
    assert exported.exit_code == 0
    assert "s8-explain-warp" in exported.stdout and "s8-explain-occupancy" in exported.stdout


def test_the_open_ones_point_at_the_lab(run_cli, roadmap_home: Path):
    mark_done(roadmap_home, "s8-explain-warp")
    result = run_cli("check", "s8-explain-occupancy")
    assert result.exit_code != 0  # lab-proved now: grade the lab (or --force)
    assert "gpu-architecture" in (result.stderr or result.stdout)
