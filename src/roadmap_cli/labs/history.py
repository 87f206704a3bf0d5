"""A lab's attempts, numbered per lab, and what changed between two of them.

Attempt numbers are computed on read (ROW_NUMBER over the lab's attempts in
id order), so the database needs no new column: the first flash-attention
attempt is #1 even if other labs were graded before it.
"""

from __future__ import annotations

import json

from roadmap_cli.errors import UserError
from roadmap_cli.labs.passing import (
    PART_PASSED,
    PASSED_ON_CPU,
    attempt_kind,
    attempt_scope,
    focused_parts,
    graded_parts,
    is_part_attempt,
    stored_parts,
)

# README's rule ("GPU first, CPU honest"; "When is a lab passed?", labs/passing.py): an attempt is
# "passed" only when every part was graded and passed. Stored rows keep the engine's "passed" (old rows
# and every reader that counts passes stay as they were); the word people and JSON consumers see is
# derived here from the stored per-part statuses: `part-passed` when the attempt left parts out
# (--part, -k/--test, -x), `passed-on-cpu` when parts were not graded here.


def _status(part) -> str | None:
    return part.get("status") if isinstance(part, dict) else getattr(part, "status", None)


def not_graded_count(parts) -> int:
    """How many parts (dicts from a stored row, or PartResults) were not graded here (need a CUDA GPU)."""
    return sum(_status(p) == "not-graded-here" for p in parts or [])


def outcome_word(outcome: str, parts) -> str:
    """`passed` only when every part was graded; `part-passed` when parts were left out (a part attempt);
    `passed-on-cpu` when parts were not graded here; other outcomes unchanged."""
    if outcome == "passed" and is_part_attempt(parts):
        return PART_PASSED
    if outcome == "passed" and not_graded_count(parts):
        return PASSED_ON_CPU
    return outcome


def outcome_text(outcome: str, parts) -> str:
    """The word with what it covers, short enough for a table cell: `passed-on-cpu (1 part not graded
    here)`, `part-passed (graded mul; 1/4 parts)`, `part-passed (some tests of add; 0/4 parts)`
    (--json's graded_parts and parts_left_out name them all)."""
    word = outcome_word(outcome, parts)
    n = not_graded_count(parts)
    if is_part_attempt(parts) and outcome != "interrupted":  # an interrupted run ran what it ran: not counted
        graded, focused = graded_parts(parts), focused_parts(parts)
        what = []
        if graded:
            what.append("graded " + (", ".join(graded) if len(graded) <= 2 else f"{len(graded)} parts"))
        if focused:
            what.append("some tests of " + (", ".join(focused) if len(focused) <= 2 else f"{len(focused)} parts"))
        return f"{word} ({' + '.join(what) or 'no part'}; {len(graded)}/{len(stored_parts(parts))} parts)"
    if word == PASSED_ON_CPU:
        return f"{word} ({n} part{'s' if n != 1 else ''} not graded here)"
    return word


def outcome_fields(outcome: str, parts) -> dict:
    """The keys every --json view of an attempt carries (README, "Grading words")."""
    return {
        "outcome": outcome_word(outcome, parts),
        "outcome_text": outcome_text(outcome, parts),
        "parts_not_graded_here": not_graded_count(parts),
        **attempt_scope(parts),
    }


_NUMBERED = (
    "SELECT * FROM (SELECT ROW_NUMBER() OVER (ORDER BY id) AS number, id, started_at, duration_s, outcome, "
    "score, max_score, parts, device, interpret_mode, commit_sha, dirty, message, sandbox, graded_on, verified "
    "FROM grade_attempts WHERE lab_id = :lab AND learner = :learner) AS numbered"
)


def lab_history(store, lab_id: str, limit: int = 20) -> dict:
    """The last `limit` attempts of a lab, newest first."""
    import sqlalchemy as sa

    from roadmap_cli.labs.spec import find_lab

    spec = find_lab(lab_id)
    with store.connection() as conn:
        mine = {"lab": spec.id, "learner": store.learner}
        total = conn.execute(
            sa.text("SELECT count(*) FROM grade_attempts WHERE lab_id = :lab AND learner = :learner"), mine
        ).scalar()
        rows = conn.execute(sa.text(_NUMBERED + " ORDER BY number DESC LIMIT :n"), {**mine, "n": limit}).all()
        solo = conn.dialect.name == "sqlite"
    attempts = []
    for r in rows:
        parts = json.loads(r.parts or "[]")
        attempts.append(
            {
                "number": r.number,
                "id": r.id,
                "started_at": r.started_at,
                "duration_s": r.duration_s,
                **outcome_fields(r.outcome, parts),
                "score": r.score,
                "max_score": r.max_score,
                "device": r.device,
                "interpret_mode": bool(r.interpret_mode),
                "commit_sha": r.commit_sha,
                "dirty": r.dirty,
                "counted": r.outcome not in ("timeout", "interrupted"),
                "message": r.message,
                "sandbox": r.sandbox,  # strong | weak | None (recorded before migration 7)
                "graded_on": r.graded_on,  # the remote's name (`grade --on NAME`); None: graded on this machine
                # In a cohort: verified (the worker graded it, the server vouches) or self-graded (a claim); solo: own.
                "kind": attempt_kind(solo, r.verified),
                "parts": [
                    {k: p.get(k) for k in ("id", "status", "points", "max_points", "tests_passed", "tests_total")}
                    for p in parts
                ],
            }
        )
    return {"lab": spec.id, "total": int(total or 0), "attempts": attempts, "part_ids": [p.id for p in spec.parts]}


def _attempt(conn, lab_id: str, number: int, learner: str):
    import sqlalchemy as sa

    row = conn.execute(
        sa.text(_NUMBERED + " WHERE number = :num"), {"lab": lab_id, "num": number, "learner": learner}
    ).first()
    if row is None:
        total = conn.execute(
            sa.text("SELECT count(*) FROM grade_attempts WHERE lab_id = :lab AND learner = :learner"),
            {"lab": lab_id, "learner": learner},
        ).scalar()
        raise UserError(f"{lab_id} has no attempt #{number} (it has {total}: see `roadmap lab history {lab_id}`)")
    tests = dict(
        conn.execute(
            sa.text("SELECT nodeid, outcome FROM grade_test_results WHERE attempt_id = :a"), {"a": row.id}
        ).all()
    )
    return row, tests


def diff(store, lab_id: str, first: int, second: int) -> dict:
    """Tests whose outcome differs between attempts `first` and `second` (per-lab numbers).

    A test one attempt did not run (another --part, -k, -x) is not compared:
    it is counted in "not_comparable".
    """
    from roadmap_cli.labs.spec import find_lab

    spec = find_lab(lab_id)
    with store.connection() as conn:
        row_a, tests_a = _attempt(conn, spec.id, first, store.learner)
        row_b, tests_b = _attempt(conn, spec.id, second, store.learner)
    changed, same, unknown = [], 0, 0
    for nodeid in sorted(set(tests_a) | set(tests_b)):
        a, b = tests_a.get(nodeid, "absent"), tests_b.get(nodeid, "absent")
        if a == b:
            same += 1
        elif {a, b} & {"absent", "not-run"}:
            unknown += 1  # one side never ran it: nothing to compare
        else:
            changed.append({"test": nodeid, "a": a, "b": b, "kind": _kind(a, b)})
    summary = {k: sum(c["kind"] == k for c in changed) for k in ("fixed", "broken", "other")}
    return {
        "lab": spec.id,
        "a": {
            "number": first,
            **outcome_fields(row_a.outcome, json.loads(row_a.parts or "[]")),
            "score": row_a.score,
            "max_score": row_a.max_score,
            "commit_sha": row_a.commit_sha,
            "started_at": row_a.started_at,
        },
        "b": {
            "number": second,
            **outcome_fields(row_b.outcome, json.loads(row_b.parts or "[]")),
            "score": row_b.score,
            "max_score": row_b.max_score,
            "commit_sha": row_b.commit_sha,
            "started_at": row_b.started_at,
        },
        "changed": changed,
        "unchanged": same,
        "not_comparable": unknown,
        "summary": summary,
    }


def _kind(a: str, b: str) -> str:
    if b == "passed" and a != "passed":
        return "fixed"
    if a == "passed" and b != "passed":
        return "broken"
    return "other"
