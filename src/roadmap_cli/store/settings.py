"""Learner settings (start date, curriculum path, language, weekly hours),
stored as JSON values in the `settings` table."""

from __future__ import annotations

import json
from typing import Any

KNOWN_SETTINGS = ("start_date", "curriculum", "lang", "weekly_hours")


def get_setting(store, key: str, default: Any = None) -> Any:
    from roadmap_cli.store.tables import Setting

    with store.session() as session:
        row = session.get(Setting, key)
        return json.loads(row.value) if row is not None else default


def all_settings(store) -> dict[str, Any]:
    from sqlmodel import select

    from roadmap_cli.store.tables import Setting

    with store.session() as session:
        return {row.key: json.loads(row.value) for row in session.exec(select(Setting))}


def set_setting(store, key: str, value: Any) -> None:
    from roadmap_cli.store.tables import Setting

    with store.session() as session:
        row = session.get(Setting, key)
        if row is None:
            session.add(Setting(key=key, value=json.dumps(value)))
        else:
            row.value = json.dumps(value)
