"""Benchmark: cohort mode on PostgreSQL vs the same data on SQLite, same run.

Seeds a cohort of 50 learners x (46 checkpoints, 200 papers, 100 grade
attempts, plus a few cadence entries) into a SQLite home and into a database
on a throwaway PostgreSQL cluster (tests/pgcluster.py: initdb + pg_ctl from
the PostgreSQL 15 binaries, fsync and synchronous_commit ON, the server's
defaults), then, alternating the backends run by run:

  roadmap status          (as one learner; a fresh process each run)
  roadmap cohort status   (every learner)

and prints the medians and the ratios PostgreSQL / SQLite. Then writes per
second with 16 concurrent writer processes (4 per learner, each logging
entries through the service, one transaction per write) on each backend,
alternating, and their ratio.

    python bench/bench_cohort.py [--runs 5] [--writes 40]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # pgcluster.py

LEARNERS = 50
PAPERS = 200
ATTEMPTS = 100
ME = "learner07"


def seed(store) -> None:
    """The cohort's rows through Core inserts (the same on both backends)."""
    import sqlalchemy as sa

    from roadmap_cli.context import reset
    from roadmap_cli.labs.spec import load_all

    reset()
    from roadmap_cli.curriculum import load_curriculum
    from roadmap_cli.paths import default_curriculum_path

    curriculum = load_curriculum(default_curriculum_path())
    checkpoints = [cp.id for s in curriculum.stages for cp in s.checkpoints]
    labs = load_all()[0]
    rng = random.Random(11)
    today = date.today()
    now = "2026-01-01T00:00:00+00:00"
    with store.connection() as conn:
        for n in range(LEARNERS):
            who = f"learner{n:02d}"
            conn.execute(
                sa.text(
                    "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, learner) "
                    "VALUES (:c, :t, 'self', :w)"
                ),
                [{"c": c, "t": now, "w": who} for c in checkpoints],
            )
            papers = []
            for i in range(PAPERS):
                status = rng.choice(["to-read", "reading", "read", "reproduced"])
                day = (today - timedelta(days=rng.randrange(400))).isoformat()
                papers.append(
                    {
                        "title": f"Paper {i} of {who}",
                        "title_key": f"paper {i} of {who}",
                        "status": status,
                        "read_on": day if status in ("read", "reproduced") else None,
                        "added_on": day,
                        "stage": 1 + i % 10,
                        "learner": who,
                    }
                )
            conn.execute(
                sa.text(
                    "INSERT INTO papers (title, title_key, status, read_on, added_on, stage, learner) "
                    "VALUES (:title, :title_key, :status, :read_on, :added_on, :stage, :learner)"
                ),
                papers,
            )
            attempts = []
            for i in range(ATTEMPTS):
                lab = labs[i % len(labs)]
                parts = [
                    {
                        "id": p.id,
                        "points": float(p.points) if rng.random() < 0.6 else 0.0,
                        "max_points": float(p.points),
                        "status": rng.choice(["passed", "failed"]),
                        "tests_passed": 1,
                        "tests_total": 1,
                    }
                    for p in lab.parts
                ]
                perf = [
                    {
                        "test": "t",
                        "name": "x",
                        "value": 1.0,
                        "unit": "TFLOP/s",
                        "pct_of_baseline": round(rng.uniform(40, 120), 1),
                    }
                ]
                attempts.append(
                    {
                        "lab_id": lab.id,
                        "started_at": now,
                        "duration_s": 1.0,
                        "outcome": "passed",
                        "score": sum(p["points"] for p in parts),
                        "max_score": sum(p["max_points"] for p in parts),
                        "parts": json.dumps(parts),
                        "perf": json.dumps(perf),
                        "device": rng.choice(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "cpu"]),
                        "interpret_mode": False,
                        "workspace": f"/ws/{who}/{lab.id}",
                        "grader_sha256": "0" * 64,
                        "imported": False,
                        "learner": who,
                    }
                )
            conn.execute(
                sa.text(
                    "INSERT INTO grade_attempts (lab_id, started_at, duration_s, outcome, score, max_score, parts, perf, "
                    "device, interpret_mode, workspace, grader_sha256, imported, learner) VALUES (:lab_id, :started_at, "
                    ":duration_s, :outcome, :score, :max_score, :parts, :perf, :device, :interpret_mode, :workspace, "
                    ":grader_sha256, :imported, :learner)"
                ),
                attempts,
            )
            conn.execute(
                sa.text(
                    "INSERT INTO cadence_entries (kind, on_date, hours, created_at, learner) "
                    "VALUES ('hours', :d, 2.0, :t, :w)"
                ),
                [{"d": (today - timedelta(days=k)).isoformat(), "t": now, "w": who} for k in range(10)],
            )


def timed(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-1500:]}")
    return elapsed


def _writer(env: dict, writes: int, start_at: float) -> None:
    os.environ.update(env)
    from roadmap_cli import context
    from roadmap_cli.research.entries import EntryInput, log_entry

    context.reset()
    store = context.current().store()
    today = date.today()
    while time.time() < start_at:  # every writer starts at once
        time.sleep(0.005)
    for _ in range(writes):
        log_entry(store, EntryInput(kind="hours", on_date=today, hours=0.25), today=today)


def writes_per_second(env: dict, writes: int) -> float:
    import roadmap_cli.research.entries  # noqa: F401 - imported before the fork

    fork = multiprocessing.get_context("fork")
    start_at = time.time() + 1.0
    procs = [
        fork.Process(target=_writer, args=({**env, "ROADMAP_LEARNER": f"learner{n % 4:02d}"}, writes, start_at))
        for n in range(16)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer failed (exit {p.exitcode})")
    return 16 * writes / (time.time() - start_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--writes", type=int, default=40, help="writes per writer process (16 writers)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    from pgcluster import start_cluster

    from roadmap_cli.store import open_store

    tmp = Path(tempfile.mkdtemp(prefix="bench-cohort-"))
    cluster = start_cluster(fsync=True)
    try:
        lite_home, pg_home = tmp / "sqlite", tmp / "pg"
        lite_home.mkdir()
        pg_home.mkdir()
        pg_url = cluster.new_database("bench")
        os.environ.pop("DATABASE_URL", None)
        t0 = time.perf_counter()
        seed(open_store(lite_home))
        os.environ["DATABASE_URL"] = pg_url
        seed(open_store(pg_home))
        os.environ.pop("DATABASE_URL")
        print(
            f"seeded {LEARNERS} learners x ({PAPERS} papers, {ATTEMPTS} attempts, all checkpoints) on both "
            f"in {time.perf_counter() - t0:.1f} s; server: {cluster.version()}"
        )
        base = {**os.environ, "ROADMAP_LEARNER": ME, "OMP_NUM_THREADS": "1"}
        base.pop("DATABASE_URL", None)
        envs = {
            "sqlite": {**base, "ROADMAP_HOME": str(lite_home)},
            "postgresql": {**base, "ROADMAP_HOME": str(pg_home), "DATABASE_URL": pg_url},
        }
        roadmap = [sys.executable, "-m", "roadmap_cli"]
        for name in envs:  # warm: curriculum cache, page cache
            timed(roadmap + ["status"], envs[name])
            timed(roadmap + ["cohort", "status"], envs[name])
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.runs):
            for command in (["status"], ["cohort", "status"]):
                for name in ("sqlite", "postgresql"):
                    times.setdefault((" ".join(command), name), []).append(timed(roadmap + command, envs[name]))
        print(f"\nmedian of {args.runs} runs, a fresh process each (alternating backends):")
        for command in ("status", "cohort status"):
            lite = statistics.median(times[(command, "sqlite")])
            pg = statistics.median(times[(command, "postgresql")])
            print(
                f"  roadmap {command:<14} sqlite {lite:6.3f} s   postgresql {pg:6.3f} s   ratio pg/sqlite {pg / lite:5.2f}"
            )
        rates: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
        for _ in range(2):
            for name in ("sqlite", "postgresql"):
                rates[name].append(writes_per_second(envs[name], args.writes))
        lite, pg = max(rates["sqlite"]), max(rates["postgresql"])
        print(f"\n16 concurrent writers x {args.writes} writes (4 learners; best of 2, alternating):")
        print(f"  sqlite {lite:7.1f} writes/s   postgresql {pg:7.1f} writes/s   ratio pg/sqlite {pg / lite:5.2f}")
    finally:
        cluster.destroy()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
