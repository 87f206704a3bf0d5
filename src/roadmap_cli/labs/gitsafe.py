"""Git in a learner's workspace, running nothing the workspace configures.

A workspace's `.git/config`, `.git/hooks`, `.git/info/attributes` and
`.gitattributes` are the learner's to write (outside the OS wall the learner
IS the user; behind it, in a weak grade, learner code writes them too). git
runs programs they name: `core.fsmonitor`, hooks, clean/smudge/process
filters, diff textconv/external commands, merge drivers, `include.path`d
files with any of those. Every git command roadmap runs in a workspace goes
through here (docs/architecture.md, "Trust model"):

- no system or global config (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null,
  GIT_ATTR_NOSYSTEM), no prompt, none of the user's GIT_* variables;
- command-line config, which outranks the repository's own: fsmonitor off,
  hooks in /dev/null, no signing program, no pager, editor, askpass or
  credential helper, no submodule recursion;
- every filter, diff and merge driver the repository's config (includes
  followed) defines is overridden with an empty command: `git config --list`
  only reads files, it runs nothing.

GitPython's own index writes run no hooks either (`skip_hooks=True` at every
commit, labs/workspace.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Optional

NEUTRAL = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "core.attributesFile=/dev/null",
    "credential.helper=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gpg.program=false",
    "diff.external=",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    "diff.ignoreSubmodules=all",
    "protocol.allow=never",
    "gc.auto=0",
    "maintenance.auto=false",
)
# Config keys that name a program, per driver name the repository chose.
_DRIVER_KEY = re.compile(r"^(filter\.(.+)\.(clean|smudge|process)|diff\.(.+)\.(textconv|command)|merge\.(.+)\.driver)$")


def env(base: Optional[dict] = None) -> dict:
    """The environment for git in a workspace: the caller's, less GIT_*, with no system or global config."""
    out = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("GIT_")}
    out.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="false",
        SSH_ASKPASS="false",
        GIT_EDITOR="false",
        GIT_PAGER="cat",
    )
    return out


def drivers(cwd: Path, environ: Optional[dict] = None) -> list[str]:
    """`key=` for every program-naming driver key in the repository's config (includes followed)."""
    try:
        proc = subprocess.run(
            ["git", "config", "--list", "--includes", "--name-only"],
            cwd=cwd,
            env=env(environ),
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    keys = sorted({line.strip() for line in proc.stdout.splitlines() if _DRIVER_KEY.match(line.strip())})
    out = [f"{key}=" for key in keys]
    out += sorted(
        {f"filter.{m.group(2)}.required=false" for key in keys if (m := _DRIVER_KEY.match(key)) and m.group(2)}
    )
    return out


def config(cwd: Path, environ: Optional[dict] = None) -> list[str]:
    """The `-c KEY=VALUE` pairs every git command in the workspace at `cwd` gets (flattened argv)."""
    args: list[str] = []
    for item in (*NEUTRAL, *drivers(cwd, environ)):
        args += ["-c", item]
    return args


def command(cwd: Path, *args: str, environ: Optional[dict] = None) -> list[str]:
    """argv for `git ARGS` in the workspace at `cwd`, disarmed."""
    return ["git", *config(cwd, environ), *args]


def harden(repo):
    """A GitPython Repo whose git commands run disarmed (the same config and environment)."""
    root = Path(repo.working_tree_dir or repo.git_dir)
    repo.git.update_environment(**{k: v for k, v in env().items() if k.startswith(("GIT_", "SSH_"))})
    repo.git.set_persistent_git_options(c=[*NEUTRAL, *drivers(root)])
    return repo
