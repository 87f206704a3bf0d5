"""The cohort's grading queue: submit, worker, submissions (grading/queue.py)."""

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of text.")]


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)
    app.command("worker")(worker)
    app.command("submissions")(submissions)


def _wait(seconds) -> str:
    if seconds is None:
        return "-"
    seconds = float(seconds)
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def submit(
    lab_id: Annotated[Optional[str], typer.Argument(help="Lab id (default: the workspace you are in).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Send the workspace's files to the cohort's GPU box: a job in the queue on the cohort's PostgreSQL.

    The files git tracks plus the untracked ones it does not ignore (never .git), at most 20 MB. A worker (`roadmap worker`) grades it and records the attempt as yours; `roadmap submissions` follows it."""
    from roadmap_cli.cli.workdir import current_dir
    from roadmap_cli.grading.queue import submit as do_submit
    from roadmap_cli.formats.output import emit

    data = do_submit(context.current().store(), lab_id, current_dir())

    def render(console):
        ahead = data["position"] - 1
        console.print(
            f"Submitted {data['lab']} as job {data['job']} (submission {data['submission']}, "
            f"{data['file_count']} files, {data['size_bytes'] / 1e3:.0f} kB): position {data['position']} "
            f"in the queue ({ahead} ahead). Follow it: `roadmap submissions`.",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    emit("submit", data, as_json=as_json, render=render)


def worker(
    labs: Annotated[
        Optional[str], typer.Option("--labs", help="Grade only these labs (comma-separated ids); default: every lab.")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Grades at once.")] = 1,
    allow_weak_sandbox: Annotated[
        bool,
        typer.Option(
            "--allow-weak-sandbox",
            help="Start even without the OS-level sandbox (bubblewrap): learner code is then "
            "held by the in-process sandbox only.",
        ),
    ] = False,
    heartbeat: Annotated[float, typer.Option("--heartbeat", help="Seconds between this worker's heartbeats.")] = 10.0,
    stalled_after: Annotated[
        float,
        typer.Option(
            "--stalled-after",
            help="A worker silent this many seconds is taken for dead: its jobs go back to the queue.",
        ),
    ] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line for each event.")] = False,
) -> None:
    """Grade the cohort's submissions on this machine (the GPU box) until Ctrl-C.

    Runs as the cohort's instructor (DATABASE_URL of the database's owner): each attempt is recorded for the learner who submitted it, with this machine's device. Ctrl-C cancels the grades in progress; their jobs go back to the queue."""
    import json
    import sys

    from roadmap_cli.grading.queue import Worker, WorkerOptions, check_worker_can_start
    from roadmap_cli.formats.output import console

    lab_list = [lab.strip() for lab in labs.split(",") if lab.strip()] if labs is not None else None
    if lab_list is not None and not lab_list:
        from roadmap_cli.errors import UserError

        raise UserError("--labs names no lab: give comma-separated lab ids (see `roadmap lab list`)")
    options = WorkerOptions(
        labs=lab_list,
        concurrency=concurrency,
        allow_weak_sandbox=allow_weak_sandbox,
        heartbeat_s=heartbeat,
        stalled_after_s=stalled_after,
    )
    store = context.current().store()
    sandbox, why = check_worker_can_start(store, options)

    def on_event(event: dict) -> None:
        if as_json:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
            return
        kind = event["event"]
        if kind == "ready":
            line = (
                f"Worker {event['worker']} on {event['device']} (sandbox {sandbox}"
                f"{': ' + why if why else ''}), {event['concurrency']} at once, queues "
                f"{', '.join(event['queues']) if event['queues'] else 'every lab'}. Ctrl-C stops."
            )
        elif kind == "start":
            line = f"grading submission {event['submission']} of {event['learner']} ({event['lab']})"
        elif kind == "graded":
            again = "" if event["recorded"] else " (already recorded by an earlier run: not recorded twice)"
            line = (
                f"submission {event['submission']} of {event['learner']}: {event['outcome']} "
                f"{event['score']:g}/{event['max_score']:g} in {event['seconds']:.1f} s, "
                f"attempt #{event['attempt_number']} of {event['lab']}{again}"
            )
        elif kind == "not-graded":
            line = (
                f"submission {event['submission']} of {event['learner']} could not be graded (nothing recorded): "
                f"{event['message']}"
            )
        elif kind == "rescued":
            line = f"job {event['job']} (submission {event['submission']}) of a silent worker: back in the queue"
        elif kind == "stopping":
            line = "stopping: grades in progress are cancelled and go back to the queue"
        else:
            line = str(event)
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    result = Worker(store, options, on_event).run()
    if not as_json:
        console.print(f"Worker stopped after recording {result['graded']} attempt(s).", markup=False)


def submissions(
    everyone: Annotated[bool, typer.Option("--all", help="Every learner's submissions (the instructor).")] = False,
    limit: Annotated[int, typer.Option("--limit", help="At most this many, newest first.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Your submissions: queued (with the position), running, done (the grade's outcome: passed, failed, ...)
    or not graded (the worker could not grade it; nothing recorded), with the wait time."""
    from roadmap_cli.grading.queue import submissions as read
    from roadmap_cli.formats.output import emit

    if limit < 1:
        from roadmap_cli.errors import UserError

        raise UserError(f"--limit must be at least 1 (got {limit})")
    data = read(context.current().store(), everyone=everyone, limit=limit)

    def render(console):
        if not data["submissions"]:
            console.print(
                "No submissions yet: `roadmap submit` in a lab workspace."
                if data["queue_ready"]
                else "The cohort's grading queue is not set up yet (the instructor's first `roadmap worker` makes it)."
            )
            return
        c = data["counts"]
        console.print(
            f"queued {c['queued']}, running {c['running']}, done {c['done']}, not graded {c['not-graded']}",
            markup=False,
            highlight=False,
        )
        for s in data["submissions"]:
            who = f" {s['learner']}" if data["learner"] is None else ""
            if s["status"] == "queued":
                state = f"queued, position {s['position']}, waiting {_wait(s['wait_s'])}"
            elif s["status"] == "running":
                state = f"running on {s['worker']} (waited {_wait(s['wait_s'])}, try {s['tries']})"
            elif s["status"] == "done":
                state = (
                    f"done: {s['outcome']} {s['score']:g}/{s['max_score']:g} on {s['device']} "
                    f"(waited {_wait(s['wait_s'])}, graded in {_wait(s['grade_s'])}, attempt #{s['attempt_number']})"
                )
            else:  # "failed" is a grade that ran and did not pass; this one could not run at all
                state = f"not graded (the worker could not grade it): {s['message']}"
            console.print(
                f"#{s['submission']}{who} {s['lab']} {s['submitted_at']}  {state}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )

    emit("submissions", data, as_json=as_json, render=render)
