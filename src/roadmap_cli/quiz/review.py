"""Spaced review with FSRS (the `fsrs` package, v6 API): what is due, and
what a rating does to an item's next due time.

Items are the learner's done *explain* checkpoints ("checkpoint:<id>": can
you still explain it? self-rated) and every quiz question they have
answered ("question:<id>": asked again, checked). A checkpoint done but
never reviewed is due at once (new); a question gets its first card when it
is answered in `roadmap quiz` (that answer is its first review).

The scheduler is fsrs's own, with its default parameters, except: fuzzing
off (the same ratings at the same times always give the same due dates; the
tests recompute them with a second Scheduler), and no same-day learning
steps (fsrs defaults to 1 and 10 minutes, which suit a flashcard app, not a
once-a-day command): a first Good is due in about 2 days, an Again
(new or lapsed) comes back the next day. "Due" means due by the end of the
learner's local day; each item is asked at most once per session.

fsrs is imported only when a rating is applied: `due_summary`, used by
`roadmap status`, is two plain SQL queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from typing import Optional

from roadmap_cli.quiz import records

CHECKPOINT, QUESTION = "checkpoint", "question"
SCHEDULER_OPTIONS = {"enable_fuzzing": False, "learning_steps": (), "relearning_steps": ()}


@dataclass
class ReviewItem:
    item: str  # "checkpoint:<id>" | "question:<id>"
    kind: str  # checkpoint | question
    ref: str  # the checkpoint or question id
    checkpoint_id: str
    due: Optional[str]  # None: never reviewed (new)


def item_key(kind: str, ref: str) -> str:
    return f"{kind}:{ref}"


def end_of_local_day(now: datetime) -> datetime:
    local = now.astimezone()
    return datetime.combine(local.date(), time.max, tzinfo=local.tzinfo).replace(microsecond=0)


def _scheduler():
    from fsrs import Scheduler

    return Scheduler(**SCHEDULER_OPTIONS)


def apply_rating(conn, learner: str, item: str, rating: int, now: datetime, source: str) -> str:
    """Review `item` with `rating` (1-4) at `now`; store the new card and the
    log line; return the new due time (ISO, UTC)."""
    import json

    from fsrs import Card, Rating

    stored = records.load_card(conn, learner, item)
    # stored as JSON of Card.to_dict() (sorted keys: exports stay byte-stable)
    card = Card.from_dict(json.loads(stored[0])) if stored else Card(due=now)
    card, _log = _scheduler().review_card(card, Rating(rating), review_datetime=now)
    due = records.iso(card.due)
    records.save_review(
        conn,
        learner,
        item,
        json.dumps(card.to_dict(), sort_keys=True),
        due,
        (stored[1] if stored else 0) + 1,
        rating,
        records.iso(now),
        source,
    )
    return due


def due_items(store, curriculum, learner: str, now: datetime) -> list[ReviewItem]:
    """Everything due by the end of today: cards whose due time has come
    (earliest first), then done explain checkpoints never reviewed.
    Items the curriculum no longer has are skipped."""
    from roadmap_cli.tracker.progress import completed

    until = records.iso(end_of_local_day(now))
    items: list[ReviewItem] = []
    for item, due in records.cards_due(store, learner, until):
        kind, _, ref = item.partition(":")
        found = _resolve(curriculum, kind, ref)
        if found is not None:
            items.append(ReviewItem(item, kind, ref, found, due))
    reviewed = records.items_with_cards(store, learner)
    for cid in _new_checkpoints(curriculum, completed(store), reviewed):
        items.append(ReviewItem(item_key(CHECKPOINT, cid), CHECKPOINT, cid, cid, None))
    return items


def _resolve(curriculum, kind: str, ref: str) -> Optional[str]:
    """The checkpoint id an item belongs to, or None if it no longer exists."""
    from roadmap_cli.errors import NotFoundError

    try:
        if kind == QUESTION:
            return curriculum.question(ref)[1]
        if kind == CHECKPOINT:
            return curriculum.checkpoint(ref).id
    except NotFoundError:
        return None
    return None


def _new_checkpoints(curriculum, done: dict, reviewed: set[str]) -> list[str]:
    return [
        cp.id
        for cp in curriculum.all_checkpoints()
        if cp.kind == "explain" and cp.id in done and item_key(CHECKPOINT, cp.id) not in reviewed
    ]


def due_summary(store, curriculum, done: dict, now: datetime) -> dict:
    """{"due": n, "new": m} for `roadmap status`: plain SQL, no fsrs."""
    learner = records.current_learner(store)
    until = records.iso(end_of_local_day(now))
    due = sum(
        1
        for item, _ in records.cards_due(store, learner, until)
        if _resolve(curriculum, *item.partition(":")[::2]) is not None
    )
    new = len(_new_checkpoints(curriculum, done, records.items_with_cards(store, learner)))
    return {"due": due, "new": new}


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def next_due_text(due_iso: str, now: datetime) -> str:
    """ "in 10 minutes", "in 3 days" for the learner."""
    delta = records.parse_iso(due_iso) - now

    def plural(n: int, word: str) -> str:
        return f"{n} {word}" if n == 1 else f"{n} {word}s"

    if delta < timedelta(hours=1):
        return "in " + plural(max(int(delta.total_seconds() // 60), 0), "minute")
    if delta < timedelta(days=1):
        return "in " + plural(int(delta.total_seconds() // 3600), "hour")
    return f"in {plural(delta.days, 'day')} ({due_iso[:10]})"
