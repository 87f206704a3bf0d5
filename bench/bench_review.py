"""Benchmark: `roadmap review` and `roadmap status` start-up vs the bare import
baseline, and (optionally) `status` of an older checkout without quizzes.

Seeds a busy home (bench_status.seed: 10,000 papers, 5,000 cadence entries,
1,000 grade attempts) plus review state (every quiz question answered once,
the explain checkpoints done, half the cards due now), then times,
alternating in the same run:
  baseline:        python -c "import sqlmodel, typer, rich"
  status:          python -m roadmap_cli status
  review --json:   the due list (what a session starts from)
  review:          a session up to its first prompt (stdin closed: it stops there)
  status (before): with --before SRC, `status` of that checkout's src/ on its own home
and prints medians and ratios. Budget: review / baseline <= 1.3 (issue 18).

    python bench/bench_review.py [--runs 15] [--before /tmp/quiz-base/src]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

BUDGET = 1.3
HERE = Path(__file__).resolve().parent


def seed_reviews(home: Path) -> int:
    """Answer every quiz question once (half a week ago, half a month ago) and
    check every explain checkpoint; returns the number of cards."""
    from roadmap_cli.curriculum import load_curriculum
    from roadmap_cli.paths import default_curriculum_path
    from roadmap_cli.tracker.progress import check
    from roadmap_cli.quiz import review
    from roadmap_cli.store import open_store

    store = open_store(home)
    cur = load_curriculum(default_curriculum_path())
    now = datetime.now(timezone.utc)
    questions = [q for quiz in cur.quizzes for q in quiz.questions]
    with store.connection() as conn:
        for n, q in enumerate(questions):
            when = now - timedelta(days=3 if n % 2 else 30)
            review.apply_rating(conn, store.learner, review.item_key(review.QUESTION, q.id), 3, when, "quiz")
    for cp in cur.all_checkpoints():
        if cp.kind == "explain":
            check(store, cur, cp.id)
    store.engine.dispose()
    return len(questions)


def seed_home(home: Path, src: Path | None) -> None:
    """bench_status's busy database, seeded by the code under test (`src`)."""
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; "
        f"from bench_status import seed; seed(Path({str(home)!r}))"
    )
    env = dict(os.environ, PYTHONPATH=str(src)) if src else dict(os.environ)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)


def timed(cmd: list[str], env: dict, ok=(0,)) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"command failed: {' '.join(cmd)}\n{proc.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--before", type=Path, help="src/ of an older checkout: also time its `status`")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="roadmap-bench-review-"))
    print(f"seeding {home}: bench_status's busy database + review state…")
    seed_home(home, None)
    cards = seed_reviews(home)
    print(f"  {cards} question cards, every explain checkpoint done")
    env = dict(os.environ, ROADMAP_HOME=str(home), OMP_NUM_THREADS="1")
    py = [sys.executable]
    cmds = {
        "baseline": (py + ["-c", "import sqlmodel, typer, rich"], env, (0,)),
        "status": (py + ["-m", "roadmap_cli", "status"], env, (0,)),
        "review --json": (py + ["-m", "roadmap_cli", "review", "--json"], env, (0,)),
        "review (to 1st prompt)": (py + ["-m", "roadmap_cli", "review"], env, (0, 2)),
    }
    if args.before:
        old_home = Path(tempfile.mkdtemp(prefix="roadmap-bench-before-"))
        seed_home(old_home, args.before)
        cmds["status (before)"] = (
            py + ["-m", "roadmap_cli", "status"],
            dict(os.environ, ROADMAP_HOME=str(old_home), PYTHONPATH=str(args.before), OMP_NUM_THREADS="1"),
            (0,),
        )
    for cmd, cmd_env, ok in cmds.values():  # warm caches (curriculum cache, page cache)
        timed(cmd, cmd_env, ok)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(args.runs):  # alternate so drift hits all equally
        for name, (cmd, cmd_env, ok) in cmds.items():
            times[name].append(timed(cmd, cmd_env, ok))
    base = statistics.median(times["baseline"])
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<24} median {med * 1000:7.1f} ms  (min {min(values) * 1000:6.1f})  ratio {med / base:.2f}")
    if args.before:
        ratio = statistics.median(times["status"]) / statistics.median(times["status (before)"])
        print(f"status now / status before = {ratio:.2f}")
    worst = max(statistics.median(times[n]) for n in ("review --json", "review (to 1st prompt)")) / base
    print(f"review / baseline = {worst:.2f}  (budget {BUDGET})  -> {'OK' if worst <= BUDGET else 'OVER BUDGET'}")
    sys.exit(0 if worst <= BUDGET else 1)


if __name__ == "__main__":
    main()
