"""Every real lab's grader passes its reference solution and fails its starter
and each known-wrong variant (`roadmap dev check`, every lab in one run; a
failure names its lab in each row). This is the project's proof that the
graders can fail. It is an end-to-end proof (marker `e2e`): README's test
command leaves it out, .ci/run runs it; by hand:
`.venv/bin/python -m pytest -m e2e tests/test_labs_dev_check.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import devcheck_background

REPO = Path(__file__).resolve().parents[1]
LAB_IDS = sorted(p.parent.name for p in (REPO / "labs").glob("*/lab.yaml"))


def test_there_are_labs():
    assert {
        "cuda-matmul",
        "minigpt",
        "paged-kv-cache",
        "flash-attention",
        "gpu-architecture",
        "autograd",
        "modern-llm",
        "cpp-extension",
        "llm-serving",
        "distributed",
        "profiling",
        "serving-cluster",
        "quantization",
        "graph-compiler",
    } <= set(LAB_IDS)


@pytest.mark.e2e  # every lab's grader, every variant
@pytest.mark.slow
def test_dev_check_every_lab(background_dev_check):
    """One `dev check` over every lab, not one per lab: its two jobs share one
    warm grader, and the long grades (each lab's solution) start first, so the
    cores never idle at the end of one lab waiting for the next to start.
    It was started right after collection and runs beside the rest of the
    suite (tests/devcheck_background.py); this test, moved last, waits for it.
    A failure shows the rows that failed, each named by its lab."""
    running = background_dev_check or devcheck_background.start()
    returncode, stdout, stderr = running.result(timeout=3600)
    try:
        report = json.loads(stdout)["data"]
    except (ValueError, KeyError):
        pytest.fail(f"dev check gave no report (exit {returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}")
    failed = [
        f"{r['lab']} {r['check']}: got {r['got']}\n    {r['detail'][:800]}" for r in report["rows"] if r["ok"] is False
    ]
    assert not failed and returncode == 0, "dev check failed:\n" + "\n".join(failed) + stderr[-2000:]
    checked = {r["lab"] for r in report["rows"]}
    assert set(LAB_IDS) <= checked  # every lab was checked, none silently left out
    for lab in LAB_IDS:
        kinds = {r["check"] for r in report["rows"] if r["lab"] == lab}
        assert {"starter", "solution", "rules"} <= kinds, f"{lab}: {sorted(kinds)}"
