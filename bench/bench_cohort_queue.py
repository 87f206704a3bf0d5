"""The cohort queue's throughput: 2 `roadmap worker`s vs one local grade loop of the same submissions, same run.

A throwaway PostgreSQL (tests/pgcluster.py) holds the cohort's database; the
fixture lab `adder` (tests/fixtures_labs) is graded on CPU. N submissions
(4 learners, alternating right and wrong `add`) are queued first; then

- the baseline: one machine grading them one after the other, each a fresh
  `roadmap grade` of a local workspace holding that submission's files (a
  SQLite home: what a learner without the queue runs);
- the queue: 2 worker processes (each `roadmap worker --concurrency 1`),
  timed from their start until every submission is recorded.

Prints both wall times, submissions per second and the ratio (queue speed-up
over the loop). On a 2-core machine the ceiling is about 2x; other load on
the machine lowers both sides alike, since they run in the same process tree.

    python bench/bench_cohort_queue.py [--submissions N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a + b + 1\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from pgcluster import start_cluster

    labs = REPO / "tests" / "fixtures_labs" / "labs"
    cluster = start_cluster()
    try:
        url = cluster.new_database("bench_queue")
        with tempfile.TemporaryDirectory(prefix="bench-queue-") as tmp:
            tmp_path = Path(tmp)
            base = dict(
                os.environ,
                ROADMAP_LABS_DIR=str(labs),
                ROADMAP_DEVICE="cpu",
                ROADMAP_DEV_UNLOCKED="1",
                ROADMAP_LANG="en",
            )
            base.pop("DATABASE_URL", None)

            def roadmap(*argv: str, env: dict, cwd: Path = tmp_path) -> None:
                proc = subprocess.run(
                    [sys.executable, "-m", "roadmap_cli", *argv],
                    cwd=cwd,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if proc.returncode not in (0, 1):
                    sys.exit(f"roadmap {' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")

            # Queue the submissions (the database's owner, acting as 4 learners of an unscoped cohort).
            learners = [f"learner{i}" for i in range(4)]
            cohort = dict(base, DATABASE_URL=url, ROADMAP_HOME=str(tmp_path / "cohort-home"))
            for name in learners:
                roadmap(
                    "lab",
                    "start",
                    "adder",
                    "--dir",
                    str(tmp_path / f"ws-{name}"),
                    env=dict(cohort, ROADMAP_LEARNER=name),
                )
            contents = []
            for k in range(args.submissions):
                name = learners[k % 4]
                text = RIGHT if k % 3 else WRONG
                contents.append(text)
                (tmp_path / f"ws-{name}" / "adder.py").write_text(text)
                roadmap("submit", "adder", env=dict(cohort, ROADMAP_LEARNER=name))

            # The baseline: one local grade after the other, same files.
            local = dict(base, ROADMAP_HOME=str(tmp_path / "local-home"))
            ws = tmp_path / "ws-local"
            roadmap("lab", "start", "adder", "--dir", str(ws), env=local)
            t0 = time.perf_counter()
            for text in contents:
                (ws / "adder.py").write_text(text)
                roadmap("grade", env=local, cwd=ws)
            loop_s = time.perf_counter() - t0

            # The queue: N workers from their start until every submission is recorded.
            import psycopg

            t0 = time.perf_counter()
            workers = [
                subprocess.Popen(
                    [sys.executable, "-m", "roadmap_cli", "worker", "--json"],
                    env=dict(cohort, ROADMAP_HOME=str(tmp_path / f"worker{i}")),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for i in range(args.workers)
            ]
            try:
                with psycopg.connect(
                    host="127.0.0.1",
                    port=cluster.port,
                    user="postgres",
                    password=_password(),
                    dbname=url.rsplit("/", 1)[1],
                    autocommit=True,
                ) as conn:
                    while True:
                        done = conn.execute(
                            "SELECT count(*) FROM roadmap_submissions WHERE attempt_id IS NOT NULL OR status = 'failed'"
                        ).fetchone()[0]
                        if done == args.submissions:
                            break
                        for w in workers:
                            if w.poll() is not None:
                                sys.exit(f"a worker stopped ({w.returncode}): {w.stderr.read()[-2000:]}")
                        time.sleep(0.1)
                    queue_s = time.perf_counter() - t0
                    failed = conn.execute("SELECT count(*) FROM roadmap_submissions WHERE status <> 'done'").fetchone()[
                        0
                    ]
                    recorded = conn.execute(
                        "SELECT count(*) FROM grade_attempts WHERE graded_on LIKE 'worker:%'"
                    ).fetchone()[0]
            finally:
                for w in workers:
                    w.terminate()
                for w in workers:
                    w.wait(30)
    finally:
        cluster.destroy()
    n = args.submissions
    print(f"submissions: {n} of lab adder (CPU), {os.cpu_count()} CPUs")
    print(f"local grade loop : {loop_s:7.1f} s  ({n / loop_s:.2f} submissions/s)")
    print(
        f"{args.workers} queue workers  : {queue_s:7.1f} s  ({n / queue_s:.2f} submissions/s; worker start-up "
        f"included; {recorded} attempts recorded, {failed} not done)"
    )
    print(f"ratio (queue throughput / loop throughput): {loop_s / queue_s:.2f}x")


def _password() -> str:
    from pgcluster import PASSWORD

    return PASSWORD


if __name__ == "__main__":
    main()
