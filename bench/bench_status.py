"""Benchmark: `roadmap status` on a fresh home and on a busy database vs the bare import baseline.

Seeds one home directly with 10,000 papers, 5,000 cadence entries and
1,000 grade attempts, and leaves another fresh (what a new learner has),
then times, alternating in the same run:
  baseline: python -c "import sqlmodel, typer, rich"
  status:   python -m roadmap_cli status   (output discarded), on each home
and prints the median of each and both ratios (wall and CPU seconds). Budget: each
ratio <= 1.3 in CPU seconds (the verdict: on a shared machine wall time moves with
other processes' load).

    python bench/bench_status.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

BUDGET = 1.3


def seed(home: Path) -> None:
    import sqlalchemy as sa

    from roadmap_cli.store import open_store

    rng = random.Random(7)
    store = open_store(home)
    today = date.today()
    statuses = ["to-read", "reading", "read", "reproduced"]
    with store.connection() as conn:
        papers = []
        for i in range(10_000):
            status = rng.choice(statuses)
            day = (today - timedelta(days=rng.randrange(730))).isoformat()
            papers.append(
                {
                    "title": f"Paper {i}: on attention and kernels",
                    "title_key": f"paper {i} on attention and kernels",
                    "authors": "A. Author and B. Author",
                    "year": 2015 + i % 11,
                    "arxiv_id": f"{2000 + i % 600:04d}.{i:05d}",
                    "arxiv_version": None,
                    "doi": None,
                    "url": None,
                    "stage": 1 + i % 10,
                    "status": status,
                    "read_on": day if status in ("read", "reproduced") else None,
                    "added_on": day,
                    "rating": None,
                    "notes": None,
                    "bibtex_key": None,
                }
            )
        conn.execute(
            sa.text(
                "INSERT INTO papers (title, title_key, authors, year, arxiv_id, arxiv_version, doi, url, stage, status, "
                "read_on, added_on, rating, notes, bibtex_key) VALUES (:title, :title_key, :authors, :year, :arxiv_id, "
                ":arxiv_version, :doi, :url, :stage, :status, :read_on, :added_on, :rating, :notes, :bibtex_key)"
            ),
            papers,
        )
        kinds = ["reproduction", "experiment", "benchmark", "report", "blog", "oss", "workshop-paper", "hours"]
        entries = []
        for i in range(5_000):
            kind = rng.choice(kinds)
            entries.append(
                {
                    "kind": kind,
                    "title": None if kind == "hours" else f"entry {i}",
                    "on_date": (today - timedelta(days=rng.randrange(730))).isoformat(),
                    "hours": rng.choice([1.0, 1.5, 2.0, 2.5]) if kind == "hours" else None,
                    "created_at": "2026-01-01T00:00:00+00:00",
                }
            )
        conn.execute(
            sa.text(
                "INSERT INTO cadence_entries (kind, title, on_date, hours, created_at) "
                "VALUES (:kind, :title, :on_date, :hours, :created_at)"
            ),
            entries,
        )
        attempts = []
        for i in range(1_000):
            attempts.append(
                {
                    "lab_id": rng.choice(["cuda-matmul", "minigpt", "paged-kv-cache", "flash-attention"]),
                    "started_at": "2026-06-01T00:00:00+00:00",
                    "duration_s": 30.0,
                    "outcome": rng.choice(["passed", "failed"]),
                    "score": rng.randrange(0, 100),
                    "max_score": 100.0,
                    "parts": json.dumps([]),
                    "perf": json.dumps([]),
                    "device": "cpu",
                    "interpret_mode": True,
                    "workspace": f"/tmp/ws{i}",
                    "grader_sha256": "0" * 64,
                }
            )
        conn.execute(
            sa.text(
                "INSERT INTO grade_attempts (lab_id, started_at, duration_s, outcome, score, max_score, parts, perf, "
                "device, interpret_mode, workspace, grader_sha256) VALUES (:lab_id, :started_at, :duration_s, :outcome, "
                ":score, :max_score, :parts, :perf, :device, :interpret_mode, :workspace, :grader_sha256)"
            ),
            attempts,
        )
        for table in ("papers", "cadence_entries", "grade_attempts"):  # the learner `status` runs as (migration 5)
            conn.execute(sa.text(f"UPDATE {table} SET learner = :me"), {"me": store.learner})
    store.engine.dispose()


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{proc.stderr.decode()[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="roadmap-bench-"))
    fresh = Path(tempfile.mkdtemp(prefix="roadmap-bench-fresh-"))
    print(f"seeding {home} with 10,000 papers, 5,000 cadence entries, 1,000 grade attempts…")
    seed(home)
    env = dict(os.environ, ROADMAP_HOME=str(home))
    fresh_env = dict(os.environ, ROADMAP_HOME=str(fresh))
    baseline_cmd = [sys.executable, "-c", "import sqlmodel, typer, rich"]
    status_cmd = [sys.executable, "-m", "roadmap_cli", "status"]
    timed(status_cmd, env)  # warm the curriculum and lab caches and the OS page cache
    timed(status_cmd, fresh_env)  # the fresh home's first status creates its database: not what is timed
    timed(baseline_cmd, env)
    base, busy, new = [], [], []
    for _ in range(args.runs):  # alternate so drift hits all three equally
        base.append(timed(baseline_cmd, env))
        busy.append(timed(status_cmd, env))
        new.append(timed(status_cmd, fresh_env))
    over = False

    def medians(times: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)

    b_wall, b_cpu = medians(base)
    print(f"baseline  import sqlmodel, typer, rich : median {b_wall * 1000:7.1f} ms wall, {b_cpu * 1000:7.1f} ms CPU")
    for label, times in (("roadmap status (fresh home)   ", new), ("roadmap status (busy database)", busy)):
        wall, cpu = medians(times)
        # The verdict is on CPU time: status is start-up work with no waits, and on a shared machine another
        # process's load moves wall time far more than it moves the CPU a command itself needs.
        ratio = cpu / b_cpu
        over |= ratio > BUDGET
        print(
            f"{label}  : median {wall * 1000:7.1f} ms wall, {cpu * 1000:7.1f} ms CPU  ratio wall "
            f"{wall / b_wall:.2f}, CPU {ratio:.2f}  (budget {BUDGET})  -> {'OK' if ratio <= BUDGET else 'OVER BUDGET'}"
        )
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
