"""What the OS wall costs a grade (issue 25): every lab's reference solution
graded whole behind bubblewrap ("strong") and with the in-process sandbox only
(`ROADMAP_SANDBOX=weak`), alternating in the same run so a busy machine slows
both alike, and each strong grade checked to pass (a false fail is counted).

    python bench/bench_sandbox.py                   # every lab, 3 rounds
    python bench/bench_sandbox.py autograd -n 5     # one lab, 5 rounds
    python bench/bench_sandbox.py autograd --baseline 7881cf9   # this wall vs the wall of a commit

Budget: strong / weak <= 1.15 per lab (median wall time). Prints per lab the
medians, the ratio, and false fails of the reference (grades behind the wall
that did not pass every gradable part; each round uses fresh secret seeds).

With `--baseline REV` the comparison is this checkout's wall against the wall
of commit REV instead of against the weak sandbox (issue 35: the allow-list
wall must cost <= 1.15x the wall it replaced): REV's tree is exported to a
temp folder and run by a copy of this virtual environment (hard links, its
editable path pointed at the export), in the same run, alternating. Each side
grades its own commit's reference solution in its own data home (the baseline's schema is older): the
ratio is then the cost of a whole grade then and now, walls and the lab's tests both (a lab whose tests grew
since REV shows that growth too; compare the tests each side ran before blaming the wall).
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


def grade(lab_id: str, workspace: Path, env: dict, python: str = sys.executable) -> tuple[float, bool, str, str]:
    """(wall seconds, every gradable part passed, the sandbox the attempt recorded, why not passed)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [python, "-m", "roadmap_cli", "grade", lab_id, "--json"], cwd=workspace, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    try:
        data = json.loads(proc.stdout)["data"]
    except (ValueError, KeyError):
        return wall, False, "?", (proc.stderr.strip().splitlines() or ["no output"])[-1]
    passed = all(p["status"] in ("passed", "not-graded-here") for p in data["parts"])
    # A false fail must be diagnosable afterwards: the failing tests, their first message line.
    why = "; ".join(
        f"{t['nodeid']}: {(t.get('message') or t['outcome']).splitlines()[0][:200]}"
        for t in data.get("tests", [])
        if t["outcome"] not in ("passed", "skipped")
    )[:1500]
    return wall, passed, data.get("sandbox") or "?", why or (data.get("message") or "")


def baseline_python(rev: str, where: Path) -> str:
    """A Python that runs roadmap as of commit `rev`: `git archive` into `where`, this venv hard-linked
    beside it with its editable-install path pointed at the export."""
    repo = Path(__file__).resolve().parents[1]
    tree = where / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    venv = where / "venv"
    subprocess.run(["cp", "-al", sys.prefix, str(venv)], check=True)
    for pth in venv.glob("lib/python*/site-packages/*.pth"):
        text = pth.read_text()
        if str(repo / "src") in text:
            pth.unlink()  # a hard link: replace, never edit the original
            pth.write_text(text.replace(str(repo / "src"), str(tree / "src")))
    return str(venv / "bin" / "python")


def start_with(python: str, lab_id: str, workspace: Path, env: dict) -> None:
    """`lab start` and the reference solution written, by the roadmap that `python` runs (the baseline's)."""
    subprocess.run(
        [python, "-m", "roadmap_cli", "lab", "start", lab_id, "--dir", str(workspace)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    code = (
        "import sys; from pathlib import Path; from roadmap_cli.labs import workspace as ws; "
        "from roadmap_cli.labs.spec import find_lab; ws.write_solution(find_lab(sys.argv[1]), Path(sys.argv[2]))"
    )
    subprocess.run([python, "-c", code, lab_id, str(workspace)], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", help="lab ids (default: every lab)")
    parser.add_argument("-n", "--rounds", type=int, default=3, help="strong/weak pairs per lab")
    parser.add_argument(
        "--baseline", metavar="REV", help="compare with the OS wall of this commit, not the weak sandbox"
    )
    args = parser.parse_args()

    from roadmap_cli.grading_kit import oswall
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.spec import find_lab, lab_ids

    strength, why = oswall.status()
    if strength != oswall.STRONG:
        sys.exit(f"bubblewrap cannot run here ({why}): nothing to compare")
    rows = []
    with tempfile.TemporaryDirectory(prefix="roadmap-sandbox-bench-") as tmp:
        base = dict(
            os.environ,
            ROADMAP_HOME=str(Path(tmp) / "home"),
            PYTHONUNBUFFERED="1",
            ROADMAP_CPP_CACHE=str(Path(tmp) / "cpp-new"),
        )
        base.pop("ROADMAP_SANDBOX", None)
        weak_env = dict(base, ROADMAP_SANDBOX="weak")
        other_python, other_name = sys.executable, "weak"
        if args.baseline:
            # The baseline's grades are authored code at another commit: no manifest to verify there.
            base["ROADMAP_DEV_UNLOCKED"] = "1"
            other_python, other_name = baseline_python(args.baseline, Path(tmp) / "baseline"), args.baseline
            # Its own data home (its schema is older than ours) and its own workspace, holding the
            # reference solution of its own labs: each side grades what its commit shipped.
            weak_env = dict(
                base, ROADMAP_HOME=str(Path(tmp) / "home-baseline"), ROADMAP_CPP_CACHE=str(Path(tmp) / "cpp-baseline")
            )
        for lab_id in args.labs or lab_ids():
            spec = find_lab(lab_id)
            workspace = Path(tmp) / lab_id
            subprocess.run(
                ROADMAP + ["lab", "start", lab_id, "--dir", str(workspace)],
                env=base,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            ws.write_solution(spec, workspace)
            other_workspace = workspace
            if args.baseline:
                other_workspace = Path(tmp) / "baseline-workspaces" / lab_id
                start_with(other_python, lab_id, other_workspace, weak_env)
            # warm: C++ builds, the grader's bytecode cache (not counted)
            grade(lab_id, workspace, base)
            grade(lab_id, other_workspace, weak_env, other_python)
            strong, weak, false_fails, seen = [], [], 0, set()
            for round_ in range(args.rounds):
                # Alternate which goes first: a machine that gets busier over time penalises neither.
                order = (
                    [("strong", base), ("weak", weak_env)]
                    if round_ % 2 == 0
                    else [("weak", weak_env), ("strong", base)]
                )
                for name, env in order:
                    python, where = (other_python, other_workspace) if name == "weak" else (sys.executable, workspace)
                    wall, passed, recorded, why = grade(lab_id, where, env, python)
                    seen.add((name, "weak" if recorded == "strong" and name == "weak" and args.baseline else recorded))
                    (strong if name == "strong" else weak).append(wall)
                    if not passed:
                        false_fails += 1
                        print(
                            f"  {lab_id}: the reference did not pass ({name} sandbox, round {round_ + 1}): {why}",
                            file=sys.stderr,
                        )
            if ("strong", "strong") not in seen or ("weak", "weak") not in seen:
                sys.exit(f"{lab_id}: the attempts did not record the sandbox asked for: {sorted(seen)}")
            s, w = statistics.median(strong), statistics.median(weak)
            rows.append((lab_id, s, w, s / w, false_fails))
            print(
                f"{lab_id:<18} strong {s:7.2f} s  {other_name} {w:7.2f} s  ratio {s / w:5.2f}  "
                f"false fails {false_fails}",
                flush=True,
            )
    print()
    print(f"{'lab':<18} {'strong s':>9} {other_name[:8]:>8} {'ratio':>6} {'false fails':>12}  budget (<= {BUDGET:g}x)")
    for lab_id, s, w, ratio, ff in rows:
        print(f"{lab_id:<18} {s:9.2f} {w:8.2f} {ratio:6.2f} {ff:12d}  {'met' if ratio <= BUDGET else 'OVER'}")
    over = sum(1 for r in rows if r[3] > BUDGET)
    fails = sum(r[4] for r in rows)
    print(f"\n{len(rows) - over}/{len(rows)} labs within {BUDGET:g}x; {fails} false fail(s) of a reference")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
