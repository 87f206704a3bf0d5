"""One list of a workspace's files (grading/snapshot.workspace_files) for `submit` and `grade --on`, the cap a
parameter (issue 39 item 1)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from roadmap_cli.errors import UserError
from roadmap_cli.grading.remote import near
from roadmap_cli.grading.snapshot import workspace_files

MB = 2**20


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Not a git repository: every regular file but .git, never a link."""
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "big.bin").write_bytes(b"\0" * (2 * MB))
    (root / ".git" / "config").write_text("[core]\n")
    (root / "link.py").symlink_to(root / "a.py")
    return root


def test_the_list_is_the_regular_files_with_sizes(folder: Path):
    assert workspace_files(folder, max_bytes=20 * MB, carried_by="x") == [("a.py", 6), ("sub/big.bin", 2 * MB)]


def test_over_the_cap_is_one_line_naming_the_biggest(folder: Path):
    with pytest.raises(UserError) as caught:
        workspace_files(folder, max_bytes=1 * MB, carried_by="grade --on sends")
    message = str(caught.value)
    assert "over the 1 MB grade --on sends" in message and "sub/big.bin (2.0 MB)" in message and "\n" not in message


def test_grade_on_hashes_that_list_under_its_own_cap(folder: Path, monkeypatch: pytest.MonkeyPatch):
    assert near.workspace_hashes(folder) == {
        "a.py": hashlib.sha256(b"x = 1\n").hexdigest(),
        "sub/big.bin": hashlib.sha256(b"\0" * (2 * MB)).hexdigest(),
    }
    monkeypatch.setattr(near, "MAX_UPLOAD_BYTES", 1 * MB)
    with pytest.raises(UserError, match="grade --on sends"):
        near.workspace_hashes(folder)
