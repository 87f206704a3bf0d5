"""Engine-side helpers of the learner sandbox (docs/architecture.md,
"Grading"): what no learner process may open, keeping the engine's memory
out of reach, handing the config over a pipe, voiding an attempt."""

from __future__ import annotations

import os

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from roadmap_cli.labs.spec import LabSpec


def forbidden_sources(spec: "LabSpec") -> list[str]:
    """What no learner process may open: every lab's solution/ folder and
    solution_files, and the project's kernels/ folder (kernel-lab references).

    Every lab is read as a plan (labs/plan.py: no pydantic), so listing them
    costs a grade ~50 ms instead of validating every spec; a lab.yaml that does
    not read still has its solution/ folder forbidden (the glob below)."""
    from roadmap_cli.labs.plan import all_plans, labs_root, project_root

    paths = {str(project_root() / "kernels")}
    for other in [spec, *all_plans()]:
        paths.add(str(other.solution_dir))
        paths.update(str(p) for p in other.solution_sources().values())
    paths.update(str(p / "solution") for p in labs_root().glob("*") if p.is_dir())
    return sorted(paths)


def not_dumpable() -> None:
    """The engine holds the results key: no other process of this user (the
    learner process, without capabilities) may read its memory or descriptors."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    except (OSError, AttributeError):
        pass


def write_and_close(fd: int, blob: bytes):
    """Write `blob` to the pipe `fd` and close it: here if it fits the pipe
    buffer, else on a thread (the reader may start later than we write)."""
    import threading

    def write() -> None:
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
        finally:
            os.close(fd)

    if len(blob) < 60_000:
        write()
        return None
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def void(run, reasons: list[str]) -> None:
    """The attempt does not count: no points, no passed part, outcome error."""
    text = "attempt void: " + "; ".join(dict.fromkeys(reasons))  # each reason once, in order
    run.outcome, run.score, run.message = "error", 0.0, text
    for part in run.parts:
        if part.status in ("passed", "failed", "skipped"):
            part.status, part.points = "failed", 0.0
            part.message = text if not part.message else f"{text}\n{part.message}"
