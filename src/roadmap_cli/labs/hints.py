"""Hints chosen by what failed.

A hint in lab.yaml may name the part(s) and/or test(s) it helps with:

    hints:
      - {en: "Mask with -inf before the softmax ...", parts: [causal-mask]}
      - {en: "...", tests: ["test_model.py::test_rope"]}
      - {en: "General advice"}          # no parts/tests: for any failure

`roadmap lab hint` gives the next unseen hint for the first part, in the lab's
order, that is still failing (not passed, and failed the last time it was
graded), else for the first part not passed yet (or `--part`), so a
causal-mask failure never gets hint 1 about parts 2 and 3, and a part that
just passed gets no more hints while others wait. Hints are
numbered in the order they are shown ("Hint 1/6" first), not by file position.
When that part's hints are used up it says so, and only then gives a general
hint or another part's, naming the part it is for. Every hint of a real lab
names its parts (tests/test_lab_hints.py). Hints stay
earned: each one shown is recorded (table lab_hints), and none is ever
written into the workspace.
"""

from __future__ import annotations

import json
from typing import Optional

from roadmap_cli.labs.nodeids import prefix_matches
from roadmap_cli.labs.spec import LabSpec, find_lab
from roadmap_cli.store.values import GRADED_PART_STATUSES
from roadmap_cli.formats.timeutil import utc_now_iso

BAD = ("failed", "error", "crashed", "timeout")
# Outcomes of attempts that say nothing about the learner's code.
NOT_COUNTED = ("interrupted", "error")


def _graded_states(store, lab_id: str) -> tuple[dict[str, tuple[str, int]], set[str]]:
    """({part: (its status in the newest attempt that graded it, that attempt's id)}, parts passed): over the
    attempts that say something about the code (not interrupted, not a grader error); passed as
    labs/passing.py says (counted attempts, a later failure does not take a pass back)."""
    from roadmap_cli.labs import passing

    rows = store.read_sql(
        lambda sql: sql.rows(
            "SELECT id, outcome, parts FROM grade_attempts WHERE lab_id = :lab AND learner = :learner ORDER BY id DESC",
            lab=lab_id,
            learner=store.learner,
        )
    )
    latest: dict[str, tuple[str, int]] = {}
    for attempt_id, outcome, parts in rows:
        if outcome in NOT_COUNTED:
            continue
        for part in passing.stored_parts(parts):
            if isinstance(part, dict) and part.get("status") in GRADED_PART_STATUSES:
                latest.setdefault(part.get("id"), (part["status"], attempt_id))
    return latest, set(passing.passed_parts((outcome, parts) for _id, outcome, parts in rows))


def _failing_tests(store, attempt_id: int, part: str) -> list[str]:
    return [
        nodeid
        for nodeid, part_id in store.read_sql(
            lambda sql: sql.rows(
                "SELECT nodeid, part_id FROM grade_test_results WHERE attempt_id = :a AND outcome IN "
                "('failed', 'error', 'crashed', 'timeout') ORDER BY id",
                a=attempt_id,
            )
        )
        if part_id == part
    ]


def passed_parts(store, lab_id: str) -> set[str]:
    """Parts that any counted attempt passed (labs/passing.py: a timed-out or interrupted run proves nothing)."""
    from roadmap_cli.labs import passing

    rows = store.read_sql(
        lambda sql: sql.rows(
            "SELECT outcome, parts FROM grade_attempts WHERE lab_id = :lab AND learner = :learner",
            lab=lab_id,
            learner=store.learner,
        )
    )
    return set(passing.passed_parts(rows))


def target_part(spec: LabSpec, store) -> tuple[Optional[str], list[str]]:
    """(part, failing tests) a hint should help with: the first part in the lab's order that is still
    failing (not passed, and failed the last time an attempt graded it), else the first part not passed
    yet; never a part this machine cannot grade, never one that passed (however recently)."""
    from roadmap_cli.labs.device import detect_device

    latest, passed = _graded_states(store, spec.id)
    cuda = detect_device().cuda  # a part this machine cannot grade is not the one to work on here
    open_here = [p.id for p in spec.parts if p.id not in passed and (cuda or not p.needs_cuda)]
    for part in open_here:
        status, attempt_id = latest.get(part, (None, None))
        if status == "failed":
            return part, _failing_tests(store, attempt_id, part)
    return (open_here[0] if open_here else None), []


def _for(hint, part: Optional[str], tests: list[str]) -> bool:
    return bool((part and part in hint.parts) or any(prefix_matches(p, t) for p in hint.tests for t in tests))


def choose(
    spec: LabSpec,
    seen: set[int],
    part: Optional[str],
    tests: list[str],
    *,
    any_part: bool = True,
    open_parts: frozenset[str] = frozenset(),
) -> Optional[int]:
    """Index of the next unseen hint: for the failing part/tests, then general,
    then (with `any_part`) one for a part still open, then any other."""
    unseen = [i for i in range(len(spec.hints)) if i not in seen]
    tiers = [lambda h: _for(h, part, tests), lambda h: not h.parts and not h.tests]
    if any_part:
        tiers += [lambda h: bool(open_parts & set(h.parts)), lambda h: True]
    for wanted in tiers:
        for i in unseen:
            if wanted(spec.hints[i]):
                return i
    return None


def seen_indexes(store, lab_id: str) -> set[int]:
    return set(seen_order(store, lab_id))


def seen_order(store, lab_id: str) -> list[int]:
    """Indexes of the hints seen, in the order they were first shown."""
    order: dict[int, None] = {}
    for (i,) in store.read_sql(
        lambda sql: sql.rows(
            "SELECT hint_index FROM lab_hints WHERE lab_id = :lab AND learner = :learner ORDER BY id",
            lab=lab_id,
            learner=store.learner,
        )
    ):
        order.setdefault(int(i), None)
    return list(order)


def next_hint(store, lab_id: str, lang: str, part: Optional[str] = None) -> dict:
    """The next hint (recorded as seen), for `part` or else the part that failed last.

    That part's own hints come first. Once they are all seen the answer says
    so (`part_used_up`) and only then gives a hint for another part, naming
    it (`other_part`), so a learner never mistakes a later part's hint for
    help with the one that failed."""
    from roadmap_cli.store.tables import LabHint

    spec = find_lab(lab_id)
    total = len(spec.hints)
    failed, tests = target_part(spec, store)
    if part is not None:
        spec.part(part)  # an unknown part is a user error naming the lab's parts
        tests = tests if part == failed else []
    want = part or failed
    base = {"lab": spec.id, "total": total, "for_part": want}
    if total == 0:
        return {
            **base,
            "index": 0,
            "text": None,
            "new": False,
            "seen": 0,
            "parts": [],
            "part_hints": 0,
            "part_used_up": False,
            "other_part": False,
        }
    order = seen_order(store, spec.id)
    seen = set(order)
    mine = [i for i, h in enumerate(spec.hints) if _for(h, want, tests)]
    index = next((i for i in mine if i not in seen), None)
    if index is None:
        # general hints first, then those of the parts not passed yet, then the others, in file order
        index = choose(
            spec, seen, None, [], open_parts=frozenset(p.id for p in spec.parts) - passed_parts(store, spec.id)
        )
    new = index is not None
    if not new:
        # Every hint seen: repeat the most relevant one rather than nothing.
        index = mine[0] if mine else total - 1
    else:
        with store.session() as s:
            s.add(LabHint(lab_id=spec.id, hint_index=index, shown_at=utc_now_iso()))
        seen.add(index)
        order.append(index)
    hint = spec.hints[index]
    # "index": its place in lab.yaml; "number": its place in the order shown (what people read).
    return {
        **base,
        "index": index + 1,
        "number": order.index(index) + 1 if index in order else len(order) + 1,
        "text": hint.get(lang),
        "new": new,
        "seen": len(seen),
        "parts": list(hint.parts),
        "part_hints": len(mine),
        "part_used_up": bool(want) and (index not in mine or not new),
        "other_part": bool(want) and index not in mine and bool(hint.parts or hint.tests),
    }


def lines(data: dict) -> list[str]:
    """`roadmap lab hint` for people (plain text: the CLI escapes it, `watch` prints it)."""
    if not data["total"]:
        return [f"{data['lab']} has no hints."]
    want, out = data["for_part"], []
    if want and data["part_used_up"]:
        n = data["part_hints"]
        out.append(
            f"{want}: {'its hint is' if n == 1 else f'all {n} of its hints are'} used up."
            if n
            else f"{want} has no hints of its own."
        )
    label = ", ".join(data["parts"]) or "any part"
    if data["other_part"]:
        head = f"Hint {data['number']}/{data['total']}, for part {label} (not {want})"
    else:
        head = f"Hint {data['number']}/{data['total']} ({label})"
    out.append(f"{head}: {data['text']}")
    if not data["new"]:
        out.append("(every hint has been seen: that one again)")
    return out


def offer_line(store, spec: LabSpec, lang: str = "en") -> Optional[str]:
    """After two failed grades of the same part in a row, one line offering a hint (if one is left)."""
    if not spec.hints:
        return None
    rows = store.read_sql(
        lambda sql: sql.rows(
            "SELECT parts FROM grade_attempts WHERE lab_id = :lab AND outcome NOT IN ('interrupted', 'error') "
            "AND learner = :learner ORDER BY id DESC LIMIT 2",
            lab=spec.id,
            learner=store.learner,
        )
    )
    if len(rows) < 2:
        return None
    failed = [{p["id"] for p in json.loads(parts or "[]") if p.get("status") == "failed"} for (parts,) in rows]
    first_now = [p.id for p in spec.parts if p.id in failed[0]]
    stuck = next((p for p in first_now if p in failed[1]), None)
    if stuck is None:
        return None
    part, tests = target_part(spec, store)
    seen = seen_indexes(store, spec.id)
    if choose(spec, seen, stuck, tests if part == stuck else [], any_part=False) is None:
        return None
    # `lab hint` alone goes to the first part still failing; when that is another one, the exact command.
    command = "roadmap lab hint" if part == stuck else f"roadmap lab hint --part {stuck}"
    return f"{stuck} failed twice in a row: `{command}` has a hint for it ({len(seen)}/{len(spec.hints)} hints seen)"
