"""Start `roadmap grade`'s grader before the command line is parsed.

Parsing the command line is not free: typer builds a validator per option
(pydantic), and the command's modules import rich. The grader (pytest, then
the learner's code) needs none of that, so for the plain forms of the
command the grader is started first and the parse runs while pytest starts
(issue 13: the engine's own time comes out of the learner's wait).

This is only an earlier start, never a second way to grade: `grading.grade`
still parses, resolves and pre-checks as always, and takes the started job
only when it is the very job it would have started itself (same lab plan as
the validated spec, workspace, parts, time limit and focus; `claim`). The job
is started from the lab's plan (labs/plan.py: lab.yaml read without pydantic),
so pytest starts before the spec's models are even imported. Anything else (an option
this reader does not know, --help, --watch, a lab id that does not resolve,
a workspace with a pre-check problem) starts nothing here, and the normal
path reports it. A job nobody claimed is killed (`discard`) before the
command returns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

_started: Optional[object] = None  # the runner.GradeJob started here, until claimed or discarded

_FLAGS = {"-x": "first_failure", "--first-failure": "first_failure", "-v": "verbose", "--verbose": "verbose"}
_VALUED = {"--part", "-k", "--test", "--timeout", "--on"}


def _read(args: list[str]) -> Optional[dict]:
    """The options of `roadmap grade ARGS`, or None for anything but the plain forms."""
    out: dict = {
        "lab_id": None,
        "part": None,
        "keyword": None,
        "tests": [],
        "timeout": None,
        "first_failure": False,
        "verbose": False,
        "on": None,
    }
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if arg in ("--json",):
            i += 1
            continue
        if arg in _FLAGS:
            out[_FLAGS[arg]] = True
            i += 1
            continue
        if name in _VALUED:
            if not eq:
                if i + 1 >= len(args):
                    return None
                value = args[i + 1]
                i += 1
            i += 1
            if name == "--part":
                out["part"] = value
            elif name == "-k":
                out["keyword"] = value
            elif name == "--test":
                out["tests"].append(value)
            elif name == "--on":
                out["on"] = value
            else:
                try:
                    out["timeout"] = float(value)
                except ValueError:
                    return None
                if not out["timeout"] >= 1:  # typer's min=1 (and not NaN)
                    return None
            continue
        if arg.startswith("-") or out["lab_id"] is not None:
            return None  # --watch, --help, -xv, --, an unknown option, a second id: typer's business
        out["lab_id"] = arg
        i += 1
    return out


def start(args: list[str]) -> bool:
    """Start the grader of `roadmap grade ARGS` if this is a plain grade of a
    workspace that passes the pre-check; True when one was started. Never
    raises and never prints: whatever goes wrong, the normal path says it."""
    if _started is not None:
        return True  # the console script (roadmap_cli/entry.py) started it already
    options = _read(args)
    if options is None or options["on"] is not None or os.environ.get("_ROADMAP_COMPLETE"):
        return False  # `--on NAME`: grading/near.start_early_args opens the ssh session instead
    try:
        from roadmap_cli.grading.focus import Focus
        from roadmap_cli.labs.service import locate_workspace, workspaces_fast
        from roadmap_cli.paths import resolve_home

        rows = workspaces_fast(resolve_home(None))
        if rows is None:
            return False  # another database, or none yet: the store is needed first
        lab_id, path = locate_workspace(None, options["lab_id"], Path.cwd(), rows)
        focus = Focus(
            keyword=options["keyword"],
            tests=options["tests"],
            first_failure=options["first_failure"],
            verbose=options["verbose"],
        )
    except Exception:  # noqa: BLE001 - the normal path reports every problem properly
        return False
    return start_job(lab_id, path, part=options["part"], timeout=options["timeout"], focus=focus)


def start_job(
    lab_id: str, path: Path, *, part: Optional[str] = None, timeout: Optional[float] = None, focus=None
) -> bool:
    """Start the grader of lab `lab_id` on the workspace `path` (pre-checked first); True when one was
    started. Also the far side of `grade --on` (grading/remote/far.events_main), which knows its lab and
    workspace from the near side. Never raises: whatever goes wrong, the normal path says it."""
    global _started
    try:
        from roadmap_cli.grading import precheck
        from roadmap_cli.grading.runner import GradeJob
        from roadmap_cli.labs.plan import labs_root, read_plan

        # The lab as a plan (labs/plan.py), not the validated spec: pytest starts
        # ~0.2 s sooner, and claim() takes the job only if the spec agrees.
        spec = read_plan(labs_root() / lab_id)
        if spec is None or spec.id != lab_id or not path.is_dir() or precheck.check_workspace(path) is not None:
            return False
        if part:
            spec.part(part)
        job = GradeJob(spec, path, parts=[part] if part else None, timeout=timeout, focus=focus)
        job.start()
    except Exception:  # noqa: BLE001 - the normal path reports every problem properly
        return False
    _started = job
    return True


def claim(job) -> object:
    """The started job if it is `job` (an unstarted runner.GradeJob built by
    the normal path from the validated spec), else `job` itself, the started
    one being killed."""
    global _started
    started, _started = _started, None
    if started is None:
        return job
    if _same(started, job):
        started.cancel_event = job.cancel_event  # the caller's (roadmap watch's) stop button
        started.spec = job.spec  # the validated spec from here on (results, hints, checkpoints)
        return started
    started.abort()
    return job


def prechecked(path: Path) -> bool:
    """True when the started job is for `path`: start() pre-checked it just before."""
    return _started is not None and _started.workspace == Path(path).resolve()


def started_device():
    """The device the started job detected (None when none was started): the
    normal path reuses it instead of asking the GPU driver a second time."""
    return getattr(_started, "device", None)


def discard() -> None:
    """Kill a started job nobody claimed (the command failed before grading)."""
    global _started
    started, _started = _started, None
    if started is not None:
        started.abort()


def _same(a, b) -> bool:
    from roadmap_cli.labs.plan import fingerprint

    return (
        fingerprint(a.spec) == fingerprint(b.spec)
        and a.workspace == b.workspace
        and a.selected == b.selected
        and a.timeout == b.timeout
        and a.focus == b.focus
        and a.stop_part_on_fail == b.stop_part_on_fail
        and a.extra_env == b.extra_env
        and a.device == b.device
    )
