"""archive.OwnRows.replace_or_refuse: the one count / refuse / back up / delete that `import --replace` and
`db copy --to --replace` share (they each had a copy of it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_refuses_without_replace_and_backs_up_then_deletes_with_it(run_cli, roadmap_home: Path):
    from roadmap_cli.errors import UserError
    from roadmap_cli.store import open_store
    from roadmap_cli.portable.archive import OwnRows

    assert run_cli("check", "s1-draw-transformer-block").exit_code == 0
    assert run_cli("log", "hours", "2").exit_code == 0
    store = open_store(roadmap_home)
    me = store.learner
    with store.engine.begin() as conn:
        own = OwnRows(conn, me)
        with pytest.raises(UserError, match="you have 2 rows, ours"):
            own.replace_or_refuse(roadmap_home, replace=False, refusal=lambda n: f"you have {n} rows, ours")
        assert own.count() == 2  # nothing changed
    assert not list(roadmap_home.glob("backups/*")) and not list(roadmap_home.glob("*backup*"))
    with store.engine.begin() as conn:
        assert OwnRows(conn, me).replace_or_refuse(roadmap_home, replace=True, refusal=str) == 2
        assert OwnRows(conn, me).count() == 0
    backups = [p for p in roadmap_home.rglob("*.json") if "backup" in str(p)]
    assert len(backups) == 1
    saved = json.loads(backups[0].read_text())["tables"]
    assert [r["checkpoint_id"] for r in saved["checkpoint_progress"]] == ["s1-draw-transformer-block"]
    with store.engine.begin() as conn:  # nothing of mine left: nothing to refuse, nothing backed up
        assert OwnRows(conn, me).replace_or_refuse(roadmap_home, replace=False, refusal=str) == 0
    store.engine.dispose()
