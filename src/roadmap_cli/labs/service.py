"""What the lab commands do with the database: workspaces, attempts, state,
hints, solutions. Grading itself (pre-check, run, record, checkpoints) is in
roadmap_cli/grading/grade.py; hints in labs/hints.py; history and diff in labs/history.py.

`lab_summaries(store)` feeds `roadmap status`: it reads lab.yaml files and the
database only (no torch, no subprocess).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from roadmap_cli.errors import NotFoundError, UserError
from roadmap_cli.formats.timeutil import utc_now_iso

if TYPE_CHECKING:
    from roadmap_cli.labs.spec import LabSpec


# The lab spec module imports pydantic (~0.3 s): loaded when first needed, so
# that `roadmap grade`'s pre-check can report before it.
def find_lab(lab_id: str) -> "LabSpec":
    from roadmap_cli.labs.spec import find_lab as find

    return find(lab_id)


def lab_ids() -> list[str]:
    from roadmap_cli.labs.spec import lab_ids as ids

    return ids()


def load_all():
    from roadmap_cli.labs.spec import load_all as load

    return load()


# "passed-on-cpu": every part that runs without a GPU passed, but the
# needs_cuda parts never did. Never shown as plain "passed" (the GPU parts'
# checkpoints stay open too).
STATES = ("not-started", "in-progress", "partial", "passed-on-cpu", "passed")


# ---------------------------------------------------------------- workspaces


def default_workspace(home: Path, lab_id: str) -> Path:
    return Path(home) / "labs" / lab_id


def start_command(home: Path, lab_id: str, path: Path, force: bool = False) -> str:
    """The `roadmap lab start` line that recreates the workspace at `path`
    (with --dir unless it is the default one: a plain `lab start` would go elsewhere)."""
    import shlex

    cmd = f"roadmap lab start {lab_id}"
    if Path(path).resolve() != default_workspace(home, lab_id).resolve():
        cmd += f" --dir {shlex.quote(str(path))}"
    return cmd + (" --force" if force else "")


def record_workspace(store, lab_id: str, path: Path) -> None:
    from sqlmodel import select

    from roadmap_cli.store.tables import LabWorkspace

    with store.session() as s:
        row = s.exec(
            select(LabWorkspace).where(LabWorkspace.path == str(path), LabWorkspace.learner == store.learner)
        ).first()
        if row is None:
            s.add(LabWorkspace(lab_id=lab_id, path=str(path), created_at=utc_now_iso()))
        else:
            row.lab_id, row.created_at = lab_id, utc_now_iso()  # most recent start wins


def workspaces(store, lab_id: Optional[str] = None) -> list[tuple[str, Path]]:
    """(lab id, path) of recorded workspaces, most recent first.

    Plain SQL: `roadmap status` reads this, and defining the SQLModel table
    classes would cost it more than the query (see store/settings.py).
    """
    statement = "SELECT lab_id, path FROM lab_workspaces WHERE learner = :learner"
    statement += " AND lab_id = :lab" if lab_id else ""
    rows = store.read_sql(
        lambda sql: sql.rows(statement + " ORDER BY created_at DESC, id DESC", lab=lab_id, learner=store.learner)
    )
    return [(lab, Path(path)) for lab, path in rows]


def started_labs(store) -> frozenset[str]:
    """Labs whose recorded workspace is still on disk: `lab start` would refuse
    them, so what comes next there is a grade (progress.next_actions)."""
    return frozenset(lab for lab, path in workspaces(store) if path.is_dir())


def workspaces_fast(home: Path) -> Optional[list[tuple[str, Path]]]:
    """The same rows through the lean store, read-only (store/lite.py: the stdlib
    sqlite3, without importing SQLAlchemy, and the learner found as the full
    store finds it: store/learners.known_learner).

    `roadmap grade` needs the workspace before it can start pytest, and
    importing SQLAlchemy costs ~0.3 s (more on a busy machine); the store is
    opened afterwards, while pytest runs. None means "ask the store" (another
    database, one a migration is due on, or any problem: the store gives the
    proper error).
    """
    import sqlite3

    from roadmap_cli.errors import RoadmapError
    from roadmap_cli.store.lite import open_lite

    store = open_lite(home, read_only=True)
    if store is None:
        return None
    try:
        return workspaces(store)
    except (RoadmapError, sqlite3.Error):
        return None


def workspace_at(store, cwd: Path, rows: Optional[list[tuple[str, Path]]] = None) -> Optional[tuple[str, Path]]:
    """The recorded workspace containing `cwd` (the deepest one), if any."""
    cwd = Path(cwd).resolve()
    best = None
    for lab_id, path in rows if rows is not None else workspaces(store):
        if cwd == path or path in cwd.parents:
            if best is None or len(path.parts) > len(best[1].parts):
                best = (lab_id, path)
    return best


def resolve_workspace(
    store, lab_id: Optional[str], cwd: Path, rows: Optional[list[tuple[str, Path]]] = None
) -> tuple[LabSpec, Path]:
    """The lab and workspace a command is about: from the id, or from the current directory."""
    spec = find_lab(lab_id) if lab_id is not None else None  # an unknown id: a did-you-mean, before the lookup
    found, path = locate_workspace(store, spec.id if spec else None, cwd, rows)
    return spec or find_lab(found), path


def locate_workspace(
    store, lab_id: Optional[str], cwd: Path, rows: Optional[list[tuple[str, Path]]] = None
) -> tuple[str, Path]:
    """(lab id, workspace) as resolve_workspace finds them, without loading the
    lab's spec (grading/prestart.py starts a grade from this); UserError when there is none."""
    rows = rows if rows is not None else workspaces(store)
    here = workspace_at(store, cwd, rows)
    if lab_id is None:
        if here is None:
            raise UserError("not inside a lab workspace: give the lab id (see `roadmap lab list`)")
        return here
    if here is not None and here[0] == lab_id:
        return here
    recorded = [path for lab, path in rows if lab == lab_id]
    if not recorded:
        raise UserError(f"no workspace for {lab_id} yet: run `roadmap lab start {lab_id}`")
    return lab_id, recorded[0]


def lab_here(store, lab_id: Optional[str], cwd: Path) -> str:
    """`lab_id`, or the lab of the workspace containing `cwd`."""
    if lab_id is not None:
        return lab_id
    here = workspace_at(store, cwd)
    if here is None:
        raise UserError("not inside a lab workspace: give the lab id (see `roadmap lab list`)")
    return here[0]


def start_lab(store, home: Path, lab_id: str, directory: Optional[str], force: bool, lang: str = "en"):
    from roadmap_cli.labs import workspace as ws

    spec = find_lab(lab_id)
    dest = Path(directory).expanduser() if directory else default_workspace(home, spec.id)
    result = ws.start(spec, dest, data_home=home, force=force)
    result.commit_sha = ws.add_handout(spec, result.path, lang) or result.commit_sha
    record_workspace(store, spec.id, result.path)
    return spec, result


def reset_lab(store, home: Path, lab_id: Optional[str], cwd: Path, lang: str = "en"):
    from roadmap_cli.labs import workspace as ws

    spec, path = resolve_workspace(store, lab_id, cwd)
    if not path.is_dir():
        raise UserError(f"workspace {path} is gone: run `{start_command(home, spec.id, path)}`")
    saved, head = ws.reset(spec, path, restart_hint=start_command(home, spec.id, path, force=True))
    head = ws.add_handout(spec, path, lang) or head
    return spec, path, saved, head


# ---------------------------------------------------------------- state


def _attempt_rows(store, lab_id: Optional[str] = None) -> list:
    from sqlmodel import select

    from roadmap_cli.store.tables import GradeAttempt

    with store.session() as s:
        query = select(GradeAttempt).where(GradeAttempt.learner == store.learner).order_by(GradeAttempt.id)
        if lab_id:
            query = query.where(GradeAttempt.lab_id == lab_id)
        return list(s.exec(query))


def _progress(attempts) -> tuple[dict[str, float], int]:
    """(best points per passed part, number of attempts) from attempt rows (labs/passing.py)."""
    from roadmap_cli.labs.passing import passed_parts

    attempts = list(attempts)
    return passed_parts((getattr(a, "outcome", None), a.parts) for a in attempts), len(attempts)


def _progress_by_lab(store) -> dict[str, tuple[dict[str, float], int]]:
    """_progress for every lab with two small SQL reads (no ORM rows): only
    attempts that scored can have passed a part, so only their JSON is parsed."""
    import sqlalchemy as sa

    from roadmap_cli.labs.passing import passing_attempts_sql

    out: dict[str, tuple[dict[str, float], int]] = {}
    with store.connection() as conn:
        mine = {"learner": store.learner}
        counts = dict(
            conn.execute(
                sa.text("SELECT lab_id, count(*) FROM grade_attempts WHERE learner = :learner GROUP BY lab_id"), mine
            ).all()
        )
        scored = conn.execute(
            sa.text(passing_attempts_sql("lab_id, parts, outcome", where="learner = :learner")), mine
        ).all()
    for lab_id, n in counts.items():
        best, _ = _progress(row for row in scored if row.lab_id == lab_id)
        out[lab_id] = (best, n)
    return out


def _summary(
    spec: LabSpec,
    best: dict[str, float],
    n_attempts: int,
    has_workspace: bool,
    cuda: Optional[bool],
    lang: Optional[str] = None,
) -> dict:
    """State from every attempt, by parts (labs/passing.py: the one meaning of "passed").

    "passed" needs every part, the GPU ones included; when only the parts
    that run without a GPU passed, the state says so ("passed-on-cpu"),
    whatever machine asks. The score counts the parts gradable here.
    """
    from roadmap_cli.labs.passing import lab_verdict

    verdict = lab_verdict(spec.parts, best, cuda=cuda, n_attempts=n_attempts, has_workspace=has_workspace)
    needs_cuda = any(p.needs_cuda for p in spec.parts)
    row = {
        "id": spec.id,
        "title": spec.title.model_dump(),
        "stage": spec.stage,
        "state": verdict["state"],
        "best_score": verdict["best_score"],
        "max_score": verdict["max_score"],
        "gradable_here": (not needs_cuda) or cuda,
        "attempts": n_attempts,
        "parts_not_gradable_here": [p.id for p in spec.parts if cuda is False and p.needs_cuda],
        "gpu_parts_open": verdict["gpu_parts_open"],
        "parts_open": verdict["parts_open"],
        "state_text": verdict["state_text"],
    }
    if lang:
        row["title_text"] = spec.title.get(lang)
    return row


def _summaries(store, cuda: Optional[bool], lang: Optional[str] = None) -> list[dict]:
    progress = _progress_by_lab(store)
    recorded = {lab for lab, _ in workspaces(store)}
    rows = []
    for spec in load_all()[0]:
        best, n = progress.get(spec.id, ({}, 0))
        rows.append(_summary(spec, best, n, spec.id in recorded, cuda, lang))
    return rows


def lab_summaries(store) -> list[dict]:
    """For `roadmap status`: id, title {en, zh}, stage, state, best_score,
    max_score, gradable_here (True/False, None when unknown without probing
    the GPU). Reads lab.yaml files and the database only."""
    from roadmap_cli.labs.device import nvidia_smi_present

    return _summaries(store, None if nvidia_smi_present() else False)


def lab_list(store, lang: str) -> dict:
    from roadmap_cli.labs.device import detect_device

    device = detect_device()
    broken = load_all()[1]
    return {
        "device": device.name,
        "cuda": device.cuda,
        "labs": _summaries(store, device.cuda, lang),
        "invalid": {lab: [exc.message, *exc.details] for lab, exc in broken.items()},
    }


def lab_status(store, lab_id: Optional[str], cwd: Path, lang: str) -> dict:
    """Attempt history of one lab (or of every lab with attempts)."""
    from roadmap_cli.labs import hints
    from roadmap_cli.labs.device import detect_device

    if lab_id is None:
        here = workspace_at(store, cwd)
        lab_id = here[0] if here else None
    specs = [find_lab(lab_id)] if lab_id else load_all()[0]
    cuda = detect_device().cuda
    out = []
    for spec in specs:
        attempts = _attempt_rows(store, spec.id)
        recorded = workspaces(store, spec.id)
        if lab_id is None and not attempts and not recorded:
            continue
        summary = _summary(spec, *_progress(attempts), bool(recorded), cuda, lang)
        summary["workspace"] = str(recorded[0][1]) if recorded else None
        summary["history"] = [_attempt_dict(a, n) for n, a in reversed(list(enumerate(attempts, 1)))]
        summary["hints_seen"] = len(hints.seen_indexes(store, spec.id))
        summary["hints_total"] = len(spec.hints)
        out.append(summary)
    return {"labs": out}


def _attempt_dict(a, number: Optional[int] = None) -> dict:
    from roadmap_cli.labs.history import outcome_fields

    parts = json.loads(a.parts or "[]")
    return {
        "id": a.id,
        "number": number,
        "started_at": a.started_at,
        **outcome_fields(a.outcome, parts),
        "score": a.score,
        "max_score": a.max_score,
        "duration_s": a.duration_s,
        "parts": parts,
        "perf": json.loads(a.perf or "[]"),
        "device": a.device,
        "device_capability": a.device_capability,
        "torch_version": a.torch_version,
        "triton_version": a.triton_version,
        "interpret_mode": a.interpret_mode,
        "commit_sha": a.commit_sha,
        "dirty": a.dirty,
        "grader_sha256": a.grader_sha256,
        "message": a.message,
        "sandbox": getattr(a, "sandbox", None),
    }


# ---------------------------------------------------------------- hints, solution


def next_hint(store, lab_id: str, lang: str, part: Optional[str] = None) -> dict:
    """The next unseen hint for `part` or the part that failed last (labs/hints.py)."""
    from roadmap_cli.labs import hints

    return hints.next_hint(store, lab_id, lang, part)


def solution(store, lab_id: str) -> dict:
    """The reference solution's files, only once every part gradable here has passed."""
    from roadmap_cli.labs.device import detect_device

    spec = find_lab(lab_id)
    cuda = detect_device().cuda
    # Only grades run here unlock the solution: an attempt that came in through
    # `roadmap import` is a claim, not a grade (it is marked imported).
    graded_here = [a for a in _attempt_rows(store, spec.id) if not getattr(a, "imported", False)]
    summary = _summary(spec, *_progress(graded_here), False, cuda)
    if summary["state"] != "passed" and not (summary["state"] == "passed-on-cpu" and not cuda):
        raise UserError(
            f"the solution of {spec.id} is shown once the lab has passed "
            f"(best {summary['best_score']:g}/{summary['max_score']:g}); keep going: `roadmap lab hint {spec.id}`"
        )
    from roadmap_cli.labs.starter_build import solution_text

    files = {}
    for rel, src in spec.solution_sources().items():
        text = solution_text(src.read_text(encoding="utf-8", errors="replace"), rel)  # no markers
        given = spec.starter_dir / rel
        if given.is_file() and given.read_text(encoding="utf-8", errors="replace") == text:
            continue  # given code (prepare_data.py, ...): the learner has it already
        files[rel] = text
    return {"lab": spec.id, "files": files}


def show(lab_id: str, lang: str = "en") -> dict:
    """The handout, in `lang` where the lab has a translation (README.<lang>.md)."""
    spec = find_lab(lab_id)
    translated = spec.root / f"README.{lang}.md"
    readme = translated if lang != "en" and translated.is_file() else spec.readme
    return {
        "lab": spec.id,
        "title": spec.title.model_dump(),
        "summary": spec.summary.model_dump(),
        "stage": spec.stage,
        "readme": readme.read_text(encoding="utf-8"),
        "path": str(readme),
        "translated": readme != spec.readme,
    }


def lab_path(store, home: Path, lab_id: str) -> Path:
    if lab_id not in lab_ids():
        raise NotFoundError("lab", lab_id, lab_ids(), hint="see `roadmap lab list`")
    recorded = workspaces(store, lab_id)
    if not recorded:
        raise UserError(f"no workspace for {lab_id} yet: run `roadmap lab start {lab_id}`")
    path = recorded[0][1]
    if not path.is_dir():  # `cd $(roadmap lab path ID)` would fail with a less helpful message
        raise UserError(f"workspace {path} is gone: run `{start_command(home, lab_id, path)}`")
    return path
