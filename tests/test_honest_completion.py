"""A lab whose CPU parts pass but whose GPU parts never ran is "passed on CPU
(n parts need a CUDA GPU)" everywhere, never plain "passed"; the GPU part's
checkpoint stays open."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
ADDER = FIXTURES / "labs" / "adder"


pytestmark = pytest.mark.usefixtures("fake_labs")  # tests/conftest.py


def test_passed_on_cpu_everywhere(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    monkeypatch.chdir(ws)
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    shutil.copy(FIXTURES / "kernels" / "mul.py", ws / "mul.py")
    assert run_cli("grade").exit_code == 0

    text = "passed on CPU (1 part needs a CUDA GPU)"
    listed = {r["id"]: r for r in run_cli("lab", "list", "--json").json()["data"]["labs"]}["adder"]
    assert listed["state"] == "passed-on-cpu" and listed["state_text"] == text and listed["gpu_parts_open"] == ["gpu"]
    assert text in run_cli("lab", "list").stdout
    status = run_cli("lab", "status", "--json").json()["data"]["labs"][0]
    assert status["state"] == "passed-on-cpu"
    assert text in run_cli("lab", "status").stdout
    dashboard = run_cli("status")
    assert text in dashboard.stdout
    assert "adder" in dashboard.stdout and " passed best" not in dashboard.stdout
    from roadmap_cli import context
    from roadmap_cli.tracker.progress import completed

    done = completed(context.current().store())
    assert "fake-add" in done and "fake-gpu" not in done  # proved only by the GPU part: stays open
