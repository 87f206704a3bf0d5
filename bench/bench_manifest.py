"""What the manifest check (grading/manifest.py) costs each grade.

    python bench/bench_manifest.py [LAB] [--repeats N]

verify   = `manifest.verify(lab)` in this process: git mode (this checkout:
           `git rev-parse` + `git ls-tree` + blob ids of the covered files) and
           wheel mode (a manifest file built here, sha256 of every covered file);
grade    = wall time of `roadmap grade --part add --json` of the fixture lab
           `adder` in a fresh process, with the check (ROADMAP_DEV_UNLOCKED
           unset) and without it (=1), alternating; printed as a ratio.
           On a work tree with uncommitted grader edits the checked grade is
           refused, so the ratio is computed as (grade + verify) / grade.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from roadmap_cli.grading import manifest  # noqa: E402


def per_call(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lab", nargs="?", default="flash-attention")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.pop(manifest.UNLOCK_ENV, None)
    lab = REPO / "labs" / args.lab
    git_s = per_call(lambda: manifest.verify(lab, manifest_file=Path("/nonexistent")), args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "_manifest.json"
        target.write_text(json.dumps(manifest.build(REPO / "labs")))
        wheel_s = per_call(lambda: manifest.verify(lab, manifest_file=target), args.repeats)
        files = manifest.verify(lab, manifest_file=target).checked
    print(f"verify {args.lab} ({files} files): git mode {git_s * 1000:.1f} ms, wheel mode {wheel_s * 1000:.1f} ms")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {
            **os.environ,
            "ROADMAP_HOME": str(tmp / "home"),
            "ROADMAP_DEVICE": "cpu",
            "ROADMAP_LABS_DIR": str(REPO / "tests" / "fixtures_labs" / "labs"),
        }
        roadmap = [sys.executable, "-m", "roadmap_cli"]
        ws = tmp / "ws"
        subprocess.run([*roadmap, "lab", "start", "adder", "--dir", str(ws)], env=env, check=True, capture_output=True)
        shutil.copy(REPO / "tests" / "fixtures_labs" / "labs" / "adder" / "solution" / "adder.py", ws / "adder.py")
        cmd = [*roadmap, "grade", "--part", "add", "--json"]
        timings: dict[str, list[float]] = {"checked": [], "unchecked": []}
        refused = False
        for _ in range(args.repeats):
            for mode in ("checked", "unchecked"):
                run_env = dict(env, **({manifest.UNLOCK_ENV: "1"} if mode == "unchecked" else {}))
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, cwd=ws, env=run_env, capture_output=True, text=True)
                timings[mode].append(time.perf_counter() - t0)
                refused = refused or (mode == "checked" and proc.returncode == 4)
        unchecked = statistics.median(timings["unchecked"])
        if refused:
            fixture = manifest.verify(
                REPO / "tests" / "fixtures_labs" / "labs" / "adder", manifest_file=Path("/nonexistent")
            )
            print(f"checked grade refused here ({fixture.line()}); ratio from the in-process cost:")
            print(
                f"grade {unchecked:.2f} s; with the check ~{unchecked + git_s:.2f} s; "
                f"ratio {(unchecked + git_s) / unchecked:.3f}x"
            )
        else:
            checked = statistics.median(timings["checked"])
            print(
                f"grade without the check {unchecked:.2f} s, with it {checked:.2f} s; ratio {checked / unchecked:.3f}x"
            )


if __name__ == "__main__":
    main()
