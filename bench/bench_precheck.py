"""Benchmark: the learner's loop (issue 11, "Measured").

1. Pre-check: time from `roadmap grade` to the report of a syntax error
   (one missing `)`), end to end in a subprocess, against the old path, the
   grader's pytest run reporting the same error (baseline, alternating runs).
   Also the pre-check alone, in-process, on each shipped lab's starter.
   Budget: the CLI's report <= 0.5 s of pre-check work; the in-process check
   is the part the pre-check adds.
2. Watch: from a file save to the first line of the new run (budget 1.0 s),
   and a whole watch re-grade of one part against a plain
   `roadmap grade --part P` of the same part (ratio, alternating runs).

Uses the fixture lab `adder` (tests/fixtures_labs) so that the numbers are
about the loop, not about a lab's tests:

    OMP_NUM_THREADS=1 python bench/bench_precheck.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_LABS = ROOT / "tests" / "fixtures_labs" / "labs"
ROADMAP = [sys.executable, "-c", "from roadmap_cli.cli import main; main()"]
BROKEN = "def add(a, b):\n    return (a + b\n"


def _env(home: Path) -> dict:
    return {
        **os.environ,
        "ROADMAP_HOME": str(home),
        "ROADMAP_LABS_DIR": str(FIXTURE_LABS),
        "ROADMAP_DEVICE": "cpu",
        "ROADMAP_LANG": "en",
        "OMP_NUM_THREADS": "1",
    }


def _time_to_line(cmd: list[str], env: dict, cwd: Path, marker: str) -> tuple[float, float]:
    """(seconds until a stdout line containing `marker`, seconds until exit)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = None
    for line in proc.stdout:
        if seen is None and marker in line:
            seen = time.perf_counter() - t0
    proc.wait()
    total = time.perf_counter() - t0
    assert seen is not None, f"{marker!r} never printed by {cmd}"
    return seen, total


def _timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t0, proc.stdout + proc.stderr


def precheck_in_process() -> None:
    from roadmap_cli.grading.precheck import check_workspace, learner_files

    print("pre-check alone (in-process), each shipped lab's starter with a syntax error in its last file:")
    for lab in sorted(p for p in (ROOT / "labs").iterdir() if (p / "starter").is_dir()):
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp) / "ws"
            shutil.copytree(lab / "starter", ws)
            files = learner_files(ws)
            clean = []
            for _ in range(5):
                t0 = time.perf_counter()
                check_workspace(ws)
                clean.append(time.perf_counter() - t0)
            files[-1].write_text(files[-1].read_text() + "\nprint((1)\n")
            broken = []
            for _ in range(5):
                t0 = time.perf_counter()
                problem = check_workspace(ws)
                broken.append(time.perf_counter() - t0)
            assert problem is not None
            print(
                f"  {lab.name:<16} {len(files)} files: clean {statistics.median(clean) * 1000:6.1f} ms, "
                f"syntax error found {statistics.median(broken) * 1000:6.1f} ms ({problem.file}:{problem.line})"
            )


def precheck_end_to_end(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        env = _env(home)
        subprocess.run([*ROADMAP, "lab", "start", "adder", "--dir", str(ws)], env=env, check=True, capture_output=True)
        (ws / "adder.py").write_text(BROKEN)
        # Baseline: what used to report it, the grader's pytest run (no pre-check in runner.grade_workspace).
        old = [
            *ROADMAP[:2],
            "from pathlib import Path; from roadmap_cli.labs.spec import find_lab; "
            "from roadmap_cli.grading.runner import grade_workspace; "
            f"print(grade_workspace(find_lab('adder'), Path({str(ws)!r})).outcome)",
        ]
        new_t, new_total, old_t, bare_t = [], [], [], []
        for _ in range(runs):
            seen, total = _time_to_line([*ROADMAP, "grade"], env, ws, "adder.py:2:12: SyntaxError")
            new_t.append(seen)
            new_total.append(total)
            t, _ = _timed(old, env, ws)
            old_t.append(t)
            t, _ = _timed([*ROADMAP, "--version"], env, ws)  # the CLI's own start-up
            bare_t.append(t)
        new, old_m, bare = statistics.median(new_t), statistics.median(old_t), statistics.median(bare_t)
        print(f"syntax error report, end to end (median of {runs}, alternating):")
        print(
            f"  roadmap grade (pre-check)     {new:6.2f} s to the report, {statistics.median(new_total):.2f} s "
            "to exit (the attempt is recorded after the report)"
        )
        print(f"  grader's pytest run (old way) {old_m:6.2f} s   ratio pre-check/old = {new / old_m:.2f}")
        print(
            f"  roadmap --version (start-up)  {bare:6.2f} s   report beyond start-up: {new - bare:.2f} s (budget 0.5 s)"
        )


def watch_latency(runs: int) -> None:
    import pexpect

    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        env = _env(home)
        subprocess.run([*ROADMAP, "lab", "start", "adder", "--dir", str(ws)], env=env, check=True, capture_output=True)
        child = pexpect.spawn(
            ROADMAP[0], ROADMAP[1:] + ["watch", "--part", "add"], cwd=str(ws), env=env, encoding="utf-8", timeout=120
        )
        child.expect("attempt #1")
        first_line, regrade, plain = [], [], []
        for i in range(runs):
            # Always a wrong add: a passing part would move the watch on to the next part.
            body = f"def add(a, b):\n    return a - b - {i % 2}\n"
            t0 = time.perf_counter()
            (ws / "adder.py").write_text(body + f"# save {i}\n")
            child.expect(r"▶ grading part add \(saved")
            first_line.append(time.perf_counter() - t0)
            child.expect(r"attempt #\d+")
            regrade.append(time.perf_counter() - t0)
            t, _ = _timed([*ROADMAP, "grade", "--part", "add"], env, ws)
            plain.append(t)
        child.send("q")
        child.expect(pexpect.EOF)
        f, w, p = statistics.median(first_line), statistics.median(regrade), statistics.median(plain)
        print(f"watch (median of {runs}, alternating with a plain grade):")
        print(f"  save -> first line of the new run   {f:6.3f} s (budget 1.0 s)")
        print(f"  save -> watch re-grade reported     {w:6.2f} s")
        print(f"  roadmap grade --part add (plain)    {p:6.2f} s   ratio watch/plain = {w / p:.2f}")


def completion_latency(runs: int) -> None:
    """One TAB: `roadmap lab start <TAB>` and `roadmap check s2-<TAB>`, against
    the CLI's own start-up (`roadmap --version`) and a bare interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(Path(tmp) / "home")
        env.pop("ROADMAP_LABS_DIR")
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], {}),
            "roadmap --version": ([*ROADMAP, "--version"], {}),
            "TAB lab ids": (
                ROADMAP,
                {"_ROADMAP_COMPLETE": "complete_bash", "COMP_WORDS": "roadmap lab start ", "COMP_CWORD": "3"},
            ),
            "TAB checkpoint ids": (
                ROADMAP,
                {"_ROADMAP_COMPLETE": "complete_bash", "COMP_WORDS": "roadmap check s2-", "COMP_CWORD": "2"},
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(runs):
            for name, (cmd, extra) in cases.items():  # alternating, same run
                t, out = _timed(cmd, {**env, **extra}, Path(tmp))
                times[name].append(t)
        base = statistics.median(times["roadmap --version"])
        print(f"shell completion (median of {runs}, alternating):")
        for name, values in times.items():
            m = statistics.median(values)
            print(f"  {name:<20} {m:6.3f} s   ratio to roadmap --version = {m / base:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", choices=["precheck", "watch", "completion"], help="Run one section.")
    args = parser.parse_args()
    if args.only == "completion":
        return completion_latency(args.runs)
    if args.only == "watch":
        return watch_latency(args.runs)
    precheck_in_process()
    precheck_end_to_end(args.runs)
    if args.only is None:
        watch_latency(args.runs)
        completion_latency(args.runs)


if __name__ == "__main__":
    main()
