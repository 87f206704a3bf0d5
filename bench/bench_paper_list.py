"""Benchmark: `roadmap paper list` against the start-up floor, from 1,000 to 100,000 papers.

The floor is `python -c "import sqlmodel, typer, rich"`: what any command of
ours pays before it does anything. Budgets (issue 13 and the status budget):

  paper list / --json / filtered   at 10,000 papers   <= 1.3x the floor
  paper list --all --json          at 100,000 papers  <= 2.0x the floor (streamed, compact)

For each size (1k, 10k, 100k) the bench seeds a fresh home (bulk inserts:
100,000 papers and 200,000 tags in a few seconds), then times, alternating in
the same run so drift on this shared box hits every command alike:

  baseline     python -c "import sqlmodel, typer, rich"
  list         roadmap paper list                (50 newest, for people)
  list --json  roadmap paper list --json
  filtered     roadmap paper list --tag kernels --search attention
  all --json   roadmap paper list --all --json   (every row, streamed)
  all pretty   roadmap paper list --all --json --pretty (informational)

Each child's CPU time (from getrusage) is the figure budgeted, since wall time
on a loaded 2-core box mostly measures the neighbours; the wall median is
printed beside it. Exits 1 if a budgeted ratio is over.

    python bench/bench_paper_list.py [--runs 7] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

TAGS = ["attention", "kernels", "serving", "kv-cache", "moe", "quantization", "scheduling", "triton", "cuda", "rope"]
STARTUP_BUDGET = 1.3  # the status budget, at 10,000 papers
ALL_JSON_BUDGET = 2.0  # issue 13 item 4, at 100,000 papers
COLUMNS = (
    "id",
    "title",
    "title_key",
    "authors",
    "year",
    "arxiv_id",
    "arxiv_version",
    "doi",
    "url",
    "stage",
    "status",
    "read_on",
    "added_on",
    "rating",
    "notes",
    "bibtex_key",
)


def seed(home: Path, n: int) -> None:
    """`n` papers with 2 tags each and some notes, by executemany on the driver (seconds at 100k)."""
    from roadmap_cli.store import open_store

    rng = random.Random(11)
    store = open_store(home)
    today = date.today()
    statuses = ["to-read", "reading", "read", "reproduced"]
    papers, tags = [], []
    for i in range(1, n + 1):
        status = rng.choice(statuses)
        day = (today - timedelta(days=rng.randrange(1000))).isoformat()
        topic = rng.choice(TAGS)
        title = f"Paper {i}: {topic} for large language models"
        papers.append(
            (
                i,
                title,
                title.lower().replace(":", ""),
                "Ada Author, Bo Builder",
                2015 + i % 11,
                f"{15 + i % 10:02d}{1 + i % 12:02d}.{i:05d}",
                1 + i % 3,
                None,
                None,
                1 + i % 10,
                status,
                day if status in ("read", "reproduced") else None,
                day,
                1 + i % 5,
                f"note {i}: tiling, softmax, memory traffic" if i % 4 == 0 else None,
                None,
            )
        )
        tags += [(i, topic), (i, rng.choice([t for t in TAGS if t != topic]))]
    with store.connection() as conn:
        conn.exec_driver_sql(
            f"INSERT INTO papers ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", papers
        )
        conn.exec_driver_sql("INSERT INTO paper_tags (paper_id, tag) VALUES (?, ?)", tags)
    store.engine.dispose()


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(child CPU seconds, wall seconds) of one run, output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{proc.stderr.decode()[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    roadmap = [sys.executable, "-m", "roadmap_cli"]
    commands = {
        "baseline  import sqlmodel, typer, rich": [sys.executable, "-c", "import sqlmodel, typer, rich"],
        "paper list": roadmap + ["paper", "list"],
        "paper list --json": roadmap + ["paper", "list", "--json"],
        "paper list --tag kernels -s attention": roadmap + ["paper", "list", "--tag", "kernels", "-s", "attention"],
        "paper list --all --json": roadmap + ["paper", "list", "--all", "--json"],
        "paper list --all --json --pretty": roadmap + ["paper", "list", "--all", "--json", "--pretty"],
    }
    over = False
    for n in (int(s) for s in args.sizes.split(",")):
        home = Path(tempfile.mkdtemp(prefix="roadmap-bench-papers-"))
        start = time.perf_counter()
        seed(home, n)
        print(
            f"\n{n:,} papers ({2 * n:,} tags), seeded in {time.perf_counter() - start:.1f} s; "
            f"median of {args.runs} alternating runs, child CPU (wall)"
        )
        env = dict(os.environ, ROADMAP_HOME=str(home), COLUMNS="120", OMP_NUM_THREADS="1")
        for cmd in commands.values():  # warm the OS page cache and the curriculum cache
            timed(cmd, env)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                samples[name].append(timed(cmd, env))
        base = statistics.median(cpu for cpu, _ in next(iter(samples.values())))
        for name in commands:
            cpu = statistics.median(c for c, _ in samples[name])
            wall = statistics.median(w for _, w in samples[name])
            budget = None
            if name.endswith("--all --json") and n == 100_000:
                budget = ALL_JSON_BUDGET
            elif n == 10_000 and "--all" not in name and not name.startswith("baseline"):
                budget = STARTUP_BUDGET
            verdict = (
                "" if budget is None else f"  (budget {budget}) -> {'OK' if cpu / base <= budget else 'OVER BUDGET'}"
            )
            over |= budget is not None and cpu / base > budget
            print(
                f"  {name:<38}: {cpu * 1000:7.1f} ms CPU ({wall * 1000:7.1f} ms wall)  ratio {cpu / base:5.2f}{verdict}"
            )
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
