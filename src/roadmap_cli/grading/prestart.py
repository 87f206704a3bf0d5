"""Start `roadmap grade`'s grader before the command line is parsed.

Parsing the command line is not free: typer builds a validator per option
(pydantic), and the command's modules import rich. The grader (pytest, then
the learner's code) needs none of that, so for the plain forms of the
command the console script (roadmap_cli/entry.py, the fast path's one owner)
reads the command line with grade's own option table (grading/options.py),
resolves the lab and workspace, pre-checks it and starts the grader; the
parse runs while pytest starts (issue 13: the engine's own time comes out of
the learner's wait).

This is only an earlier start, never a second way to grade. The grade
command (`grading.grade`) `take`s the started job: the lab and workspace
resolved here are handed on, not resolved again. The job is started from
the lab's plan (labs/plan.py: lab.yaml read without pydantic), so pytest
starts before the spec's models are even imported; `validated` keeps it only
when the plan is the validated spec's (else the job is killed and the spec's
own one runs on the same workspace). Anything else (--help, --watch, a lab id
that does not resolve, a workspace with a pre-check problem) starts nothing
here, and the normal path reports it. A job nobody took is killed
(`discard`) before the command returns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

_started: Optional[object] = None  # the runner.GradeJob started here, until taken or discarded
_asked: tuple = ()  # the (part, timeout) it was started for


def start(read: dict) -> bool:
    """Start the grader of the grade `read` describes (grading/options.read of its command line) if it is
    a plain local grade of a workspace that passes the pre-check; True when one was started. Called by the
    console script only (roadmap_cli/entry.py). Never raises and never prints: whatever goes wrong, the
    normal path says it."""
    if _started is not None:
        return True
    if read["on"] is not None or os.environ.get("_ROADMAP_COMPLETE"):
        return False  # `--on NAME`: grading/remote/near.start_early_args opens the ssh session instead
    try:
        from roadmap_cli.grading.focus import Focus
        from roadmap_cli.labs.service import locate_workspace, workspaces_fast
        from roadmap_cli.paths import resolve_home

        rows = workspaces_fast(resolve_home(None))
        if rows is None:
            return False  # another database, or none yet: the store is needed first
        lab_id, path = locate_workspace(None, read["lab_id"], Path.cwd(), rows)
        focus = Focus(
            keyword=read["keyword"],
            tests=list(read["test"]),
            first_failure=read["first_failure"],
            verbose=read["verbose"],
        )
    except Exception:  # noqa: BLE001 - the normal path reports every problem properly
        return False
    return start_job(lab_id, path, part=read["part"], timeout=read["timeout"], focus=focus)


def start_job(
    lab_id: str, path: Path, *, part: Optional[str] = None, timeout: Optional[float] = None, focus=None
) -> bool:
    """Start the grader of lab `lab_id` on the workspace `path` (pre-checked first); True when one was
    started. Also the far side of `grade --on` (grading/remote/far.events_main), which knows its lab and
    workspace from the near side. Never raises: whatever goes wrong, the normal path says it."""
    global _started, _asked
    try:
        from roadmap_cli.grading import precheck
        from roadmap_cli.grading.runner import GradeJob
        from roadmap_cli.labs.plan import labs_root, read_plan

        # The lab as a plan (labs/plan.py), not the validated spec: pytest starts
        # ~0.2 s sooner, and validated() keeps the job only if the spec agrees.
        spec = read_plan(labs_root() / lab_id)
        if spec is None or spec.id != lab_id or not path.is_dir() or precheck.check_workspace(path) is not None:
            return False
        if part:
            spec.part(part)
        job = GradeJob(spec, path, parts=[part] if part else None, timeout=timeout, focus=focus)
        job.start()
    except Exception:  # noqa: BLE001 - the normal path reports every problem properly
        return False
    _started, _asked = job, (part, timeout)
    return True


def take(lab_id: Optional[str], *, part: Optional[str], timeout: Optional[float], focus=None, workspace=None):
    """The job started early, handed to the grade asking for it: its lab (`job.spec.id`, still the plan) and
    workspace (`job.workspace`, pre-checked when it started) are the grade's from here on, not resolved
    again. None when nothing was started, or when it is not this grade (another lab, workspace, part, time
    limit or focus: a caller other than the command line that started it); that one is killed."""
    global _started
    from roadmap_cli.grading.focus import Focus

    started, _started = _started, None
    if started is None:
        return None
    if (
        lab_id in (None, started.spec.id)
        and (workspace is None or Path(workspace).resolve() == started.workspace)
        and _asked == (part, timeout)
        and started.focus == (focus or Focus())
    ):
        return started
    started.abort()
    return None


def validated(job, spec):
    """`job` (taken) with the validated LabSpec `spec` in place of its plan, or None, the job killed, when
    the two differ in anything that shapes the grader (lab.yaml changed since it was read, or the plan
    misread it): the caller then starts the spec's own job on the same workspace."""
    from roadmap_cli.labs.plan import fingerprint

    if fingerprint(job.spec) != fingerprint(spec):
        job.abort()
        return None
    job.spec = spec  # the validated spec from here on (results, hints, checkpoints)
    return job


def discard() -> None:
    """Kill a started job nobody took (the command failed before grading)."""
    global _started
    started, _started = _started, None
    if started is not None:
        started.abort()
