"""The far side of `roadmap grade --on NAME`: what `roadmap grade --events` runs on the remote.

The far agent (agent.py, daemon.py) runs `python -m roadmap_cli.grading.remote.far` from the managed venv
of this build: the same engine, pre-check, sandbox and OS wall as a local grade, with each channel event
printed as a JSON line and the run itself last, signed (HMAC-SHA256 with the remote's key, over the run
and a fresh nonce of this grade). The near side (near.py) records the attempt.

What is not promised: the far machine's owner (root there) can sign anything
with the key; the signature keeps the learner's code that runs there (behind
the OS wall, which hides the key) and the network path from forging a pass.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
from dataclasses import asdict
from pathlib import Path
from typing import Optional

from roadmap_cli.errors import UserError


def events_grade(
    lab_id: str, workspace: Path, *, part: Optional[str], timeout: Optional[float], key_path: Path, nonce: str
) -> int:
    """Grade `workspace` with the engine (pre-check, GradeJob: manifest check, sandbox, OS wall), print each
    channel event as a JSON line, then the run signed with the key. Records nothing here: the near side does."""
    import sys

    from roadmap_cli.grading import precheck
    from roadmap_cli.grading.runner import GradeJob
    from roadmap_cli.labs.spec import find_lab

    def interrupt(signum, frame):  # the agent's stop: stopped as interrupted, the supervisor kills the tree
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)

    def emit(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    from roadmap_cli.grading import prestart

    try:
        key = bytes.fromhex(key_path.read_text().strip())
    except (OSError, ValueError) as exc:
        prestart.discard()
        raise UserError(f"no usable result key at {key_path}: {exc}") from None
    # A grader events_main started (before this module's imports) for this very lab and workspace,
    # pre-checked then; kept when the lab's plan is its validated spec.
    early = prestart.take(lab_id, part=part, timeout=timeout, workspace=workspace)
    try:
        spec = find_lab(lab_id)
        job = prestart.validated(early, spec) if early is not None else None
        problem = None if job is not None else precheck.check_workspace(workspace)
        if job is None:
            device = early.device if early is not None else None
            job = GradeJob(spec, workspace, parts=[part] if part else None, timeout=timeout, device=device)
    except BaseException:
        if early is not None:
            early.abort()
        raise
    emit({"event": "remote-device", "cuda": job.device.cuda, "name": job.device.name})
    if problem is not None:
        run = precheck.failed_run(job, problem)
    else:
        if job.proc is None:
            job.start()
        try:
            emit({"event": "started"})
            run = job.finish(emit)
        except BaseException:
            job.abort()
            raise
    emit(signed_result(key, nonce, run, problem))
    return run.exit_code


def signed_result(key: bytes, nonce: str, run, problem) -> dict:
    """The last line of a far grade: the run (and its pre-check problem), this grade's nonce and the far
    versions, signed with the remote's key (HMAC-SHA256)."""
    import sys

    from roadmap_cli import __version__

    body = json.dumps(
        {
            "nonce": nonce,
            "run": asdict(run),
            "precheck": asdict(problem) if problem else None,
            "roadmap": __version__,
            "python": sys.version.split()[0],
        },
        sort_keys=True,
    )
    return {"signed": body, "sig": hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}


def events_main(argv: list[str]) -> None:
    """`python -m roadmap_cli.grading.remote.far LAB [--part P] [--timeout S] --events-workspace W
    --events-key K --events-nonce N`: what the far agent runs. The same as `roadmap grade ... --events`, with
    the grader started first, from the lab's plan, before typer, rich and pydantic are imported
    (grading/prestart.py): the learner waits for that import on every grade --on otherwise. Anything this
    reader does not expect goes through the command line as before, which reports it."""
    from roadmap_cli.grading.options import FAR_SIDE, read

    opts = read(argv, accept=FAR_SIDE)  # grade's own option table (grading/options.py), as the CLI declares it
    if (
        opts is None
        or opts["lab_id"] is None
        or not (opts["events_workspace"] and opts["events_key"] and opts["events_nonce"])
    ):
        import sys

        # The command line says what is wrong, in one line (this process becomes it: same pid, same pipes).
        os.execv(sys.executable, [sys.executable, "-m", "roadmap_cli", "grade", *argv, "--events"])
    lab_id, timeout = opts["lab_id"], opts["timeout"]
    from roadmap_cli.grading import prestart

    workspace = Path(opts["events_workspace"])
    prestart.start_job(lab_id, workspace, part=opts.get("part"), timeout=timeout)
    from roadmap_cli.errors import RoadmapError

    try:
        code = events_grade(
            lab_id,
            workspace,
            part=opts.get("part"),
            timeout=timeout,
            key_path=Path(opts["events_key"]),
            nonce=opts["events_nonce"],
        )
    except RoadmapError as exc:  # one line on stderr, as the command line would say it
        import sys

        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(int(getattr(exc, "exit_code", 1))) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    raise SystemExit(code)


if __name__ == "__main__":
    import sys

    events_main(sys.argv[1:])
