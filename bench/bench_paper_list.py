"""Benchmark: `roadmap paper list` on 10,000 papers vs the startup budget.

`roadmap status` must start within 1.3x the time of
`python -c "import sqlmodel, typer, rich"`; `paper list` on a log of 10,000
papers (2 tags each, some notes) must stay within that same budget. Seeds a
fresh home, then times, alternating in the same run so drift hits all alike:

  baseline     python -c "import sqlmodel, typer, rich"
  status       roadmap status                    (for comparison; budgeted by bench_status.py)
  list         roadmap paper list                (50 newest, for people)
  list --json  roadmap paper list --json
  filtered     roadmap paper list --tag kernels --search attention
  all --json   roadmap paper list --all --json   (every row; informational, no budget)

prints the median of each and its ratio to the baseline, and exits 1 if a
budgeted command is over 1.3x.

    python bench/bench_paper_list.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path

# Same subprocess timer as the status bench (both run as scripts from bench/).
from bench_status import timed

BUDGET = 1.3
N_PAPERS = 10_000
TAGS = ["attention", "kernels", "serving", "kv-cache", "moe", "quantization", "scheduling", "triton", "cuda", "rope"]


def seed(home: Path) -> None:
    import sqlalchemy as sa

    from roadmap_cli.store import open_store

    rng = random.Random(11)
    store = open_store(home)
    today = date.today()
    statuses = ["to-read", "reading", "read", "reproduced"]
    papers, tags = [], []
    for i in range(1, N_PAPERS + 1):
        status = rng.choice(statuses)
        day = (today - timedelta(days=rng.randrange(1000))).isoformat()
        topic = rng.choice(TAGS)
        papers.append({
            "id": i, "title": f"Paper {i}: {topic} for large language models", "title_key": f"paper {i} {topic} for large language models",
            "authors": "Ada Author, Bo Builder", "year": 2015 + i % 11, "arxiv_id": f"{15 + i % 10:02d}{1 + i % 12:02d}.{i:05d}",
            "arxiv_version": 1 + i % 3, "doi": None, "url": None, "stage": 1 + i % 10, "status": status,
            "read_on": day if status in ("read", "reproduced") else None, "added_on": day,
            "rating": 1 + i % 5, "notes": f"note {i}: tiling, softmax, memory traffic" if i % 4 == 0 else None,
            "bibtex_key": None,
        })
        tags += [{"paper_id": i, "tag": topic}, {"paper_id": i, "tag": rng.choice([t for t in TAGS if t != topic])}]
    with store.connection() as conn:
        columns = list(papers[0])
        conn.execute(sa.text(f"INSERT INTO papers ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"), papers)
        conn.execute(sa.text("INSERT INTO paper_tags (paper_id, tag) VALUES (:paper_id, :tag)"), tags)
    store.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="roadmap-bench-papers-"))
    print(f"seeding {home} with {N_PAPERS:,} papers ({2 * N_PAPERS:,} tags)…")
    seed(home)
    env = dict(os.environ, ROADMAP_HOME=str(home), COLUMNS="120")
    roadmap = [sys.executable, "-m", "roadmap_cli"]
    commands = {
        "baseline  import sqlmodel, typer, rich": ([sys.executable, "-c", "import sqlmodel, typer, rich"], None),
        "status (same budget; the lead's bench)": (roadmap + ["status"], None),
        "paper list": (roadmap + ["paper", "list"], BUDGET),
        "paper list --json": (roadmap + ["paper", "list", "--json"], BUDGET),
        "paper list --tag kernels -s attention": (roadmap + ["paper", "list", "--tag", "kernels", "-s", "attention"], BUDGET),
        "paper list --all --json (10,000 rows)": (roadmap + ["paper", "list", "--all", "--json"], None),
    }
    for cmd, _ in commands.values():  # warm the OS page cache and the curriculum cache
        timed(cmd, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, (cmd, _) in commands.items():
            times[name].append(timed(cmd, env))
    base = statistics.median(next(iter(times.values())))
    over = False
    for name, (_, budget) in commands.items():
        median = statistics.median(times[name])
        ratio = median / base
        verdict = "" if budget is None or name.startswith("baseline") else (
            f"  (budget {budget}) -> {'OK' if ratio <= budget else 'OVER BUDGET'}")
        over |= budget is not None and ratio > budget
        print(f"{name:<40}: median {median * 1000:7.1f} ms (min {min(times[name]) * 1000:6.1f})  ratio {ratio:.2f}{verdict}")
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
