"""Shell completion values: lab ids, part ids, checkpoint ids, stage ids.

`roadmap --install-completion` (bash, zsh, fish) installs typer's script;
each TAB then runs `roadmap` with `_ROADMAP_COMPLETE` set. That run must be
quick (< 0.5 s, bench/bench_completion.py): nothing here imports pydantic,
SQLAlchemy or torch. Lab and part ids come from the lab.yaml files (PyYAML's
C loader), checkpoint and stage ids from the curriculum file the same way;
the lab of `--part` is the command's ID argument, else the workspace the
shell is in (the stdlib sqlite3 reads the recorded workspaces).

The completers are attached by parameter name after typer builds the click
command tree (`attach`), so command modules need no change to gain them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

COMPLETE_VAR = "_ROADMAP_COMPLETE"


def _yaml(path: Path):
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError):
        return None


def _labs_root() -> Path:
    override = os.environ.get("ROADMAP_LABS_DIR")
    if override:
        return Path(override).expanduser()
    from roadmap_cli.paths import labs_root

    return labs_root()


def _lab_ids() -> list[str]:
    root = _labs_root()
    return sorted(p.name for p in root.iterdir() if (p / "lab.yaml").is_file()) if root.is_dir() else []


def _lab_of(ctx) -> Optional[str]:
    """The lab the command is about: its ID argument, else the workspace we are in."""
    lab = (ctx.params or {}).get("lab_id")
    if lab:
        return lab
    try:
        from roadmap_cli.context import current
        from roadmap_cli.labs.service import workspace_at, workspaces_fast

        rows = workspaces_fast(current().home) or []
        here = workspace_at(None, Path.cwd(), rows)
        return here[0] if here else None
    except Exception:  # noqa: BLE001 - completion never fails loudly
        return None


def _part_ids(ctx) -> list[str]:
    lab = _lab_of(ctx)
    data = _yaml(_labs_root() / lab / "lab.yaml") if lab else None
    return [str(p.get("id")) for p in (data or {}).get("parts", []) if isinstance(p, dict) and p.get("id")]


def _curriculum() -> Optional[dict]:
    path = os.environ.get("ROADMAP_CURRICULUM")
    if not path:
        from roadmap_cli.paths import default_curriculum_path

        path = default_curriculum_path()
    import re

    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    # The top-level `quizzes:` block is more than half the file and no
    # completion needs it: cut it (up to the next top-level key) before parsing.
    text = re.sub(r"(?ms)^quizzes:.*?(?=^[A-Za-z_]|\Z)", "", text)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _checkpoint_ids(ctx) -> list[str]:
    data = _curriculum() or {}
    return [
        str(cp["id"])
        for stage in data.get("stages", [])
        for cp in stage.get("checkpoints", []) or []
        if isinstance(cp, dict) and cp.get("id")
    ]


def _stage_refs(ctx) -> list[str]:
    data = _curriculum() or {}
    return [str(s["id"]) for s in data.get("stages", []) if isinstance(s, dict) and s.get("id")]


def _completer(values: Callable) -> Callable:
    def complete(ctx, param, incomplete: str):
        from typer._click.shell_completion import CompletionItem

        try:
            found = values(ctx)
        except Exception:  # noqa: BLE001 - a broken file must not break the shell
            return []
        return [CompletionItem(v) for v in found if v.startswith(incomplete)]

    return complete


# (command name or None for any, parameter name) -> values
COMPLETERS: dict[tuple[Optional[str], str], Callable] = {
    (None, "lab_id"): lambda ctx: _lab_ids(),
    (None, "part"): _part_ids,
    (None, "checkpoint_id"): _checkpoint_ids,
    ("show", "ref"): _stage_refs,  # `roadmap stage show REF`
    ("quiz", "ref"): lambda ctx: _stage_refs(ctx) + _checkpoint_ids(ctx),  # `roadmap quiz REF`
}


def attach(command) -> None:
    """Give every matching parameter of the click tree its completer."""
    for param in getattr(command, "params", []):
        values = COMPLETERS.get((command.name, param.name)) or COMPLETERS.get((None, param.name))
        if values is not None and getattr(param, "_custom_shell_complete", None) is None:
            param._custom_shell_complete = _completer(values)
    for sub in getattr(command, "commands", {}).values():
        attach(sub)
