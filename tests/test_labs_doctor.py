"""`roadmap doctor`: tools, versions, and which lab parts this machine grades."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"


def test_doctor_reports_tools_and_gradable_parts(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    result = run_cli("doctor", "--json")
    detect_device.cache_clear()
    assert result.exit_code == 0, result
    data = result.json()["data"]
    checks = {c["name"]: c for c in data["checks"]}
    assert {"python", "torch", "triton", "CUDA GPU", "nvcc", "git"} <= set(checks)
    assert checks["python"]["ok"] and checks["git"]["ok"]
    assert data["cuda"] is False
    labs = {lab["id"]: lab for lab in data["labs"]}
    assert labs["adder"]["not_gradable"] == ["gpu"] and "add" in labs["adder"]["gradable"]


def test_device_detection_reads_torch_build_without_importing_it() -> None:
    import sys

    from roadmap_cli.labs.device import torch_built_with_cuda

    had_torch = "torch" in sys.modules
    torch_built_with_cuda()
    assert ("torch" in sys.modules) == had_torch
