"""Learner settings (start date, curriculum path, language, weekly hours),
stored as JSON values in the `settings` table, one set per learner (the
current one: store/learners.py)."""

from __future__ import annotations

import json
from typing import Any

KNOWN_SETTINGS = ("start_date", "curriculum", "lang", "weekly_hours")


# Reads use plain SQL on purpose (store/sql.py): they sit on `roadmap status`'s
# start-up path, and defining the SQLModel table classes costs more than the
# query; `roadmap grade` reads the language through store/lite.py.


def get_setting(store, key: str, default: Any = None) -> Any:
    value = store.read_sql(
        lambda sql: sql.scalar(
            "SELECT value FROM settings WHERE key = :key AND learner = :learner", key=key, learner=store.learner
        )
    )
    return json.loads(value) if value is not None else default


def all_settings(store) -> dict[str, Any]:
    rows = store.read_sql(
        lambda sql: sql.rows(
            "SELECT key, value FROM settings WHERE learner = :learner ORDER BY key", learner=store.learner
        )
    )
    return {key: json.loads(value) for key, value in rows}


def set_setting(store, key: str, value: Any) -> None:
    from roadmap_cli.store.tables import Setting

    with store.session() as session:
        row = session.get(Setting, (key, store.learner))
        if row is None:
            session.add(Setting(key=key, value=json.dumps(value), learner=store.learner))
        else:
            row.value = json.dumps(value)


def delete_setting(store, key: str) -> None:
    """Forget a setting (its default applies again)."""
    from roadmap_cli.store.tables import Setting

    with store.session() as session:
        row = session.get(Setting, (key, store.learner))
        if row is not None:
            session.delete(row)
