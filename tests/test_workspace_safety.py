"""Workspaces never write outside themselves (issue 19 items 2 and 3).

`lab reset` and `lab start --force` used to write the starter through an
ignored symlink (destroying the file it pointed to), and `lab start --dir`
aimed at the data home, `~`, `/` or a dotfiles repository moved or emptied it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.fixture(autouse=True)
def fake_labs(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    return FIXTURES / "labs"


def one_line_error(result) -> bool:
    return result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file (not under .git) with its bytes; links as their target."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel.startswith(".git/") or rel == ".git":
            continue
        if path.is_symlink():
            out[rel] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def git(cwd: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="me",
        GIT_AUTHOR_EMAIL="me@example.org",
        GIT_COMMITTER_NAME="me",
        GIT_COMMITTER_EMAIL="me@example.org",
    )
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def linked_workspace(run_cli, tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A workspace whose adder.py is an ignored, untracked link to ../victim.txt."""
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious notes\n")
    git(ws, "rm", "-q", "adder.py")
    with open(ws / ".git" / "info" / "exclude", "a") as fh:
        fh.write("adder.py\n")
    git(ws, "commit", "-qm", "my own layout")
    (ws / "adder.py").symlink_to("../victim.txt")
    monkeypatch.chdir(ws)
    return ws, victim


def test_reset_never_writes_through_an_ignored_symlink(run_cli, linked_workspace):
    ws, victim = linked_workspace
    before = snapshot(ws)
    result = run_cli("lab", "reset")
    assert result.exit_code == 2 and one_line_error(result), result
    assert "symbolic link" in result.stderr and "adder.py" in result.stderr
    assert victim.read_text() == "precious notes\n"
    assert snapshot(ws) == before  # the learner's files are as they were


def test_force_start_never_writes_through_an_ignored_symlink(run_cli, linked_workspace):
    ws, victim = linked_workspace
    result = run_cli("lab", "start", "adder", "--dir", str(ws), "--force")
    assert result.exit_code == 2 and one_line_error(result) and "symbolic link" in result.stderr, result
    assert victim.read_text() == "precious notes\n"
    assert (ws / "adder.py").is_symlink()


def test_tracked_symlink_is_replaced_not_followed(run_cli, tmp_path: Path, monkeypatch):
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious notes\n")
    (ws / "adder.py").unlink()
    (ws / "adder.py").symlink_to("../victim.txt")  # not ignored: `reset` saves it in a commit first
    monkeypatch.chdir(ws)
    result = run_cli("lab", "reset")
    assert result.exit_code == 0, result
    assert victim.read_text() == "precious notes\n"
    assert not (ws / "adder.py").is_symlink() and "NotImplementedError" in (ws / "adder.py").read_text()


@pytest.mark.parametrize("which", ["data home", "parent of the data home", "home directory", "root"])
def test_start_dir_refuses_places_it_must_not_empty(run_cli, roadmap_home: Path, tmp_path: Path, monkeypatch, which):
    fake_home = tmp_path / "fake-user-home"
    (fake_home / ".config").mkdir(parents=True)
    (fake_home / ".bashrc").write_text("export PS1=me\n")
    monkeypatch.setenv("HOME", str(fake_home))
    assert run_cli("log", "hours", "1").exit_code == 0  # a live database in the data home
    target = {
        "data home": roadmap_home,
        "parent of the data home": roadmap_home.parent,
        "home directory": fake_home,
        "root": Path("/"),
    }[which]
    before = snapshot(fake_home) if which == "home directory" else None
    result = run_cli("lab", "start", "adder", "--dir", str(target), "--force")
    assert result.exit_code == 2 and one_line_error(result), result
    assert (roadmap_home / "roadmap.db").is_file()
    assert run_cli("log", "list", "--json").json()["data"]["total"] == 1  # the data is still there
    if before is not None:
        assert snapshot(fake_home) == before
    assert not list(target.parent.glob(f"{target.name}.old-*")) if target != Path("/") else True


def test_start_dir_refuses_a_git_repository_roadmap_did_not_create(run_cli, tmp_path: Path):
    dotfiles = tmp_path / "dotfiles"
    (dotfiles / "nvim").mkdir(parents=True)
    (dotfiles / ".bashrc").write_text("alias ll='ls -l'\n")
    (dotfiles / "nvim" / "init.lua").write_text("vim.o.number = true\n")
    git(dotfiles, "init", "-q")
    git(dotfiles, "add", "-A")
    git(dotfiles, "commit", "-qm", "dotfiles")
    before = snapshot(dotfiles)
    for target in (dotfiles, dotfiles / "nvim"):
        result = run_cli("lab", "start", "adder", "--dir", str(target), "--force")
        assert result.exit_code == 2 and one_line_error(result) and "did not create" in result.stderr, result
    assert snapshot(dotfiles) == before
    assert git(dotfiles, "status", "--porcelain") == ""


def test_a_roadmap_workspace_can_still_be_restarted_with_force(run_cli, tmp_path: Path):
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    (ws / "adder.py").write_text("def add(a, b):\n    return 0  # attempt\n")
    result = run_cli("lab", "start", "adder", "--dir", str(ws), "--force")
    assert result.exit_code == 0, result
    assert "NotImplementedError" in (ws / "adder.py").read_text()


@pytest.mark.parametrize("odd", ["a?mode=rw", "b#frag", "c%20d"])
def test_workspaces_are_found_under_a_home_whose_name_looks_like_a_uri(run_cli, tmp_path: Path, monkeypatch, odd):
    # The fast pre-grade lookup opens SQLite through a file: URI; an unquoted "?", "#" or "%" in
    # the home folder's name used to cut the path short, and the lookup silently found nothing.
    from roadmap_cli import context
    from roadmap_cli.labs.service import workspaces_fast

    home = tmp_path / odd / "home"
    monkeypatch.setenv("ROADMAP_HOME", str(home))
    context.reset()
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    rows = workspaces_fast(home)
    assert rows == [("adder", ws.resolve())] or rows == [("adder", ws)], rows
