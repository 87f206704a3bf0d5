"""Benchmark: `roadmap report --month` on the 10,000-paper database vs `roadmap status`.

Seeds a fresh home as bench_status.py does (10,000 papers, 5,000 cadence
entries, 1,000 grade attempts over two years), then times, alternating in the
same run so drift on this shared box hits every command alike:

  status        roadmap status
  report md     roadmap report --month <last month>                 (stdout)
  report files  roadmap report --month <last month> -o r.md --force (+ 5 SVG files)
  report html   roadmap report --month <last month> --format html -o r.html --force

and prints each median, the ratio of each report to status, and whether the
report stays within issue 18's budget of 2 s on this machine. The budgeted
figure is each child's CPU time (getrusage, user + system), as in
bench_paper_list.py: wall time on a loaded 2-core box mostly measures the
neighbours (the wall median is printed beside it).

    python bench/bench_report.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_paper_list import timed  # noqa: E402  (child CPU + wall of one command run)
from bench_status import seed  # noqa: E402  (the same database as the status budget)

BUDGET_S = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    # bench_status.seed inserts rows without a learner: they get the column's
    # default, `local`. Be that learner (else a machine with a git user.email
    # would pin that id and every command would read an empty database).
    os.environ["ROADMAP_LEARNER"] = "local"
    home = Path(tempfile.mkdtemp(prefix="roadmap-bench-report-"))
    print(f"seeding {home} with 10,000 papers, 5,000 cadence entries, 1,000 grade attempts…")
    seed(home)
    env = dict(os.environ, ROADMAP_HOME=str(home), OMP_NUM_THREADS="1")
    last = date.today().replace(day=1) - timedelta(days=1)
    month = f"{last.year}-{last.month:02d}"
    roadmap = [sys.executable, "-m", "roadmap_cli"]
    commands = {
        "status": roadmap + ["status"],
        "report md": roadmap + ["report", "--month", month],
        "report files": roadmap + ["report", "--month", month, "-o", str(home / "r.md"), "--force"],
        "report html": roadmap
        + ["report", "--month", month, "--format", "html", "-o", str(home / "r.html"), "--force"],
    }
    for cmd in commands.values():  # warm the curriculum cache and the OS page cache
        timed(cmd, env)
    probe = subprocess.run(roadmap + ["report", "--month", month, "--json"], env=env, capture_output=True, text=True)
    papers = len(json.loads(probe.stdout)["data"]["papers"])
    print(f"the report of {month} lists {papers} papers read")
    if papers == 0:
        sys.exit("the seeded rows are not the current learner's: nothing to measure")
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    wall: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            c, w = timed(cmd, env)
            cpu[name].append(c)
            wall[name].append(w)
    base, base_wall = statistics.median(cpu["status"]), statistics.median(wall["status"])
    print(f"month {month}; {args.runs} alternating runs each; load average {os.getloadavg()[0]:.1f}")
    worst = 0.0
    for name in commands:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        ratio = "" if name == "status" else f"  ratio vs status: cpu {c / base:.2f}, wall {w / base_wall:.2f}"
        print(f"{name:<13} cpu median {c * 1000:7.1f} ms, wall median {w * 1000:7.1f} ms{ratio}")
        if name != "status":
            worst = max(worst, c)
    ok = worst <= BUDGET_S
    print(f"slowest report: {worst:.2f} s of CPU (budget {BUDGET_S} s) -> {'OK' if ok else 'OVER BUDGET'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
