"""Device detection without torch, and what the engine does on a CUDA machine,
simulated with a fake `nvidia-smi` (the GPU itself is not exercised here)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
REAL_PROBE = __import__("roadmap_cli.labs.device", fromlist=["torch_sees_cuda"]).torch_sees_cuda


@pytest.fixture
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A PATH with an nvidia-smi that reports an H100, and a torch 'built with CUDA 12.4'."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 9.0'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("ROADMAP_DEVICE", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    from roadmap_cli.labs import device

    monkeypatch.setattr(device, "torch_built_with_cuda", lambda: "12.4")
    monkeypatch.setattr(device, "torch_sees_cuda", lambda gpus: (True, ""))
    device.detect_device.cache_clear()
    yield device
    device.detect_device.cache_clear()


def test_a_gpu_is_detected_from_nvidia_smi(fake_gpu) -> None:
    info = fake_gpu.detect_device()
    assert (info.kind, info.name, info.capability) == ("cuda", "NVIDIA H100 80GB HBM3", "9.0")
    assert not info.interpret_mode


def test_cpu_torch_build_or_hidden_gpus_mean_cpu(fake_gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_gpu, "torch_built_with_cuda", lambda: None)
    fake_gpu.detect_device.cache_clear()
    assert "CPU-only build" in fake_gpu.detect_device().reason
    monkeypatch.setattr(fake_gpu, "torch_built_with_cuda", lambda: "12.4")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    fake_gpu.detect_device.cache_clear()
    assert fake_gpu.detect_device().kind == "cpu"


def test_cuda_mode_needs_torch_to_see_the_gpu(fake_gpu, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """nvidia-smi and a CUDA wheel are not enough (issue 37): a driver older than the wheel's CUDA leaves
    torch.cuda.is_available() False, and the grade must then run on the CPU under the interpreter. The
    real probe (this machine's torch sees no GPU) is asked once and cached per driver/torch/GPU key."""
    monkeypatch.setattr(fake_gpu, "torch_sees_cuda", REAL_PROBE)  # the real probe, behind the fake nvidia-smi
    monkeypatch.setattr(fake_gpu, "_probe_cache", lambda: tmp_path / "cache" / "cuda-probe.json")
    fake_gpu.detect_device.cache_clear()
    info = fake_gpu.detect_device()
    assert info.kind == "cpu" and "torch.cuda.is_available() is False" in info.reason
    assert (tmp_path / "cache" / "cuda-probe.json").is_file()
    calls = []

    def no_python(*args, **kwargs):
        calls.append(args)
        raise OSError("no python here")

    monkeypatch.setattr(fake_gpu.subprocess, "run", no_python)
    assert fake_gpu.torch_sees_cuda([("NVIDIA H100 80GB HBM3", "9.0")])[0] is False and not calls  # cached
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another key: asked again (and the fake run fails)
    assert fake_gpu.torch_sees_cuda([("NVIDIA H100 80GB HBM3", "9.0")])[0] is False and calls
    fake_gpu.detect_device.cache_clear()


def test_on_a_cuda_machine_every_part_runs_without_the_interpreter(fake_gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake lab's gpu test fails whenever it runs: on 'CUDA' it must run,
    with ROADMAP_DEVICE=cuda and no TRITON_INTERPRET."""
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # must not leak into a CUDA grade
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.grading.runner import grade_workspace
    from roadmap_cli.labs.spec import find_lab

    spec = find_lab("adder")
    with tempfile.TemporaryDirectory() as tmp:
        ws.write_solution(spec, Path(tmp))
        run = grade_workspace(spec, Path(tmp))
    statuses = {p.id: p.status for p in run.parts}
    assert statuses == {"add": "passed", "mul": "passed", "speed": "passed", "gpu": "failed"}
    assert run.max_score == 70 and run.interpret_mode is False
    assert run.device == "NVIDIA H100 80GB HBM3" and run.device_capability == "9.0"
    assert "engine must never run this part without CUDA" in run.part("gpu").message


def test_grade_never_imports_torch_in_the_parent(tmp_path: Path) -> None:
    """The grader imports torch in its own process; `roadmap grade` itself must not."""
    import subprocess
    import sys

    env = dict(
        os.environ, ROADMAP_HOME=str(tmp_path / "home"), ROADMAP_LABS_DIR=str(FIXTURES / "labs"), ROADMAP_DEVICE="cpu"
    )
    script = (
        "import sys\n"
        "from roadmap_cli.cli import main\n"
        "for args in (['lab', 'start', 'adder', '--dir', sys.argv[1]], ['grade', 'adder'], ['lab', 'list']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('HEAVY', sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "ws")], env=env, capture_output=True, text=True, timeout=120
    )
    assert "HEAVY []" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "test_add.py::test_add_small" in proc.stdout  # the grade really ran (and failed on the starter)
