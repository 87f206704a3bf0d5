"""Checkpoints that became lab-proved (build) when the autograd (stage 3),
modern-llm (stage 4), gpu-architecture (stage 8) and llm-serving (stage 10) labs arrived keep a
learner's earlier self-assessment, and the open ones point at their lab."""

from __future__ import annotations

from pathlib import Path

from test_curriculum_cli import mark_done

import pytest

S8 = ("s8-explain-warp", "s8-explain-occupancy", "s8-explain-shared-memory", "s8-analyze-kernel-bottlenecks")
CONVERTED = {
    3: (
        "autograd",
        [
            "s3-explain-loss-backward",
            "s3-explain-autograd-workflow",
            "s3-read-nn-linear-source",
            "s3-read-nn-multiheadattention-source",
            "s3-trace-tensor-lifecycle",
        ],
    ),
    4: (
        "modern-llm",
        [
            "s4-explain-rope",
            "s4-explain-kv-cache",
            "s4-explain-gqa",
            "s4-explain-moe",
            "s4-explain-speculative-decoding",
        ],
    ),
    8: ("gpu-architecture", list(S8)),
    10: (
        "llm-serving",
        [
            "s10-design-inference-service",
            "s10-analyze-production-performance",
            "s10-design-multi-gpu-inference",
            "s10-design-production-llm-platform",
        ],
    ),
}


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


@pytest.mark.parametrize("stage", sorted(CONVERTED))
def test_earlier_self_checks_survive_the_conversion(run_cli, roadmap_home: Path, stage: int):
    lab, ids = CONVERTED[stage]
    mark_done(roadmap_home, ids[0])
    checkpoints = {c["id"]: c for c in run_cli("stage", "show", str(stage), "--json").json()["data"]["checkpoints"]}
    assert checkpoints[ids[0]]["done"] and not checkpoints[ids[1]]["done"]
    assert all(checkpoints[cid]["kind"] == "build" for cid in ids)
    refused = run_cli("check", ids[1])
    assert refused.exit_code != 0 and lab in (refused.stderr or refused.stdout)
