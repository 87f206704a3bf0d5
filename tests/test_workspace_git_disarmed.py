"""Git in a workspace runs nothing the workspace configures (issue 35 item 3,
labs/gitsafe.py): a learner's code (or the learner, outside the wall) can
write `.git/config`, `.git/hooks`, `.git/info/attributes` and
`.gitattributes`; roadmap's own git commands (start, reset, the handout
commit, the grade's `git status`, the snapshot's `ls-files`) must never run
a program they name."""

from __future__ import annotations

import stat
from pathlib import Path


RIGHT_ADD = "def add(a, b):\n    return a + b\n"


def _plant(ws: Path, proof: Path) -> list[Path]:
    """Every execution route git offers a repository's owner; each would create a file next to `proof`."""
    marks = [
        proof.with_name(f"ran-{what}") for what in ("fsmonitor", "hook", "filter", "include", "textconv", "process")
    ]
    included = ws / ".git" / "more.config"
    included.write_text(f"[filter \"inc\"]\n\tclean = sh -c 'touch {marks[3]}; cat'\n")
    with open(ws / ".git" / "config", "a") as fh:
        fh.write(
            f"[core]\n\tfsmonitor = sh -c 'touch {marks[0]}'\n"
            f"[filter \"evil\"]\n\tclean = sh -c 'touch {marks[2]}; cat'\n\tsmudge = sh -c 'touch {marks[2]}; cat'\n"
            f"[filter \"proc\"]\n\tprocess = sh -c 'touch {marks[5]}'\n\trequired = true\n"
            f"[diff \"evil\"]\n\ttextconv = sh -c 'touch {marks[4]}; cat'\n"
            f"[include]\n\tpath = {included}\n"
        )
    for hook in ("pre-commit", "post-commit", "commit-msg", "post-checkout", "pre-auto-gc", "post-index-change"):
        path = ws / ".git" / "hooks" / hook
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"#!/bin/sh\ntouch {marks[1]}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    (ws / ".git" / "info").mkdir(exist_ok=True)
    (ws / ".git" / "info" / "attributes").write_text("*.py filter=evil diff=evil\n*.md filter=inc\n")
    (ws / ".gitattributes").write_text("*.txt filter=proc\n")
    (ws / "notes.txt").write_text("hello\n")
    return marks


def test_a_planted_fsmonitor_hook_filter_or_include_never_runs(run_cli, tmp_path: Path, monkeypatch) -> None:
    from roadmap_cli.labs import gitsafe
    from roadmap_cli.labs.workspace import head_info

    monkeypatch.setenv("ROADMAP_LABS_DIR", str(Path(__file__).parent / "fixtures_labs" / "labs"))
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    marks = _plant(ws, tmp_path / "proof")
    (ws / "adder.py").write_text(RIGHT_ADD)
    (ws / "README.md").write_text("changed\n")
    # The grade's git status (and its fallback), a reset (which commits first), the snapshot's file list.
    sha, dirty = head_info(ws)
    assert sha and dirty is True
    monkeypatch.chdir(ws)
    reset = run_cli("lab", "reset", "adder")
    assert reset.exit_code == 0, reset.stderr
    from roadmap_cli.grading import snapshot

    assert "adder.py" in snapshot._git_files(ws)
    import subprocess

    subprocess.run(gitsafe.command(ws, "add", "-A"), cwd=ws, env=gitsafe.env(), check=True, capture_output=True)
    subprocess.run(gitsafe.command(ws, "diff", "--cached", "-p"), cwd=ws, env=gitsafe.env(), capture_output=True)
    ran = [m.name for m in marks if m.exists()]
    assert ran == [], ran
    # The same repository, with git's defaults, does run them: the test could fail.
    subprocess.run(
        ["git", "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qam", "x"], cwd=ws, capture_output=True
    )
    (ws / "adder.py").write_text(RIGHT_ADD + "# again\n")
    subprocess.run(["git", "add", "-A"], cwd=ws, capture_output=True)
    subprocess.run(["git", "status"], cwd=ws, capture_output=True)
    assert any(m.exists() for m in marks)
