"""The folder a command runs in: the lab, grade, watch and submit commands find the workspace from it."""

from __future__ import annotations

from pathlib import Path


def current_dir() -> Path:
    """The current directory; if it was deleted under the shell (a removed
    workspace), the shell's $PWD, so the command can say which workspace is gone."""
    import os

    from roadmap_cli.errors import UserError

    try:
        return Path.cwd()
    except FileNotFoundError:
        pwd = os.environ.get("PWD")
        if pwd and os.path.isabs(pwd):
            return Path(pwd)
        raise UserError("the current directory no longer exists: cd to another one") from None
