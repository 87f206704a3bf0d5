"""One meaning of "passed" (issue 36 item 4), for every view that says it.

The rule (README, "When is a lab passed?"): a lab passes part by part, across
attempts, as rustlings passes exercises one at a time. A part is passed once
a counted attempt (not timed out, not interrupted) graded it and it passed;
a later attempt that fails it does not take that back (its checkpoints stay
done too). The lab is *passed* when every part is; *passed on CPU* when every
part that runs without a GPU is and only `needs_cuda` parts are open (they
are never graded on a CPU, so they neither pass the lab nor make it
impossible there); otherwise *partial* once a part has passed.

An attempt that graded only some gradable parts (`--part`, `-k`/`--test`,
`-x`, watch's focused runs) is a *part attempt*: its passed parts count for
the lab as any other attempt's do, but the attempt itself is never a lab's
"passed" nor its percentage (`part-passed` is its word).

`status`, `lab status`, `lab list`, `report`, `stats`, `cohort status`,
`cohort board` and `lab history` all ask here. Plain data in and out: no
pydantic, no database (`roadmap status` loads this).
"""

from __future__ import annotations

import json
from typing import Iterable, Optional

from roadmap_cli.store.values import GRADED_PART_STATUSES, LEFT_OUT_PART_STATUSES, UNCOUNTED_OUTCOMES, UNCOUNTED_SQL

PART_PASSED = "part-passed"  # an attempt's word: the parts it graded passed, others were left out
PASSED_ON_CPU = "passed-on-cpu"

# Who vouches for an attempt (migration 11, store/roles.py): `cohort board` ranks by it, `lab history` says it.
VERIFIED = "verified"  # a cohort worker graded the submitted files and the server recorded it
SELF_GRADED = "self-graded"  # a cohort learner's own machine: its score, device and sandbox are the learner's claim
OWN = "own"  # a solo (SQLite) file: one person's own attempts, nobody else to rank against or vouch to


def attempt_kind(solo: bool, verified) -> str:
    return OWN if solo else (VERIFIED if verified else SELF_GRADED)


def _status(part) -> Optional[str]:
    return part.get("status") if isinstance(part, dict) else getattr(part, "status", None)


def _id(part) -> Optional[str]:
    return part.get("id") if isinstance(part, dict) else getattr(part, "id", None)


def stored_parts(parts) -> list:
    """An attempt's parts: a stored JSON string, a list of dicts or of PartResults (junk gives [])."""
    if isinstance(parts, str) or parts is None:
        try:
            parts = json.loads(parts or "[]")
        except ValueError:
            return []
    return [p for p in parts if isinstance(p, dict) or hasattr(p, "status")] if isinstance(parts, list) else []


# ---------------------------------------------------------------- one attempt


def graded_parts(parts) -> list[str]:
    """Ids of the parts this attempt graded (passed, failed or skipped)."""
    return [_id(p) for p in stored_parts(parts) if _status(p) in GRADED_PART_STATUSES]


def left_out_parts(parts) -> list[str]:
    """Ids of the gradable parts this attempt did not grade (another part selected, a filter, -x)."""
    return [_id(p) for p in stored_parts(parts) if _status(p) in LEFT_OUT_PART_STATUSES]


def focused_parts(parts) -> list[str]:
    """Ids of the parts whose selected tests (-k/--test) passed: some of their tests, so not passed."""
    return [_id(p) for p in stored_parts(parts) if _status(p) == "focused"]


def is_part_attempt(parts) -> bool:
    """True when the attempt left a gradable part out: it says nothing about the lab as a whole."""
    return bool(left_out_parts(parts))


def attempt_scope(parts) -> dict:
    """What an attempt graded, for --json and the views: part_attempt, graded_parts, parts_left_out."""
    return {
        "part_attempt": is_part_attempt(parts),
        "graded_parts": graded_parts(parts),
        "parts_left_out": left_out_parts(parts),
    }


# ---------------------------------------------------------------- a lab, across attempts


def passed_parts(attempts: Iterable[tuple[str, object]]) -> dict[str, float]:
    """Best points per passed part over `attempts` ((outcome, parts) pairs, any order): the counted ones only."""
    best: dict[str, float] = {}
    for outcome, parts in attempts:
        if outcome in UNCOUNTED_OUTCOMES:
            continue
        for part in stored_parts(parts):
            if _status(part) == "passed" and isinstance(_id(part), str):
                points = part.get("points") if isinstance(part, dict) else getattr(part, "points", 0.0)
                best[_id(part)] = max(best.get(_id(part), 0.0), float(points or 0.0))
    return best


def passing_attempts_sql(
    columns: str, *, where: str = "", table: str = "grade_attempts", verified_only: bool = False
) -> str:
    """The SELECT of the attempts that can have passed a part (what passed_parts is fed): counted ones
    (not timed out, not interrupted) that scored (an attempt with no point passed nothing, so its JSON is
    never parsed). `where`: more conditions (`learner = :learner`); `table`: cohort_grade_attempts for
    everyone's; `verified_only`: in a cohort, the worker's attempts only (a self-graded one is a claim)."""
    conditions = [
        f"outcome NOT IN {UNCOUNTED_SQL}",
        "score > 0",
        *([where] if where else []),
        *(["verified"] if verified_only else []),
    ]
    return f"SELECT {columns} FROM {table} WHERE " + " AND ".join(conditions)


def lab_verdict(
    spec_parts, best: dict[str, float], *, cuda: Optional[bool], n_attempts: int = 0, has_workspace: bool = False
) -> dict:
    """The lab's state from the best points of its passed parts (`passed_parts`).

    `spec_parts`: the lab's parts (anything with .id, .points, .needs_cuda). `cuda`: False on a machine
    without CUDA (GPU parts are then left out of the score), True with it, None unknown. Returns
    state (not-started | in-progress | partial | passed-on-cpu | passed), state_text, passed (the whole
    lab), best_score / max_score (over the parts gradable here), parts_passed, parts_open and gpu_parts_open."""
    spec_parts = list(spec_parts)
    required = [p for p in spec_parts if cuda is not False or not p.needs_cuda]
    cpu_parts = [p for p in spec_parts if not p.needs_cuda]
    gpu_open = [p.id for p in spec_parts if p.needs_cuda and p.id not in best]
    if spec_parts and all(p.id in best for p in spec_parts):
        state = "passed"
    elif gpu_open and cpu_parts and all(p.id in best for p in cpu_parts):
        state = PASSED_ON_CPU
    elif any(p.id in best for p in spec_parts):
        state = "partial"
    elif n_attempts or has_workspace:
        state = "in-progress"
    else:
        state = "not-started"
    text = state_text(state, len(gpu_open))
    if cuda is False and not cpu_parts and state != "passed":  # nothing to grade here: say why, not just "0/0"
        text = f"{state} (every part needs a CUDA GPU)"
    return {
        "state": state,
        "state_text": text,
        "passed": state == "passed",
        "best_score": round(sum(best.get(p.id, 0.0) for p in required), 3),
        "max_score": round(sum(p.points for p in required), 3),
        "parts_passed": [p.id for p in spec_parts if p.id in best],
        "parts_open": [p.id for p in spec_parts if p.id not in best],
        "gpu_parts_open": gpu_open,
    }


def verdict_line(verdict: dict) -> str:
    """A lab_verdict as a sentence's start: "Passed", "Passed on CPU (1 part needs a CUDA GPU)",
    "Partial: 2 of 5 parts passed", "In progress: no part passed yet"."""
    state = verdict["state"]
    total = len(verdict["parts_passed"]) + len(verdict["parts_open"])
    if state == "partial":
        return f"Partial: {len(verdict['parts_passed'])} of {total} parts passed"
    if state in ("in-progress", "not-started"):
        return "In progress: no part passed yet" if state == "in-progress" else "Not started"
    text = verdict["state_text"]
    return text[:1].upper() + text[1:]


def state_text(state: str, gpu_open: int) -> str:
    """The state as people read it: `passed on CPU (2 parts need a CUDA GPU)`."""
    if state == PASSED_ON_CPU:
        return f"passed on CPU ({gpu_open} part{'s' if gpu_open != 1 else ''} need{'s' if gpu_open == 1 else ''} a CUDA GPU)"
    return state
