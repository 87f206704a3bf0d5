"""What warm graders save the authoring tools (issue 24): `roadmap dev check`
on one lab with every grader forked from a warm interpreter (the default) and
with every grader started as a new Python (`--cold`), alternating in the same
run so a busy machine slows both alike. Each run's CPU time is its children's
(the grades), which is what decides the suite's length on a 2-core machine;
wall time is printed too.

    python bench/bench_warm_graders.py                        # paged-kv-cache, 1 round
    python bench/bench_warm_graders.py gpu-architecture -n 2  # another lab, 2 rounds

Both modes must agree: every row of the two reports has the same verdict
(a disagreement is printed and the script exits 1).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROADMAP = [sys.executable, "-m", "roadmap_cli"]


def dev_check(lab_id: str, cold: bool, jobs: int) -> tuple[float, float, dict]:
    """(wall s, CPU s of the run and everything it waited for, check -> ok)."""
    env = dict(os.environ, ROADMAP_HOME=tempfile.mkdtemp(prefix="bench-warm-home-"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(ROADMAP + ["dev", "check", lab_id, "--jobs", str(jobs), "--json", *(["--cold"] if cold else [])],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        rows = json.loads(proc.stdout)["data"]["rows"]
    except (ValueError, KeyError):
        sys.exit(f"dev check {lab_id} {'--cold ' if cold else ''}gave no report: {proc.stderr.strip()[-500:]}")
    return wall, cpu, {row["check"]: row["ok"] for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab", nargs="?", default="paged-kv-cache")
    parser.add_argument("-n", "--rounds", type=int, default=1)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
    verdicts: dict[str, dict] = {}
    for i in range(args.rounds):
        for mode in ("cold", "warm") if i % 2 == 0 else ("warm", "cold"):
            wall, cpu, rows = dev_check(args.lab, mode == "cold", args.jobs)
            results[mode].append((wall, cpu))
            print(f"round {i + 1} {mode:4}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, {len(rows)} checks", flush=True)
            if mode in verdicts and verdicts[mode] != rows:
                print(f"  {mode}: verdicts changed between rounds")
            verdicts.setdefault(mode, rows)
    cold_wall = statistics.median(w for w, _ in results["cold"])
    warm_wall = statistics.median(w for w, _ in results["warm"])
    cold_cpu = statistics.median(c for _, c in results["cold"])
    warm_cpu = statistics.median(c for _, c in results["warm"])
    print(f"\n{args.lab}: dev check, {args.jobs} jobs, median of {args.rounds}")
    print(f"  cold {cold_wall:6.1f} s wall {cold_cpu:6.1f} s CPU")
    print(f"  warm {warm_wall:6.1f} s wall {warm_cpu:6.1f} s CPU")
    print(f"  warm/cold: wall {warm_wall / cold_wall:.2f}x, CPU {warm_cpu / cold_cpu:.2f}x")
    differ = sorted(k for k in verdicts["cold"].keys() | verdicts["warm"].keys()
                    if verdicts["cold"].get(k) != verdicts["warm"].get(k))
    if differ:
        print(f"  verdicts differ between cold and warm: {', '.join(differ)}")
        sys.exit(1)
    print("  every check has the same verdict in both modes")


if __name__ == "__main__":
    main()
