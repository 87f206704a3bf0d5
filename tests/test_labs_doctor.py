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


# ------------------------------------------------------------------ GPU facts (issue 37), faked probes

GOOD = {
    "torch_cuda": "12.4",
    "driver": "550.54.15",
    "driver_cuda": "12.4",
    "nvcc": "12.4",
    "ninja": "/venv/bin/ninja",
    "compute_modes": ["Default"],
    "shared_per_block": 232448,
    "capability": "9.0",
    "walled": {"available": True, "count": 1},
}


def _judged(**changes) -> dict:
    from roadmap_cli.grading.doctor import gpu_checks

    return {c.name: c for c in gpu_checks({**GOOD, **changes})}


def test_a_machine_ready_for_cuda_grades_passes_every_gpu_check() -> None:
    checks = _judged()
    assert set(checks) == {
        "driver vs torch CUDA",
        "nvcc major",
        "ninja",
        "compute mode",
        "shared memory per block",
        "GPU behind the wall",
    }
    assert all(c.ok is True for c in checks.values()), [(c.name, c.value) for c in checks.values()]
    assert "227 KB" in checks["shared memory per block"].value


@pytest.mark.parametrize(
    "changes, name, ok, words",
    [
        ({"driver_cuda": "11.8"}, "driver vs torch CUDA", False, "cannot use the GPU"),
        ({"driver_cuda": "12.2"}, "driver vs torch CUDA", None, "minor-version compatibility"),
        ({"torch_cuda": None}, "driver vs torch CUDA", False, "CPU-only build"),
        ({"nvcc": "11.8"}, "nvcc major", False, "different major"),
        ({"nvcc": None}, "nvcc major", False, "no nvcc"),
        ({"ninja": None}, "ninja", False, "load_inline needs it"),
        # Only the learner process opens a CUDA context (issue 37): EXCLUSIVE_PROCESS grades, PROHIBITED cannot.
        ({"compute_modes": ["Exclusive_Process"]}, "compute mode", True, "the grader opens none"),
        ({"compute_modes": ["Prohibited"]}, "compute mode", False, "no process may open a CUDA context"),
        ({"compute_modes": []}, "compute mode", None, "unknown"),
        ({"shared_per_block": 101376, "capability": "8.6"}, "shared memory per block", True, "tiles shrink"),
        (
            {"walled": {"error": ["RuntimeError: no CUDA-capable device"]}},
            "GPU behind the wall",
            False,
            "no CUDA-capable",
        ),
    ],
)
def test_each_gpu_fact_a_grade_would_fail_on_is_named(changes, name, ok, words) -> None:
    check = _judged(**changes)[name]
    assert check.ok is ok and words in check.value, (check.ok, check.value)


def test_doctor_on_a_faked_gpu_machine_shows_the_gpu_lines(
    run_cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """nvidia-smi and the torch probe faked; the walled probe is real (this machine's torch sees no GPU)."""
    import os
    import stat

    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        "  --query-gpu=compute_mode) echo Exclusive_Process ;;\n"
        '  --query-gpu=*) echo "NVIDIA H100 80GB HBM3, 9.0" ;;\n'
        '  *) echo "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |" ;;\nesac\n'
    )
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.delenv("ROADMAP_DEVICE", raising=False)
    from roadmap_cli.grading import doctor
    from roadmap_cli.labs import device

    monkeypatch.setattr(device, "torch_built_with_cuda", lambda: "12.4")
    monkeypatch.setattr(device, "torch_sees_cuda", lambda gpus: (True, ""))
    monkeypatch.setattr(
        doctor,
        "probe_torch",
        lambda timeout=120: {
            "torch": "2.6.0+cu124",
            "torch_cuda": "12.4",
            "cuda_available": True,
            "gpu": "NVIDIA H100 80GB HBM3",
            "capability": "9.0",
            "gpu_count": 1,
            "shared_per_block": 232448,
            "triton": "3.2.0",
        },
    )
    device.detect_device.cache_clear()
    try:
        result = run_cli("doctor", "--json")
    finally:
        device.detect_device.cache_clear()
    checks = {c["name"]: c for c in result.json()["data"]["checks"]}
    assert checks["driver vs torch CUDA"]["ok"] is True and "550.54.15" in checks["driver vs torch CUDA"]["value"]
    assert checks["compute mode"]["ok"] is True and "Exclusive_Process" in checks["compute mode"]["value"]
    assert checks["GPU behind the wall"]["ok"] is False  # the real learner process here: no GPU
    assert checks["shared memory per block"]["ok"] is True and checks["ninja"]["ok"] is True
