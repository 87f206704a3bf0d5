"""Benchmark: `roadmap status` on a busy database vs the bare import baseline.

Seeds a fresh home directly with 10,000 papers, 5,000 cadence entries and
1,000 grade attempts, then times, alternating in the same run:
  baseline: python -c "import sqlmodel, typer, rich"
  status:   python -m roadmap_cli status   (output discarded)
and prints the median of each and the ratio. Budget: ratio <= 1.3.

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
            papers.append({
                "title": f"Paper {i}: on attention and kernels", "title_key": f"paper {i} on attention and kernels",
                "authors": "A. Author and B. Author", "year": 2015 + i % 11, "arxiv_id": f"{2000 + i % 600:04d}.{i:05d}",
                "arxiv_version": None, "doi": None, "url": None, "stage": 1 + i % 10, "status": status,
                "read_on": day if status in ("read", "reproduced") else None, "added_on": day,
                "rating": None, "notes": None, "bibtex_key": None,
            })
        conn.execute(sa.text(
            "INSERT INTO papers (title, title_key, authors, year, arxiv_id, arxiv_version, doi, url, stage, status, "
            "read_on, added_on, rating, notes, bibtex_key) VALUES (:title, :title_key, :authors, :year, :arxiv_id, "
            ":arxiv_version, :doi, :url, :stage, :status, :read_on, :added_on, :rating, :notes, :bibtex_key)"), papers)
        kinds = ["reproduction", "experiment", "benchmark", "report", "blog", "oss", "workshop-paper", "hours"]
        entries = []
        for i in range(5_000):
            kind = rng.choice(kinds)
            entries.append({"kind": kind, "title": None if kind == "hours" else f"entry {i}",
                            "on_date": (today - timedelta(days=rng.randrange(730))).isoformat(),
                            "hours": rng.choice([1.0, 1.5, 2.0, 2.5]) if kind == "hours" else None,
                            "created_at": "2026-01-01T00:00:00+00:00"})
        conn.execute(sa.text("INSERT INTO cadence_entries (kind, title, on_date, hours, created_at) "
                             "VALUES (:kind, :title, :on_date, :hours, :created_at)"), entries)
        attempts = []
        for i in range(1_000):
            attempts.append({"lab_id": rng.choice(["cuda-matmul", "minigpt", "paged-kv-cache", "flash-attention"]),
                             "started_at": "2026-06-01T00:00:00+00:00", "duration_s": 30.0,
                             "outcome": rng.choice(["passed", "failed"]), "score": rng.randrange(0, 100),
                             "max_score": 100.0, "parts": json.dumps([]), "perf": json.dumps([]), "device": "cpu",
                             "interpret_mode": True, "workspace": f"/tmp/ws{i}", "grader_sha256": "0" * 64})
        conn.execute(sa.text(
            "INSERT INTO grade_attempts (lab_id, started_at, duration_s, outcome, score, max_score, parts, perf, "
            "device, interpret_mode, workspace, grader_sha256) VALUES (:lab_id, :started_at, :duration_s, :outcome, "
            ":score, :max_score, :parts, :perf, :device, :interpret_mode, :workspace, :grader_sha256)"), attempts)
        for table in ("papers", "cadence_entries", "grade_attempts"):  # the learner `status` runs as (migration 5)
            conn.execute(sa.text(f"UPDATE {table} SET learner = :me"), {"me": store.learner})
    store.engine.dispose()


def timed(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{proc.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="roadmap-bench-"))
    print(f"seeding {home} with 10,000 papers, 5,000 cadence entries, 1,000 grade attempts…")
    seed(home)
    env = dict(os.environ, ROADMAP_HOME=str(home))
    baseline_cmd = [sys.executable, "-c", "import sqlmodel, typer, rich"]
    status_cmd = [sys.executable, "-m", "roadmap_cli", "status"]
    timed(status_cmd, env)  # warm the curriculum cache and the OS page cache
    timed(baseline_cmd, env)
    base, stat = [], []
    for _ in range(args.runs):  # alternate so drift hits both equally
        base.append(timed(baseline_cmd, env))
        stat.append(timed(status_cmd, env))
    b, s = statistics.median(base), statistics.median(stat)
    ratio = s / b
    print(f"baseline  import sqlmodel, typer, rich : median {b * 1000:7.1f} ms  (min {min(base) * 1000:.1f})")
    print(f"roadmap status (busy database)        : median {s * 1000:7.1f} ms  (min {min(stat) * 1000:.1f})")
    print(f"ratio status / baseline = {ratio:.2f}  (budget {BUDGET})  -> {'OK' if ratio <= BUDGET else 'OVER BUDGET'}")
    sys.exit(0 if ratio <= BUDGET else 1)


if __name__ == "__main__":
    main()
