"""A writer process for tests/test_store_postgres.py (and bench/bench_cohort.py).

pg_writer.py N            N `roadmap log hours 1` commands in this process, one JSON line each:
                          {"code": exit code, "stderr": what it printed}; "ok" after the first
pg_writer.py N mixed K    N rounds of a check, a grade record, a paper log and an hours entry
                          for $ROADMAP_LEARNER through the services (K: this writer's number)
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time


def commands(n: int) -> None:
    from roadmap_cli import context
    from roadmap_cli.cli import main

    for i in range(n):
        err = io.StringIO()
        code = 0
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            context.reset()
            try:
                main(["log", "hours", "1"])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException as exc:  # noqa: BLE001 - reported, the test fails on it
                import traceback

                err.write("Traceback (uncaught)\n" + "".join(traceback.format_exception(exc)))
                code = -1
        if i == 0:
            print("ok" if code == 0 else f"first command failed: {err.getvalue()}", flush=True)
        else:
            print(json.dumps({"code": code, "stderr": err.getvalue()}), flush=True)
        time.sleep(0.02)


def fake_run(lab, n: int, i: int):
    from types import SimpleNamespace

    part = lab.parts[0]
    parts = [
        SimpleNamespace(
            id=part.id,
            points=float(part.points),
            max_points=float(part.points),
            status="passed",
            tests_passed=1,
            tests_total=1,
        )
    ]
    tests = [
        SimpleNamespace(
            nodeid=f"tests/test_x.py::test_{n}_{i}", part=part.id, outcome="passed", duration_s=0.01, message=None
        )
    ]
    return SimpleNamespace(
        started_at="2026-02-01T10:00:00+00:00",
        duration_s=1.0,
        outcome="passed",
        score=float(part.points),
        max_score=float(part.points),
        parts=parts,
        perf=[],
        device="cpu",
        device_capability=None,
        torch_version=None,
        triton_version=None,
        interpret_mode=True,
        workspace=f"/tmp/ws/{n}",
        grader_sha256="0" * 64,
        message=None,
        sandbox=None,
        tests=tests,
    )


def mixed(n: int, writer: int) -> None:
    from datetime import date

    from roadmap_cli import context
    from roadmap_cli.grading.grade import record_attempt
    from roadmap_cli.labs.spec import find_lab
    from roadmap_cli.tracker.progress import check
    from roadmap_cli.research.entries import EntryInput, log_entry
    from roadmap_cli.research.papers import PaperInput, log_paper

    ctx = context.current()
    store, curriculum = ctx.store(), ctx.curriculum()
    explain = [c.id for s in curriculum.stages for c in s.checkpoints if c.kind == "explain"][:3]
    lab = find_lab("minigpt")
    today = date.today()
    for i in range(n):
        check(store, curriculum, explain[i % len(explain)])  # the same few checkpoints from every writer
        record_attempt(store, lab, fake_run(lab, writer, i), None, None)
        log_paper(store, PaperInput(title=f"Paper {writer}-{i} on scaling"), today=today)
        log_entry(store, EntryInput(kind="hours", on_date=today, hours=0.5), today=today)
    print("done", flush=True)


if __name__ == "__main__":
    count = int(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "mixed":
        mixed(count, int(sys.argv[3]))
    else:
        commands(count)
