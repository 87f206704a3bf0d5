"""workspace.head_info: (HEAD sha, dirty) from one `git status`, as GitPython said it."""

from __future__ import annotations

import subprocess

import pytest

from roadmap_cli.labs.workspace import head_info


def git(path, *args):
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "HOME": str(path),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    return ws


def test_no_repository_is_unknown(tmp_path):
    assert head_info(tmp_path) == (None, None)


def test_a_repository_above_the_workspace_is_not_the_workspaces(repo):
    (repo / "sub").mkdir()
    assert head_info(repo / "sub") == (None, None)


def test_no_commit_yet(repo):
    assert head_info(repo) == (None, False)
    (repo / "a.py").write_text("x = 1\n")
    assert head_info(repo) == (None, True)


def test_clean_staged_modified_and_untracked(repo):
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "one")
    sha = git(repo, "rev-parse", "HEAD")
    assert head_info(repo) == (sha, False)
    (repo / "a.py").write_text("x = 2\n")
    assert head_info(repo) == (sha, True)  # unstaged change
    git(repo, "add", "a.py")
    assert head_info(repo) == (sha, True)  # staged change
    git(repo, "commit", "-q", "-m", "two")
    sha2 = git(repo, "rev-parse", "HEAD")
    assert sha2 != sha and head_info(repo) == (sha2, False)
    (repo / "new.txt").write_text("?")
    assert head_info(repo) == (sha2, True)  # untracked file
    (repo / ".gitignore").write_text("new.txt\n.gitignore\n")
    assert head_info(repo) == (sha2, False)  # ignored files do not count


def test_the_users_git_dir_is_ignored(repo, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    assert head_info(repo) == (None, False)
