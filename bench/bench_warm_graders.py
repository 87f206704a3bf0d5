"""What warm graders and warm learners save the authoring tools (issue 24):
`roadmap dev check` on one lab in three modes, rotated in the same run so a
busy machine slows each alike:

    cold     every grader and learner process started as a new Python (`--cold`)
    graders  graders forked from a warm interpreter, learners cold (`--cold-learners`)
    warm     graders and learners both forked (the default)

Each run's CPU time is its children's
(the grades), which is what decides the suite's length on a 2-core machine;
wall time is printed too.

    python bench/bench_warm_graders.py                        # paged-kv-cache, 1 round
    python bench/bench_warm_graders.py gpu-architecture -n 2  # another lab, 2 rounds

Every mode must agree: every row of the reports has the same verdict
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


MODES = {"cold": ["--cold"], "graders": ["--cold-learners"], "warm": []}


def _adopt_orphans() -> None:
    """Be a child subreaper: bubblewrap's outer process can exit before its
    pid namespace's init is reaped (the warm learner's), and that init's
    children's CPU (every warm learner's) would then go to the system's init
    instead of into our RUSAGE_CHILDREN."""
    import ctypes

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_orphans() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def dev_check(lab_id: str, mode: str, jobs: int) -> tuple[float, float, dict]:
    """(wall s, CPU s of the run and everything it started, check -> ok)."""
    env = dict(os.environ, ROADMAP_HOME=tempfile.mkdtemp(prefix="bench-warm-home-"))
    _reap_orphans()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        ROADMAP + ["dev", "check", lab_id, "--jobs", str(jobs), "--json", *MODES[mode]],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    _reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        rows = json.loads(proc.stdout)["data"]["rows"]
    except (ValueError, KeyError):
        sys.exit(f"dev check {lab_id} ({mode}) gave no report: {proc.stderr.strip()[-500:]}")
    return wall, cpu, {row["check"]: row["ok"] for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab", nargs="?", default="paged-kv-cache")
    parser.add_argument("-n", "--rounds", type=int, default=1)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    _adopt_orphans()
    results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    verdicts: dict[str, dict] = {}
    order = list(MODES)
    for i in range(args.rounds):
        for mode in order[i % 3 :] + order[: i % 3]:
            wall, cpu, rows = dev_check(args.lab, mode, args.jobs)
            results[mode].append((wall, cpu))
            print(f"round {i + 1} {mode:7}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, {len(rows)} checks", flush=True)
            if mode in verdicts and verdicts[mode] != rows:
                print(f"  {mode}: verdicts changed between rounds")
            verdicts.setdefault(mode, rows)
    wall = {mode: statistics.median(w for w, _ in runs) for mode, runs in results.items()}
    cpu = {mode: statistics.median(c for _, c in runs) for mode, runs in results.items()}
    print(f"\n{args.lab}: dev check, {args.jobs} jobs, median of {args.rounds}")
    for mode in MODES:
        print(
            f"  {mode:7} {wall[mode]:6.1f} s wall {cpu[mode]:6.1f} s CPU   "
            f"/cold: wall {wall[mode] / wall['cold']:.2f}x, CPU {cpu[mode] / cpu['cold']:.2f}x"
        )
    print(f"  warm/graders: wall {wall['warm'] / wall['graders']:.2f}x, CPU {cpu['warm'] / cpu['graders']:.2f}x")
    keys = set().union(*(v.keys() for v in verdicts.values()))
    differ = sorted(k for k in keys if len({str(v.get(k)) for v in verdicts.values()}) > 1)
    if differ:
        for key in differ:
            print(f"  verdicts differ for {key}: " + ", ".join(f"{mode} {v.get(key)}" for mode, v in verdicts.items()))
        sys.exit(1)
    if not all(all(ok is not False for ok in v.values()) for v in verdicts.values()):
        print("  some checks failed (the same in every mode)")
    print("  every check has the same verdict in every mode")


if __name__ == "__main__":
    main()
