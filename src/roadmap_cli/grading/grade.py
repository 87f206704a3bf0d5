"""Grading a workspace for `roadmap grade` and `roadmap watch`: the
pre-check, the grader run, the nvcc check of .cu files, recording the
attempt (per-lab number, per-test results) and marking the checkpoints that
passing parts prove.

The slow steps overlap: pytest starts first (for the plain forms of the
command, before the command line is even parsed: grading/prestart.py), then git
and the database are opened while it runs; a pre-check failure is shown
before any of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from roadmap_cli.errors import UserError
from roadmap_cli.labs.service import (
    find_lab,
    resolve_workspace,
    start_command,
    workspace_at,
    workspaces,
    workspaces_fast,
)

if TYPE_CHECKING:
    from roadmap_cli.labs.spec import LabSpec


@dataclass
class GradeOutcome:
    attempt_id: int
    run: object  # runner.GradeRun
    commit_sha: Optional[str]
    dirty: Optional[bool]
    checkpoints_marked: list[str] = field(default_factory=list)
    attempt_number: int = 0  # this lab's attempt number (1, 2, ...), not the database id
    precheck: Optional[object] = None  # precheck.Problem when the pre-check stopped the grade
    cuda_checks: list = field(default_factory=list)  # precheck.CudaCheck per .cu file (CPU machines)
    hint_offer: Optional[str] = None  # one line offering `roadmap lab hint` after repeated failures


def grade(
    get_store: Callable[[], object],
    home: Path,
    lab_id: Optional[str],
    cwd: Path,
    *,
    part: Optional[str] = None,
    timeout: Optional[float] = None,
    on_event: Optional[Callable[[dict], None]] = None,
    focus=None,
    cancel=None,
    lang: str = "en",
    warm=None,
) -> GradeOutcome:
    """Pre-check, grade the workspace, record the attempt, mark checkpoints.

    `get_store` is called only once pytest is running: opening the database
    and asking git overlap with the grader's start-up. `focus` is a
    runner.Focus (-k/--test/-x/-v); `cancel` a threading.Event that stops the
    run (recorded as "interrupted").
    """
    from roadmap_cli.grading import precheck, prestart

    # The console script resolved this grade's lab and workspace from the same command line, pre-checked it
    # and started its grader before typer loaded (grading/prestart.py): handed on here, not resolved again.
    early = prestart.take(lab_id, part=part, timeout=timeout, focus=focus) if warm is None else None
    if early is not None:
        try:
            spec, path = find_lab(early.spec.id), early.workspace
        except BaseException:
            early.abort()
            raise
        problem = None
    else:
        spec, path, problem = _resolve(get_store, home, lab_id, cwd, part, on_event)
    from roadmap_cli.grading.runner import GradeJob
    from roadmap_cli.labs.workspace import head_info

    job = prestart.validated(early, spec) if early is not None else None
    if job is None:
        job = GradeJob(
            spec,
            path,
            parts=[part] if part else None,
            timeout=timeout,
            focus=focus,
            cancel=cancel,
            device=early.device if early is not None else None,  # detected once (the GPU driver is slow to ask)
            warm=warm,
        )
    elif cancel is not None:
        job.cancel_event = cancel  # the caller's stop button
    if problem is not None:
        # A file that does not parse (or imports what does not exist): one report, no pytest.
        run = precheck.failed_run(job, problem)
        sha, dirty = head_info(path)
        store = get_store()
        attempt_id, marked = record_attempt(store, spec, run, sha, dirty)
        return grade_outcome(store, spec, attempt_id, run, sha, dirty, marked, lang, problem=problem)
    if job.proc is None:
        job.start()
    cuda_checks = None
    try:
        if on_event:
            on_event({"event": "started"})  # pytest is starting: progress displays can appear now
        sha, dirty = head_info(path)
        cuda_checks = _start_cuda_checks(job)
        store = get_store()  # opened while pytest runs; recording needs no ORM (record_attempt)
    except BaseException:
        job.abort()
        raise
    run = job.finish(on_event)
    if run.nothing_selected and job.focus.narrows:
        # A -k/--test that matches no test is a typo, not an attempt: nothing ran, so nothing is recorded.
        raise UserError(f"no test of {spec.id} matches {_focus_words(job.focus)}: nothing graded, no attempt recorded")
    attempt_id, marked = record_attempt(store, spec, run, sha, dirty)
    checks = cuda_checks.result() if cuda_checks is not None else []
    return grade_outcome(store, spec, attempt_id, run, sha, dirty, marked, lang, cuda_checks=checks)


def _resolve(get_store, home: Path, lab_id: Optional[str], cwd: Path, part: Optional[str], on_event):
    """(spec, workspace, pre-check problem or None) of a grade nothing was started early for."""
    from roadmap_cli.grading import precheck

    rows = workspaces_fast(home)
    if rows is None:
        rows = workspaces(get_store())
    # The pre-check needs only the folder: it runs before the lab spec is
    # loaded (pydantic) and the report is shown at once; recording the
    # attempt (git, the database) comes after the learner has read it.
    here = workspace_at(None, cwd, rows)
    early = here[1] if here and (lab_id is None or lab_id == here[0]) and here[1].is_dir() else None
    problem = precheck.check_workspace(early) if early is not None else None
    if problem is not None and on_event:
        on_event({"event": "precheck", "problem": problem})
    spec, path = resolve_workspace(None, lab_id, cwd, rows)
    if not path.is_dir():
        raise UserError(f"workspace {path} is gone: run `{start_command(home, spec.id, path)}`")
    if part:
        spec.part(part)
    if early is None:
        problem = precheck.check_workspace(path)
    return spec, path, problem


def _focus_words(focus) -> str:
    """`-k 'zzz'` / `--test a.py::b`: the narrowing as the learner typed it."""
    import shlex

    words = [f"-k {shlex.quote(focus.keyword)}"] if focus.keyword else []
    words += [f"--test {shlex.quote(t)}" for t in focus.tests]
    return " ".join(words)


def _start_cuda_checks(job):
    """Without a GPU the CUDA C parts never run; nvcc can at least say the .cu
    files compile. Started in a thread so it overlaps with pytest."""
    from concurrent.futures import ThreadPoolExecutor

    from roadmap_cli.grading import precheck

    if job.device.cuda or job.focus.narrows or not precheck.cuda_sources(job.workspace):
        return None
    if not any(job.spec.part(p).needs_cuda for p in [p.id for p in job.spec.parts]):
        return None
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(precheck.compile_cuda, job.workspace)
    pool.shutdown(wait=False)
    return future


def grade_outcome(
    store, spec, attempt_id, run, sha, dirty, marked, lang, *, problem=None, cuda_checks=()
) -> GradeOutcome:
    """What the grade command shows of a recorded attempt (its number, the next hint, the pre-check problem
    or CUDA checks): shared by a local grade and `grade --on` (grading/remote/near.py)."""
    from roadmap_cli.labs import hints

    number = attempt_number(store, spec.id, attempt_id)
    # An interrupted run says nothing about the code: the offer would be about
    # the two failures before it, stale news after Ctrl-C.
    offer = None if run.outcome in hints.NOT_COUNTED else hints.offer_line(store, spec, lang)
    return GradeOutcome(attempt_id, run, sha, dirty, marked, number, problem, list(cuda_checks), offer)


# The one numbering of attempts people see (the grade's footer, `lab history`, `stage show`'s evidence,
# the cohort queue): 1, 2, ... per learner per lab, computed on read (no schema change).
ATTEMPT_NUMBER_SQL = "SELECT count(*) FROM grade_attempts WHERE lab_id = :lab AND id <= :id AND learner = :learner"


def attempt_number_in(sql, lab_id: str, learner: str, attempt_id: int) -> int:
    return int(sql.scalar(ATTEMPT_NUMBER_SQL, lab=lab_id, id=attempt_id, learner=learner) or 0)


def attempt_number(store, lab_id: str, attempt_id: int) -> int:
    """The attempt's number within its lab, for this store's learner."""
    return store.read_sql(lambda sql: attempt_number_in(sql, lab_id, store.learner, attempt_id))


# Every column of grade_attempts a grade writes (`imported` is False: this attempt was graded here).
_ATTEMPT_COLUMNS = (
    "lab_id",
    "started_at",
    "duration_s",
    "outcome",
    "score",
    "max_score",
    "parts",
    "perf",
    "device",
    "device_capability",
    "torch_version",
    "triton_version",
    "interpret_mode",
    "commit_sha",
    "dirty",
    "workspace",
    "grader_sha256",
    "message",
    "sandbox",
    "imported",
    "learner",
    "graded_on",
    "verified",
)
_INSERT_ATTEMPT = (
    f"INSERT INTO grade_attempts ({', '.join(_ATTEMPT_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in _ATTEMPT_COLUMNS)})"
)
_INSERT_TEST = (
    "INSERT INTO grade_test_results (attempt_id, nodeid, part_id, outcome, duration_s, message, learner) "
    "VALUES (:attempt_id, :nodeid, :part_id, :outcome, :duration_s, :message, :learner)"
)


def _parts_passed_before(sql, lab_id: str, learner: str, *, verified_only: bool = False) -> set[str]:
    """Ids of the parts some earlier counted attempt of this lab passed (graded, not merely skipped):
    labs/passing.py's rule, the one every view uses. `verified_only`: of the worker's attempts only (a
    self-graded claim never helps prove a checkpoint)."""
    from roadmap_cli.labs.passing import passed_parts, passing_attempts_sql

    rows = sql.rows(
        passing_attempts_sql(
            "outcome, parts", where="lab_id = :lab AND learner = :learner", verified_only=verified_only
        ),
        lab=lab_id,
        learner=learner,
    )
    return set(passed_parts(rows))


def record_attempt(
    store, spec: "LabSpec", run, commit_sha: Optional[str], dirty: Optional[bool], *, graded_on: Optional[str] = None
) -> tuple[int, list[str]]:
    """Store the attempt and its per-test results; mark the checkpoints of passed parts.

    Plain SQL (store/sql.py) in one write transaction, on either store: the
    full one, or store/lite.py's, which spares the grade the SQLAlchemy import.
    A cohort learner's login records it through the server's function, as
    self-graded (store/roles.py)."""
    return store.write_sql(attempt_writer(spec, run, commit_sha, dirty, learner=store.learner, graded_on=graded_on))


def _through_server(sql) -> bool:
    """A cohort learner's login: it may not write grade_attempts itself (migration 11), the server's
    SECURITY DEFINER function records the attempt, self-graded. The instructor (and the worker, which runs
    as the instructor) and every SQLite file write directly."""
    return sql.dialect == "postgresql" and not sql.scalar("SELECT has_table_privilege('grade_attempts', 'INSERT')")


def attempt_writer(
    spec: "LabSpec",
    run,
    commit_sha: Optional[str],
    dirty: Optional[bool],
    *,
    learner: str,
    graded_on: Optional[str] = None,
    verified: bool = False,
) -> Callable[[object], tuple[int, list[str]]]:
    """record_attempt's transaction body, `write(sql) -> (attempt id, checkpoints marked)`, for `learner`:
    the cohort worker (grading/queue.py) runs it inside its own transaction, which also marks the submission,
    with `verified=True` (only a role allowed to write grade_attempts can record that)."""
    from roadmap_cli.tracker.progress import mark_done_sql
    from roadmap_cli.store.roles import LAB_SOURCE_PREFIX, SELF_GRADED_FUNCTION, SELF_GRADED_SOURCE_PREFIX
    from roadmap_cli.store.values import WORKER_PREFIX

    parts_json = [
        {
            "id": p.id,
            "points": p.points,
            "max_points": p.max_points,
            "status": p.status,
            "tests_passed": p.tests_passed,
            "tests_total": p.tests_total,
        }
        for p in run.parts
    ]
    row = dict(
        lab_id=spec.id,
        started_at=run.started_at,
        duration_s=run.duration_s,
        outcome=run.outcome,
        score=run.score,
        max_score=run.max_score,
        parts=json.dumps(parts_json),
        perf=json.dumps(run.perf),
        device=run.device,
        device_capability=run.device_capability,
        torch_version=run.torch_version,
        triton_version=run.triton_version,
        interpret_mode=bool(run.interpret_mode),
        commit_sha=commit_sha,
        dirty=dirty,
        workspace=run.workspace,
        grader_sha256=run.grader_sha256,
        message=run.message,
        sandbox=run.sandbox,
        imported=False,
        learner=learner,
        graded_on=graded_on,  # None: this machine; else the remote's name
        verified=bool(verified),
    )
    tests = [
        dict(nodeid=t.nodeid, part_id=t.part or "?", outcome=t.outcome, duration_s=t.duration_s, message=t.message)
        for t in run.tests
    ]

    def write(sql):  # run again as a whole if the server reports a conflict (Store.write_sql)
        marked: list[str] = []
        passed = (
            _parts_passed_before(sql, spec.id, learner, verified_only=verified)
            if any(p.status == "passed" for p in run.parts)
            else set()
        )
        self_graded = _through_server(sql)
        if self_graded:
            claim = {k: v for k, v in row.items() if k not in ("imported", "learner", "verified")}
            attempt_id = int(
                sql.scalar(
                    f"SELECT {SELF_GRADED_FUNCTION}(CAST(:attempt AS jsonb), CAST(:tests AS jsonb))",
                    attempt=json.dumps(claim),
                    tests=json.dumps(tests),
                )
            )
        else:
            attempt_id = sql.insert(_INSERT_ATTEMPT, **row)
            for t in tests:
                sql.execute(_INSERT_TEST, attempt_id=attempt_id, learner=learner, **t)
        passed |= {p.id for p in run.parts if p.status == "passed"}
        # A cohort learner's own grade proves a checkpoint only as their claim; the server's (and a solo file's) is
        # lab-proved.
        # A worker's weak-sandbox grade (recorded with verified=False) proves no more than the learner's own.
        as_claim = self_graded or (bool(graded_on) and graded_on.startswith(WORKER_PREFIX) and not verified)
        source_prefix, kind = (
            (SELF_GRADED_SOURCE_PREFIX, "self-graded attempt") if as_claim else (LAB_SOURCE_PREFIX, "grade attempt")
        )
        for p in run.parts:
            if p.status != "passed":
                continue
            for checkpoint in spec.part(p.id).proves:
                # Marked only when every part that proves it has passed (here or in an earlier
                # counted attempt): a GPU part not graded on this machine keeps it open.
                if not all(q.id in passed for q in spec.parts if checkpoint in q.proves):
                    continue
                number = attempt_number_in(sql, spec.id, learner, attempt_id)
                _, already = mark_done_sql(
                    sql, learner, checkpoint, f"{source_prefix}{spec.id}/{p.id}", f"{kind} #{number} of {spec.id}"
                )
                if not already and checkpoint not in marked:
                    marked.append(checkpoint)
        return attempt_id, marked

    return write
