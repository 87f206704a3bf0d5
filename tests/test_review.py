"""Spaced review: FSRS due dates as the library computes them, lapses,
what is due, and the review history through export/import."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from roadmap_cli.curriculum import load_curriculum
from roadmap_cli.paths import default_curriculum_path
from roadmap_cli.quiz import records, review
from roadmap_cli.store import open_store

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
ITEM = "question:s5-vllm-kv-bytes-per-token"


@pytest.fixture
def store(roadmap_home: Path):
    roadmap_home.mkdir(parents=True, exist_ok=True)
    return open_store(roadmap_home)


@pytest.fixture(scope="module")
def cur():
    return load_curriculum(default_curriculum_path())


def _rate(store, rating: int, when: datetime, item: str = ITEM) -> str:
    with store.connection() as conn:
        return review.apply_rating(conn, store.learner, item, rating, when, "review")


def test_due_dates_advance_as_fsrs_computes_them(store):
    from fsrs import Card, Rating, Scheduler

    twin = Scheduler(**review.SCHEDULER_OPTIONS)  # the library, driven directly
    card = Card(due=T0)
    when, intervals = T0, []
    for rating in (3, 3, 3, 4):
        due = _rate(store, rating, when)
        card, _ = twin.review_card(card, Rating(rating), review_datetime=when)
        assert due == records.iso(card.due)
        intervals.append(card.due - when)
        when = card.due  # review exactly when due
    assert intervals == sorted(intervals) and intervals[-1] > timedelta(days=30), intervals
    log = records.history(store, store.learner, ITEM)
    assert [r["rating"] for r in log] == [3, 3, 3, 4]
    assert [r["due_after"] for r in log][-1] == records.iso(card.due)


def test_a_lapse_brings_the_item_back_within_days(store, cur):
    when = T0
    for _ in range(3):
        when = records.parse_iso(_rate(store, 3, when))
    next_due = records.parse_iso(_rate(store, 3, when))
    long_interval = next_due - when
    assert long_interval > timedelta(days=30)
    soon = next_due + timedelta(days=7)
    assert [i.item for i in review.due_items(store, cur, store.learner, soon)] == [ITEM]
    # forgotten when it came due: FSRS keeps a little stability, so it is back within a week
    after_lapse = records.parse_iso(_rate(store, 1, next_due))
    assert after_lapse - next_due <= timedelta(days=7) and after_lapse - next_due < long_interval / 5
    assert [i.item for i in review.due_items(store, cur, store.learner, after_lapse)] == [ITEM]
    assert records.history(store, store.learner, ITEM)[-1]["rating"] == 1
    new_card_again = records.parse_iso(_rate(store, 1, T0, "question:s1-qkv-scale-factor")) - T0
    assert new_card_again == timedelta(days=1)  # a first Again: tomorrow (no same-day learning steps)


def test_due_items_new_checkpoints_and_cards_by_end_of_day(store, cur):
    from roadmap_cli.tracker.progress import check

    check(store, cur, "s1-draw-transformer-block")
    _rate(store, 3, T0)  # due in ~2 days
    items = review.due_items(store, cur, store.learner, T0)
    assert [i.item for i in items] == ["checkpoint:s1-draw-transformer-block"] and items[0].due is None
    later = T0 + timedelta(days=5)
    assert [i.item for i in review.due_items(store, cur, store.learner, later)] == [
        ITEM,
        "checkpoint:s1-draw-transformer-block",
    ]
    assert review.due_summary(store, cur, {"s1-draw-transformer-block": "x"}, later) == {"due": 1, "new": 1}
    _rate(store, 3, later, "checkpoint:s1-draw-transformer-block")
    assert [i.item for i in review.due_items(store, cur, store.learner, later)] == [ITEM]


def test_an_item_the_curriculum_lost_is_skipped(store, cur):
    _rate(store, 3, T0, "question:no-such-question")
    assert review.due_items(store, cur, store.learner, T0 + timedelta(days=30)) == []


def test_review_history_survives_export_and_import(run_cli, store, tmp_path: Path):
    _rate(store, 3, T0)
    _rate(store, 1, T0 + timedelta(days=2))
    out = tmp_path / "export.json"
    assert run_cli("export", "-o", str(out)).exit_code == 0
    data = json.loads(out.read_text())
    assert len(data["tables"]["review_logs"]) == 2 and len(data["tables"]["review_cards"]) == 1
    other = tmp_path / "other-home"
    result = run_cli("--home", str(other), "import", str(out))
    assert result.exit_code == 0, result
    again = tmp_path / "again.json"
    assert run_cli("--home", str(other), "export", "-o", str(again)).exit_code == 0
    assert json.loads(again.read_text())["tables"]["review_cards"] == data["tables"]["review_cards"]
    assert json.loads(again.read_text())["tables"]["review_logs"] == data["tables"]["review_logs"]


@pytest.mark.parametrize(
    "table,column,value,message",
    [
        ("review_logs", "rating", 7, "rating 7 is not 1-4"),
        ("review_logs", "item", "lab:x", "is not checkpoint:<id> or question:<id>"),
        ("review_cards", "card", "{}", "card is not an FSRS card"),
        ("review_cards", "due", "2026-01-01T00:00:00+00:00", "differs from the card's own due"),
    ],
)
def test_import_refuses_bad_review_rows(run_cli, store, tmp_path: Path, table, column, value, message):
    _rate(store, 3, T0)
    out = tmp_path / "export.json"
    assert run_cli("export", "-o", str(out)).exit_code == 0
    data = json.loads(out.read_text())
    data["tables"][table][0][column] = value
    out.write_text(json.dumps(data))
    result = run_cli("--home", str(tmp_path / "fresh"), "import", str(out))
    assert result.exit_code != 0 and message in result.stderr, result
    assert f"$.tables.{table}[0].{column}" in result.stderr
