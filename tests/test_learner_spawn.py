"""grading_kit.learner_spawn: a learner program started from the learner
process (a lab's server) runs under the same audit hook."""

from __future__ import annotations

import subprocess
from pathlib import Path

from roadmap_cli.grading_kit import _learner_main
from roadmap_cli.grading_kit.learner_spawn import learner_python

SCRIPT = """
import sys
import helper                       # a sibling module: the workspace is on sys.path
try:
    open(sys.argv[1]).read()
    print("read", helper.VALUE)
except PermissionError as exc:
    print("refused", helper.VALUE, exc)
"""


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws, secret = tmp_path / "ws", tmp_path / "solution"
    ws.mkdir()
    secret.mkdir()
    (secret / "answer.py").write_text("ANSWER = 42\n")
    (ws / "helper.py").write_text("VALUE = 7\n")
    (ws / "prog.py").write_text(SCRIPT)
    return ws, secret


def test_child_refuses_the_solution_like_the_learner_process(tmp_path, monkeypatch):
    ws, secret = _workspace(tmp_path)
    monkeypatch.setattr(_learner_main, "_config", {"forbidden_read": [str(secret)], "forbidden_write": []})
    argv = learner_python(str(ws / "prog.py"), str(secret / "answer.py"))
    out = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused 7"), out.stdout


def test_the_command_line_does_not_name_the_forbidden_folders(tmp_path, monkeypatch):
    # The learner process's hook refuses (and voids) any command line naming a solution folder.
    monkeypatch.setattr(
        _learner_main,
        "_config",
        {"forbidden_read": [str(tmp_path / "solution")], "forbidden_write": [str(tmp_path / "tests")]},
    )
    argv = learner_python(str(tmp_path / "prog.py"))
    assert not any(str(tmp_path / "solution") in a or str(tmp_path / "tests") in a for a in argv)


def test_without_a_sandbox_the_child_just_runs(tmp_path, monkeypatch):
    ws, secret = _workspace(tmp_path)
    monkeypatch.setattr(_learner_main, "_config", {})
    argv = learner_python(str(ws / "prog.py"), str(secret / "answer.py"))
    out = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("read 7"), out.stdout
