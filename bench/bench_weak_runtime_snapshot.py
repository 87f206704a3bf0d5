"""What the weak grade's runtime snapshot costs (issue 35 item 4, grading/integrity.py).

Around each weak-sandbox grade the engine stats every file of the Python runtime and the shared C++ cache
(before and after; the post-grade record is kept), and every later grade checks the runtime against that
record first. This grades a lab's reference with the weak sandbox, alternating in the same run: the engine as
it is, and the same engine with the snapshot replaced by an empty one (patched in that process only; there is
no switch to turn it off). Prints the medians and their ratio, and the raw cost of one snapshot.

    python bench/bench_weak_runtime_snapshot.py                 # autograd, 5 rounds
    python bench/bench_weak_runtime_snapshot.py adder -n 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WITHOUT = (
    "import roadmap_cli.grading.integrity as i; i.tree_snapshot = lambda roots: {}; "
    "i.verify_runtime = lambda: (None, None); i.save_runtime_record = lambda snap: None; "
    "from roadmap_cli.entry import main; main()"
)
WITH = "from roadmap_cli.entry import main; main()"


def grade(lab_id: str, workspace: Path, env: dict, code: str) -> tuple[float, bool, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, "grade", lab_id, "--json"], cwd=workspace, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    try:
        data = json.loads(proc.stdout)["data"]
    except (ValueError, KeyError):
        return wall, False, (proc.stderr.strip().splitlines() or ["no output"])[-1]
    passed = all(p["status"] in ("passed", "not-graded-here") for p in data["parts"])
    return wall, passed and data.get("sandbox") == "weak", data.get("message") or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lab", nargs="?", default="autograd")
    parser.add_argument("-n", "--rounds", type=int, default=5)
    args = parser.parse_args()

    from roadmap_cli.grading import integrity
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.spec import find_lab

    with tempfile.TemporaryDirectory(prefix="roadmap-weak-snapshot-bench-") as tmp:
        env = dict(
            os.environ,
            ROADMAP_HOME=str(Path(tmp) / "home"),
            ROADMAP_SANDBOX="weak",
            ROADMAP_CPP_CACHE=str(Path(tmp) / "cpp"),
            XDG_CACHE_HOME=str(Path(tmp) / "cache"),
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
        )
        env.pop("ROADMAP_REQUIRE_BWRAP", None)
        os.environ["ROADMAP_CPP_CACHE"] = env["ROADMAP_CPP_CACHE"]
        roots = integrity.judge_roots()
        t0 = time.perf_counter()
        files = len(integrity.tree_snapshot(roots))
        one = time.perf_counter() - t0
        print(f"one snapshot: {files} files under {len(roots)} folders in {one:.2f} s")
        spec = find_lab(args.lab)
        workspace = Path(tmp) / args.lab
        subprocess.run(
            [sys.executable, "-m", "roadmap_cli", "lab", "start", args.lab, "--dir", str(workspace)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        ws.write_solution(spec, workspace)
        grade(args.lab, workspace, env, WITH)  # warm: bytecode, C++ builds (not counted)
        with_, without, fails = [], [], 0
        for round_ in range(args.rounds):
            order = [(WITH, with_), (WITHOUT, without)]
            for code, times in order if round_ % 2 == 0 else order[::-1]:
                wall, ok, why = grade(args.lab, workspace, env, code)
                times.append(wall)
                if not ok:
                    fails += 1
                    print(f"  not passed ({'with' if code == WITH else 'without'}): {why}", file=sys.stderr)
        w, wo = statistics.median(with_), statistics.median(without)
        print(
            f"{args.lab}: weak grade with the snapshot {w:.2f} s, without {wo:.2f} s: ratio {w / wo:.2f}x "
            f"({args.rounds} rounds, {fails} not passed)"
        )


if __name__ == "__main__":
    main()
