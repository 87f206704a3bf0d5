"""Cohort views: every learner in the database side by side (cohort mode).

A study group points every learner's `roadmap` at one PostgreSQL database
(`DATABASE_URL`); each row carries its learner's id (store/learners.py). These
reads cover all learners at once, with one query per table, not per learner:

- `cohort_status`: each learner's stage, checkpoints done, labs passed and
  this ISO week's cadence (papers read, items logged, hours);
- `lab_board`: a lab's best score per learner, and for GPU-graded parts the
  performance ratio against the baseline and the device it ran on. Timings
  from different GPUs say nothing about each other, so learners are ranked
  only against results from the same device model. On a cohort server only
  verified attempts (graded by `roadmap worker`) are ranked; self-graded ones
  (a learner's own machine) are listed apart as claims;
- `cohort_export`: both, for every lab, as one document.

Plain SQL that runs the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import date, timedelta
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.labs.history import outcome_fields
from roadmap_cli.labs.passing import (
    OWN,
    SELF_GRADED,
    VERIFIED,
    attempt_kind,
    lab_verdict,
    passed_parts,
    passing_attempts_sql,
)
from roadmap_cli.store.values import UNCOUNTED_OUTCOMES  # attempts that prove nothing: never part of "best"


def learners(conn) -> list[str]:
    """Every learner with at least one row, sorted (the database-wide settings scope excluded).

    Read through the cohort views (migration 8): on a row-secured server a
    learner's own tables show only their rows, the views show everyone's."""
    import sqlalchemy as sa

    return sorted({r[0] for r in conn.execute(sa.text("SELECT DISTINCT learner FROM cohort_learners"))})


def _week(today: date) -> tuple[date, date]:
    start = today - timedelta(days=today.isoweekday() - 1)
    return start, start + timedelta(days=6)


def _passed_labs(rows, specs: dict) -> dict[str, set[str]]:
    """learner -> ids of the labs passed (labs/passing.py: every part, by parts across counted attempts)."""
    attempts: dict[tuple[str, str], list] = defaultdict(list)
    for learner, lab_id, parts, outcome in rows:
        attempts[(learner, lab_id)].append((outcome, parts))
    passed: dict[str, set[str]] = defaultdict(set)
    for (learner, lab_id), mine in attempts.items():
        spec = specs.get(lab_id)
        if spec is not None and lab_verdict(spec.parts, passed_parts(mine), cuda=None)["passed"]:
            passed[learner].add(lab_id)
    return passed


def cohort_status(store, curriculum, *, today: date) -> dict:
    import sqlalchemy as sa

    from roadmap_cli.labs.spec import load_all

    specs = {spec.id: spec for spec in load_all()[0]}  # a broken lab.yaml is `lab list`'s to report
    week_start, week_end = _week(today)
    window = {"start": week_start.isoformat(), "end": week_end.isoformat()}
    with store.connection() as conn:
        names = learners(conn)
        done: dict[str, set[str]] = defaultdict(set)
        progress = conn.execute(sa.text("SELECT learner, checkpoint_id FROM cohort_checkpoint_progress"))
        for learner, checkpoint in progress:
            done[learner].add(checkpoint)
        # In a cohort a lab counts as passed on verified attempts only (the worker's): a self-graded attempt is the
        # learner's claim (red team: a forged one listed the lab as passed). A solo file's attempts are its own.
        attempts = conn.execute(
            sa.text(
                passing_attempts_sql(
                    "learner, lab_id, parts, outcome",
                    table="cohort_grade_attempts",
                    verified_only=conn.dialect.name != "sqlite",
                )
            )
        ).all()
        papers = dict(
            conn.execute(
                sa.text(
                    "SELECT learner, COUNT(*) FROM cohort_papers WHERE status IN ('read', 'reproduced') "
                    "AND read_on >= :start AND read_on <= :end GROUP BY learner"
                ),
                window,
            ).all()
        )
        entries = conn.execute(
            sa.text(
                "SELECT learner, kind, COUNT(*), COALESCE(SUM(hours), 0) FROM cohort_cadence_entries "
                "WHERE on_date >= :start AND on_date <= :end GROUP BY learner, kind"
            ),
            window,
        ).all()
    passed = _passed_labs(attempts, specs)
    items: dict[str, dict[str, int]] = defaultdict(dict)
    hours: dict[str, float] = defaultdict(float)
    for learner, kind, n, h in entries:
        if kind == "hours":
            hours[learner] += float(h)
        else:
            items[learner][kind] = int(n)
    all_checkpoints = [cp.id for stage in curriculum.stages for cp in stage.checkpoints]
    known = set(all_checkpoints)
    # The long-range plan's phases have checkpoints of their own (`status` shows them beside the stages).
    phase_checkpoints = {cp.id for _plan, _phase, cp in curriculum.phase_checkpoints()}
    rows = []
    for learner in names:
        mine = done[learner] & known
        stage = next((s for s in curriculum.stages if any(cp.id not in mine for cp in s.checkpoints)), None)
        rows.append(
            {
                "learner": learner,
                "stage": stage.number if stage else None,
                "checkpoints_done": len(mine),
                "checkpoints_total": len(all_checkpoints),
                "phase_checkpoints_done": len(done[learner] & phase_checkpoints),
                "phase_checkpoints_total": len(phase_checkpoints),
                "labs_passed": sorted(passed[learner]),
                "labs_total": len(specs),
                "week": {
                    "papers": int(papers.get(learner, 0)),
                    "items": dict(sorted(items[learner].items())),
                    "hours": round(hours[learner], 2),
                },
            }
        )
    return {"week": {"start": window["start"], "end": window["end"]}, "learners": rows}


# ---------------------------------------------------------------- lab board


def perf_ratio(perf_json: Optional[str]) -> Optional[float]:
    """An attempt's speed against the baseline (1.0: as fast), from the figures
    its GPU parts recorded: a figure in unit "ratio" (a lab's own summary, e.g.
    the geomean vs SDPA) wins; else the geometric mean of the per-figure
    `ratio_vs_*` / `pct_of_baseline` extras. None: no GPU figures."""
    try:
        figures = json.loads(perf_json or "[]")
    except (ValueError, TypeError):
        return None
    if not isinstance(figures, list):  # a cohort learner's self-graded row says what it likes: never a crash
        return None
    summary = [
        f["value"]
        for f in figures
        if isinstance(f, dict)
        and f.get("unit") == "ratio"
        and isinstance(f.get("value"), (int, float))
        and f["value"] > 0
    ]
    if summary:
        return float(summary[-1])
    ratios = []
    for f in figures:
        if not isinstance(f, dict):
            continue
        for key, value in f.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                continue
            if key.startswith("ratio_vs_"):
                ratios.append(float(value))
            elif key == "pct_of_baseline":
                ratios.append(float(value) / 100)
    if not ratios:
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def lab_board(store, lab_id: str) -> dict:
    """Best result per learner for one lab. In a cohort only verified attempts are ranked (grouped by device
    model); self-graded ones are listed apart, by learner, as claims. A solo file ranks its own attempts."""
    import sqlalchemy as sa

    from roadmap_cli.labs.spec import find_lab

    spec = find_lab(lab_id)  # NotFoundError with did-you-mean
    with store.connection() as conn:
        solo = conn.dialect.name == "sqlite"
        rows = conn.execute(
            sa.text(
                "SELECT learner, score, max_score, outcome, perf, device, started_at, parts, sandbox, graded_on, verified "
                "FROM cohort_grade_attempts WHERE lab_id = :lab ORDER BY id"
            ),
            {"lab": spec.id},
        ).all()
    ranked_rows, claimed_rows = [], []
    for row in rows:
        if row.outcome in UNCOUNTED_OUTCOMES:
            continue
        (claimed_rows if attempt_kind(solo, row.verified) == SELF_GRADED else ranked_rows).append(row)
    return {
        "lab": spec.id,
        "max_points": float(sum(p.points for p in spec.parts)),
        "mode": "solo" if solo else "cohort",
        "devices": _ranked_by_device(ranked_rows, solo, spec),
        "self_graded": _self_graded_apart(claimed_rows, spec),
    }


def _entry(row, kind: str) -> dict:
    # The best attempt's word: "passed-on-cpu" when GPU parts were not graded on it (labs/history.py).
    return {
        "learner": row.learner,
        "best_score": float(row.score),
        "max_score": float(row.max_score),
        **outcome_fields(row.outcome, _stored_parts(row.parts)),
        "perf_ratio": perf_ratio(row.perf),
        "graded_at": row.started_at,
        "sandbox": row.sandbox or "unknown",
        "kind": kind,
    }


def _best_per(rows, key, kind: str) -> dict:
    """key(row) -> the best entry of those rows, with how many attempts it was chosen from."""
    best: dict = {}
    counts: dict = defaultdict(int)
    for row in rows:
        k = key(row)
        counts[k] += 1
        entry = _entry(row, kind)
        if kind == SELF_GRADED:  # what the learner's machine said, never believed
            entry["claimed"] = {"device": row.device, "sandbox": entry.pop("sandbox"), "graded_on": row.graded_on}
        old = best.get(k)
        if old is None or _better(entry, old):
            best[k] = entry
    return {k: {**entry, "attempts": counts[k]} for k, entry in best.items()}


def _with_lab_state(entry: dict, verdict: dict) -> dict:
    """The lab itself, by parts across the learner's attempts of this kind (labs/passing.py), whatever the best
    attempt's scope: a one-part attempt never reads as a passed lab. A learner on the board has attempts: with
    no part passed yet, that is "attempted, failing" (their best beside it), never "not started"."""
    text = "attempted, failing" if verdict["state"] == "in-progress" else verdict["state_text"]
    return {
        **entry,
        "lab_state": verdict["state"],
        "lab_state_text": text,
        "lab_parts_passed": len(verdict["parts_passed"]),
        "lab_parts": len(verdict["parts_passed"]) + len(verdict["parts_open"]),
    }


def _verdicts(rows, spec) -> dict[str, dict]:
    by_learner: dict[str, list] = defaultdict(list)
    for row in rows:
        by_learner[row.learner].append((row.outcome, row.parts))
    return {
        learner: lab_verdict(spec.parts, passed_parts(mine), cuda=None, n_attempts=len(mine))
        for learner, mine in by_learner.items()
    }


def _ranked_by_device(rows, solo: bool, spec) -> list[dict]:
    """Timings from different GPUs say nothing about each other: a ranking per device model."""
    groups: dict[str, list[dict]] = defaultdict(list)
    kind = OWN if solo else VERIFIED
    verdicts = _verdicts(rows, spec)
    for (device, learner), entry in _best_per(rows, lambda r: (r.device or "unknown", r.learner), kind).items():
        groups[device].append(_with_lab_state(entry, verdicts[learner]))
    out = []
    for device in sorted(groups, key=lambda d: (-len(groups[d]), d)):
        # A result graded behind the OS wall ranks above every weak-sandbox (or unknown) one, whatever the scores:
        # a weak sandbox cannot prove the learner's code did not reach the references.
        ranked = sorted(
            groups[device], key=lambda e: (_weak(e), -e["best_score"], -(e["perf_ratio"] or 0.0), e["learner"])
        )
        for rank, entry in enumerate(ranked, start=1):
            entry["rank"] = rank
        out.append({"device": device, "learners": ranked})
    return out


def _self_graded_apart(rows, spec) -> list[dict]:
    """Each learner's best self-graded attempt, unranked: by learner id."""
    verdicts = _verdicts(rows, spec)
    return sorted(
        (
            _with_lab_state(entry, verdicts[entry["learner"]])
            for entry in _best_per(rows, lambda r: r.learner, SELF_GRADED).values()
        ),
        key=lambda e: e["learner"],
    )


def _stored_parts(text) -> list:
    try:
        parts = json.loads(text or "[]")
    except ValueError:
        return []
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _weak(entry: dict) -> bool:
    return entry.get("sandbox") != "strong"


def _better(new: dict, old: dict) -> bool:
    """A learner's best: a strong-sandbox result beats any weak one, then the score, then performance."""
    return (not _weak(new), not new["part_attempt"], new["best_score"], new["perf_ratio"] or 0.0) > (
        not _weak(old),
        not old["part_attempt"],
        old["best_score"],
        old["perf_ratio"] or 0.0,
    )


def cohort_export(store, curriculum, *, today: date) -> dict:
    from roadmap_cli.labs.spec import lab_ids

    return {
        "status": cohort_status(store, curriculum, today=today),
        "boards": [lab_board(store, lab) for lab in sorted(lab_ids())],
    }


# ---------------------------------------------------------------- the instructor's learner roles


def _server_only(store, what: str) -> None:
    if store.path is not None:
        raise UserError(
            f"{what} needs a cohort database (DATABASE_URL=postgresql+psycopg://...); this is the "
            f"SQLite file {store.path}, which is one person's"
        )


class _as_instructor:
    """The server's "permission denied" (SQLSTATE 42501) as one line saying what the instructor's role lacks."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, _tb) -> bool:
        from roadmap_cli.store.server import sqlstate

        if exc is not None and sqlstate(exc) == "42501":
            raise UserError(
                f"the database refused to {self.what}: your role needs CREATEROLE (a superuser runs "
                "`ALTER ROLE <you> CREATEROLE`) and must own the cohort's tables"
            ) from None
        return False


def add_learner(store, name: str, password: Optional[str] = None) -> dict:
    """A PostgreSQL login role for `name` that reads the cohort and writes only its own rows (store/roles.py).
    Returns the DATABASE_URL to hand to the learner (with a generated password unless one was given)."""
    import secrets

    from sqlalchemy.engine import make_url

    from roadmap_cli.store import roles
    from roadmap_cli.store.learners import person_tables, validate_learner

    _server_only(store, "cohort add-learner")
    validate_learner(name)
    password = password or secrets.token_urlsafe(18)
    with _as_instructor("create a learner's role"):
        with store.engine.begin() as conn:
            roles.add_learner(conn, name, password, person_tables(conn))
    url = make_url(store.url).set(username=name, password=password)
    return {"learner": name, "database_url": url.render_as_string(hide_password=False)}


def remove_learner(store, name: str) -> dict:
    from roadmap_cli.store import roles

    _server_only(store, "cohort remove-learner")
    with _as_instructor("drop a learner's role"):
        with store.engine.begin() as conn:
            rows = roles.remove_learner(conn, name)
    return {"learner": name, "rows_kept": rows}


def learner_roles(store) -> dict:
    from roadmap_cli.store import roles

    _server_only(store, "cohort learners")
    with store.engine.connect() as conn:
        out = roles.learner_roles(conn)
        conn.rollback()
    return {"learners": out}
