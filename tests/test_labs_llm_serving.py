"""Checks of the llm-serving lab beyond `roadmap dev check llm-serving`:

- the starter keeps the solution's public API; every README section a
  NotImplementedError or a grader message cites exists;
- every wrong/ patch applies to the solution view;
- (slow) a full grade of the reference leaves no process and no listening
  port behind: the grader kills the learner's
  server's process group after each part.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roadmap_cli.labs.starter_build import solution_text

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "llm-serving"
SOURCES = sorted((LAB / "solution").glob("*.py"))


def public_api(text: str) -> dict[str, str]:
    api = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            api[node.name] = ast.unparse(node.args)
        elif isinstance(node, ast.ClassDef):
            api[node.name] = "class"
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and (not item.name.startswith("_") or item.name == "__init__"):
                    api[f"{node.name}.{item.name}"] = ast.unparse(item.args)
    return api


@pytest.mark.parametrize("source", SOURCES, ids=[p.name for p in SOURCES])
def test_starter_keeps_the_solution_api(source: Path):
    starter = LAB / "starter" / source.name
    assert public_api(starter.read_text()) == public_api(solution_text(source.read_text(), source.name))


def test_cited_readme_sections_exist():
    headings = set(re.findall(r"^#{2,3} (.+)$", (LAB / "README.md").read_text(), flags=re.M))
    cited = set()
    for path in list((LAB / "starter").glob("*.py")) + list((LAB / "tests").glob("*.py")):
        cited |= set(re.findall(r'section \\?"([^"\\]+)\\?"', path.read_text()))
    missing = {c for c in cited if not any(h == c or h.startswith(c + ":") for h in headings)}
    assert cited and not missing, f"sections cited but missing from README.md: {sorted(missing)}"


@pytest.mark.parametrize("patch", sorted((LAB / "wrong").glob("*.patch")), ids=lambda p: p.stem)
def test_wrong_patches_apply(patch: Path, tmp_path: Path):
    for source in SOURCES:
        (tmp_path / source.name).write_text(solution_text(source.read_text(), source.name))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    proc = subprocess.run(["git", "apply", "--check", str(patch)], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _listening_sockets() -> dict[int, int]:
    """socket inode -> port of every listening TCP socket."""
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                out[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return out


def _ports_held_from(folder: Path) -> list[int]:
    """Listening ports whose owner runs in `folder` or names it on its command line
    (other jobs on the machine may open ports meanwhile: only ours count)."""
    sockets, held = _listening_sockets(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{name}/cwd")).resolve()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().decode(errors="replace")
            ours = cwd == folder.resolve() or str(folder) in cmdline
            if ours:
                for fd in os.listdir(f"/proc/{name}/fd"):
                    target = os.readlink(f"/proc/{name}/fd/{fd}")
                    if target.startswith("socket:[") and int(target[8:-1]) in sockets:
                        held.append(sockets[int(target[8:-1])])
        except OSError:
            continue
    return held


def _processes_in(folder: Path) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(os.readlink(f"/proc/{name}/cwd")).resolve() == folder.resolve():
                    out.append(int(name))
            except OSError:
                pass
    return out


@pytest.mark.e2e  # a real lab's part graded whole
@pytest.mark.slow
def test_grade_leaves_no_server_behind(tmp_path: Path):
    env = dict(os.environ, ROADMAP_HOME=str(tmp_path / "home"), ROADMAP_DEVICE="cpu", OMP_NUM_THREADS="1")
    ws = tmp_path / "ws"
    roadmap = [sys.executable, "-m", "roadmap_cli"]
    subprocess.run(
        [*roadmap, "lab", "start", "llm-serving", "--dir", str(ws)], env=env, check=True, capture_output=True
    )
    for source in SOURCES:
        (ws / source.name).write_text(solution_text(source.read_text(), source.name))
    # The server part: every test of it starts the learner's server, streams, disconnects mid-stream and
    # lets the grade end with requests in flight (load-test's server is the same code, started the same way).
    proc = subprocess.run(
        [*roadmap, "grade", "llm-serving", "--part", "server"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"grading the reference failed:\n{proc.stdout[-4000:]}"
    time.sleep(0.5)
    assert _processes_in(ws) == [], "processes left running in the workspace after the grade"
    leaked = _ports_held_from(ws)
    assert not leaked, f"ports still listening after the grade: {sorted(leaked)}"
    shutil.rmtree(ws)
