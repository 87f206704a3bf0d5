"""The quiz and review tables (migration 6), read and written with plain SQL.

Plain SQL, not the SQLModel classes: `roadmap status` counts due reviews
on its start-up path, where defining the table classes costs more than the
query (store/settings.py explains). Every row carries the learner it
belongs to.

Timestamps are ISO 8601 in UTC with whole seconds ("2026-12-03T12:00:00+00:00"),
so `due <= :until` compares correctly as text on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Iterable, Optional


def current_learner(store) -> str:
    """The learner whose rows are read and written (store/learners.py decides:
    $ROADMAP_LEARNER, `init --learner`, git user.email, `local`)."""
    return store.learner


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).replace(microsecond=0).isoformat()


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def record_attempt(conn, learner: str, checkpoint_id: str, taken_at: str, verdicts: list) -> dict:
    """Store one checkpoint's quiz attempt; returns its row."""
    import sqlalchemy as sa

    correct = sum(1 for v in verdicts if v.correct)
    total = len(verdicts)
    from roadmap_cli.curriculum.quiz_models import PASS_FRACTION

    answers = [
        {"question": v.question_id, "kind": v.kind, "answer": v.answer, "correct": v.correct, "rating": v.rating}
        for v in verdicts
    ]
    row = {
        "learner": learner,
        "checkpoint_id": checkpoint_id,
        "taken_at": taken_at,
        "correct": correct,
        "total": total,
        "passed": total > 0 and correct >= PASS_FRACTION * total,
        "answers": json.dumps(answers, ensure_ascii=False),
    }
    conn.execute(
        sa.text(
            "INSERT INTO quiz_attempts (learner, checkpoint_id, taken_at, correct, total, passed, answers) "
            "VALUES (:learner, :checkpoint_id, :taken_at, :correct, :total, :passed, :answers)"
        ),
        row,
    )
    return row


def best_scores(store, learner: str, checkpoint_ids: Iterable[str]) -> dict[str, dict]:
    """checkpoint id -> its best attempt {correct, total, passed, taken_at}
    (highest fraction right, then the latest)."""
    import sqlalchemy as sa

    ids = list(checkpoint_ids)
    if not ids:
        return {}
    best: dict[str, dict] = {}
    with store.connection() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT checkpoint_id, correct, total, passed, taken_at FROM quiz_attempts "
                "WHERE learner = :learner AND checkpoint_id IN :ids ORDER BY taken_at, id"
            ).bindparams(sa.bindparam("ids", expanding=True)),
            {"learner": learner, "ids": ids},
        ).all()
    for cid, correct, total, passed, taken_at in rows:
        score = correct / total if total else 0.0
        kept = best.get(cid)
        if kept is None or score >= kept["correct"] / max(kept["total"], 1):
            best[cid] = {"correct": correct, "total": total, "passed": bool(passed), "taken_at": taken_at}
    return best


def load_card(conn, learner: str, item: str) -> Optional[tuple[str, int]]:
    """(card JSON, reviews so far) or None for an item never reviewed."""
    import sqlalchemy as sa

    row = conn.execute(
        sa.text("SELECT card, reviews FROM review_cards WHERE learner = :learner AND item = :item"),
        {"learner": learner, "item": item},
    ).first()
    return (row[0], row[1]) if row else None


def save_review(
    conn, learner: str, item: str, card_json: str, due: str, reviews: int, rating: int, reviewed_at: str, source: str
) -> None:
    """Upsert the item's card and append the rating to the log (one transaction: the caller's)."""
    import sqlalchemy as sa

    params = {
        "learner": learner,
        "item": item,
        "card": card_json,
        "due": due,
        "reviews": reviews,
        "updated_at": reviewed_at,
    }
    updated = conn.execute(
        sa.text(
            "UPDATE review_cards SET card = :card, due = :due, reviews = :reviews, updated_at = :updated_at "
            "WHERE learner = :learner AND item = :item"
        ),
        params,
    ).rowcount
    if not updated:
        conn.execute(
            sa.text(
                "INSERT INTO review_cards (learner, item, card, due, reviews, updated_at) "
                "VALUES (:learner, :item, :card, :due, :reviews, :updated_at)"
            ),
            params,
        )
    conn.execute(
        sa.text(
            "INSERT INTO review_logs (learner, item, rating, reviewed_at, source, due_after) "
            "VALUES (:learner, :item, :rating, :reviewed_at, :source, :due)"
        ),
        {"learner": learner, "item": item, "rating": rating, "reviewed_at": reviewed_at, "source": source, "due": due},
    )


def cards_due(store, learner: str, until: str) -> list[tuple[str, str]]:
    """(item, due) of every card due at or before `until`, earliest first."""
    import sqlalchemy as sa

    with store.connection() as conn:
        rows = conn.execute(
            sa.text("SELECT item, due FROM review_cards WHERE learner = :learner AND due <= :until ORDER BY due, item"),
            {"learner": learner, "until": until},
        ).all()
    return [(item, due) for item, due in rows]


def items_with_cards(store, learner: str) -> set[str]:
    import sqlalchemy as sa

    with store.connection() as conn:
        rows = conn.execute(sa.text("SELECT item FROM review_cards WHERE learner = :learner"), {"learner": learner})
        return {row[0] for row in rows}


def history(store, learner: str, item: Optional[str] = None) -> list[dict]:
    """The review log, oldest first (optionally of one item)."""
    import sqlalchemy as sa

    sql = "SELECT item, rating, reviewed_at, source, due_after FROM review_logs WHERE learner = :learner"
    params = {"learner": learner}
    if item is not None:
        sql += " AND item = :item"
        params["item"] = item
    with store.connection() as conn:
        rows = conn.execute(sa.text(sql + " ORDER BY reviewed_at, id"), params).all()
    return [{"item": r[0], "rating": r[1], "reviewed_at": r[2], "source": r[3], "due_after": r[4]} for r in rows]


# ---------------------------------------------------------------- import rules (portable/rowcheck.py)

from roadmap_cli.store.values import REVIEW_ITEM_KINDS as ITEM_KINDS, REVIEW_RATINGS, REVIEW_SOURCES as SOURCES


def _iso_problem(value) -> Optional[str]:
    try:
        stamp = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return f"{value!r} is not an ISO timestamp"
    return None if stamp.tzinfo is not None else f"{value!r} has no time zone (write +00:00)"


def row_problems(table: str, row: dict):
    """(column, problem) for a quiz/review row of a `roadmap import` file
    (column types are checked before; these are the readers' assumptions)."""
    get = row.get
    if table == "quiz_attempts":
        if not 0 <= get("correct", 0) <= get("total", 0):
            yield "correct", f"correct {get('correct')} is not within 0..total {get('total')}"
        try:
            answers = json.loads(get("answers"))
        except (TypeError, ValueError, RecursionError):
            answers = None
        if not isinstance(answers, list) or not all(isinstance(a, dict) and "question" in a for a in answers):
            yield "answers", "answers is not a JSON list of {question, kind, answer, correct, rating}"
        return
    item = get("item") or ""
    if item.partition(":")[0] not in ITEM_KINDS or not item.partition(":")[2]:
        yield "item", f"item {item!r} is not checkpoint:<id> or question:<id>"
    if table == "review_logs":
        if get("rating") not in REVIEW_RATINGS:
            yield "rating", f"rating {get('rating')!r} is not 1-4 (again, hard, good, easy)"
        if get("source") not in SOURCES:
            yield "source", f"source {get('source')!r} is not one of {', '.join(SOURCES)}"
        if _iso_problem(get("due_after")):
            yield "due_after", _iso_problem(get("due_after"))
        return
    if _iso_problem(get("due")):
        yield "due", _iso_problem(get("due"))
    if get("reviews") is not None and get("reviews") < 0:
        yield "reviews", f"reviews {get('reviews')} is negative"
    try:
        from fsrs import Card

        card = Card.from_dict(json.loads(get("card")))
    except Exception:  # noqa: BLE001 - any failure means the reader would fail too
        yield "card", "card is not an FSRS card (fsrs.Card.to_dict() as JSON)"
        return
    if records_due(card) != get("due"):
        yield "due", f"due {get('due')} differs from the card's own due {records_due(card)}"


def records_due(card) -> str:
    return iso(card.due)
