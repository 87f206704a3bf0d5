"""What the OS wall costs a grade (issue 25): every lab's reference solution
graded whole behind bubblewrap ("strong") and with the in-process sandbox only
(`ROADMAP_SANDBOX=weak`), alternating in the same run so a busy machine slows
both alike, and each strong grade checked to pass (a false fail is counted).

    python bench/bench_sandbox.py                   # every lab, 3 rounds
    python bench/bench_sandbox.py autograd -n 5     # one lab, 5 rounds

Budget: strong / weak <= 1.15 per lab (median wall time). Prints per lab the
medians, the ratio, and false fails of the reference (grades behind the wall
that did not pass every gradable part; each round uses fresh secret seeds).
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

ROADMAP = [sys.executable, "-m", "roadmap_cli"]
BUDGET = 1.15


def grade(lab_id: str, workspace: Path, env: dict) -> tuple[float, bool, str, str]:
    """(wall seconds, every gradable part passed, the sandbox the attempt recorded, why not passed)."""
    t0 = time.perf_counter()
    proc = subprocess.run(ROADMAP + ["grade", lab_id, "--json"], cwd=workspace, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    try:
        data = json.loads(proc.stdout)["data"]
    except (ValueError, KeyError):
        return wall, False, "?", (proc.stderr.strip().splitlines() or ["no output"])[-1]
    passed = all(p["status"] in ("passed", "not-graded-here") for p in data["parts"])
    # A false fail must be diagnosable afterwards: the failing tests, their first message line.
    why = "; ".join(f"{t['nodeid']}: {(t.get('message') or t['outcome']).splitlines()[0][:200]}"
                    for t in data.get("tests", []) if t["outcome"] not in ("passed", "skipped"))[:1500]
    return wall, passed, data.get("sandbox") or "?", why or (data.get("message") or "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", help="lab ids (default: every lab)")
    parser.add_argument("-n", "--rounds", type=int, default=3, help="strong/weak pairs per lab")
    args = parser.parse_args()

    from roadmap_cli.grading_kit import oswall
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.spec import find_lab, lab_ids

    strength, why = oswall.status()
    if strength != oswall.STRONG:
        sys.exit(f"bubblewrap cannot run here ({why}): nothing to compare")
    rows = []
    with tempfile.TemporaryDirectory(prefix="roadmap-sandbox-bench-") as tmp:
        base = dict(os.environ, ROADMAP_HOME=str(Path(tmp) / "home"), PYTHONUNBUFFERED="1")
        base.pop("ROADMAP_SANDBOX", None)
        weak_env = dict(base, ROADMAP_SANDBOX="weak")
        for lab_id in args.labs or lab_ids():
            spec = find_lab(lab_id)
            workspace = Path(tmp) / lab_id
            subprocess.run(ROADMAP + ["lab", "start", lab_id, "--dir", str(workspace)], env=base, check=True,
                           stdout=subprocess.DEVNULL)
            ws.write_solution(spec, workspace)
            grade(lab_id, workspace, base)  # warm: C++ builds, the grader's bytecode cache (not counted)
            strong, weak, false_fails, seen = [], [], 0, set()
            for round_ in range(args.rounds):
                # Alternate which goes first: a machine that gets busier over time penalises neither.
                order = [("strong", base), ("weak", weak_env)] if round_ % 2 == 0 else [("weak", weak_env),
                                                                                         ("strong", base)]
                for name, env in order:
                    wall, passed, recorded, why = grade(lab_id, workspace, env)
                    seen.add((name, recorded))
                    (strong if name == "strong" else weak).append(wall)
                    if not passed:
                        false_fails += 1
                        print(f"  {lab_id}: the reference did not pass ({name} sandbox, round {round_ + 1}): {why}",
                              file=sys.stderr)
            if ("strong", "strong") not in seen or ("weak", "weak") not in seen:
                sys.exit(f"{lab_id}: the attempts did not record the sandbox asked for: {sorted(seen)}")
            s, w = statistics.median(strong), statistics.median(weak)
            rows.append((lab_id, s, w, s / w, false_fails))
            print(f"{lab_id:<18} strong {s:7.2f} s  weak {w:7.2f} s  ratio {s / w:5.2f}  false fails {false_fails}",
                  flush=True)
    print()
    print(f"{'lab':<18} {'strong s':>9} {'weak s':>8} {'ratio':>6} {'false fails':>12}  budget (<= {BUDGET:g}x)")
    for lab_id, s, w, ratio, ff in rows:
        print(f"{lab_id:<18} {s:9.2f} {w:8.2f} {ratio:6.2f} {ff:12d}  {'met' if ratio <= BUDGET else 'OVER'}")
    over = sum(1 for r in rows if r[3] > BUDGET)
    fails = sum(r[4] for r in rows)
    print(f"\n{len(rows) - over}/{len(rows)} labs within {BUDGET:g}x; {fails} false fail(s) of a reference")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
