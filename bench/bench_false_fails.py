"""False-fail rate of a lab's grader on its own reference solution, over many secret seeds.

A right solution must never fail. This grades the reference (the solution
view of the single source, markers stripped) once per secret seed, with every
CPU-gradable test of the lab, in ONE process (pytest.main per seed: torch and
the test modules are imported once; `grading_kit.seeded` reads the secret
seed at call time), without the sandbox (the verdicts are the same; only the
transport differs). Prints per-test failure counts and exits 1 on any failure.

    OMP_NUM_THREADS=1 python bench/bench_false_fails.py autograd --seeds 50
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Outcomes:
    def __init__(self) -> None:
        self.failed: dict[str, list[str]] = {}
        self.ran = 0

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call":
            self.ran += 1
        if report.failed:
            self.failed.setdefault(report.nodeid, []).append(str(report.longrepr).splitlines()[-1][:200])


def solution_workspace(spec) -> Path:
    from roadmap_cli.labs.starter_build import solution_text

    ws = Path(tempfile.mkdtemp(prefix=f"{spec.id}-ref-"))
    for path in spec.starter_dir.rglob("*"):
        if path.is_file():
            (ws / path.relative_to(spec.starter_dir)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, ws / path.relative_to(spec.starter_dir))
    for rel, src in spec.solution_sources().items():
        (ws / rel).write_text(solution_text(src.read_text(encoding="utf-8"), rel), encoding="utf-8")
    return ws


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="start at this seed index (to extend an earlier run without repeating its seeds)",
    )
    parser.add_argument(
        "-k",
        dest="keyword",
        default=None,
        help="pytest -k expression: only the matching tests (e.g. the fast ones of a slow lab)",
    )
    args = parser.parse_args()
    os.environ.update(ROADMAP_DEVICE="cpu", TRITON_INTERPRET="1", PYTHONDONTWRITEBYTECODE="1")
    import pytest

    from roadmap_cli.labs.spec import find_lab

    spec = find_lab(args.lab)
    ws = solution_workspace(spec)
    os.environ["ROADMAP_WORKSPACE"] = str(ws)
    targets = [str(spec.tests_dir / t) for p in spec.parts if not p.needs_cuda for t in p.tests]
    total = Outcomes()
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        os.environ["ROADMAP_SECRET_SEED"] = str(1_000_003 * seed + 17)
        pytest.main(
            [
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "roadmap_cli.grading.plugin",
                "--rootdir",
                str(spec.tests_dir),
                "-c",
                os.devnull,
                "--no-header",
                "-o",
                "console_output_style=classic",
                *(["-k", args.keyword] if args.keyword else []),
                *targets,
            ],
            plugins=[total],
        )
    elapsed = time.perf_counter() - t0
    print(f"\n{spec.id}: {args.seeds} secret seeds, {total.ran} test runs, {elapsed:.0f} s")
    if not total.failed:
        print("false fails: 0")
        return 0
    for nodeid, messages in sorted(total.failed.items()):
        print(f"FALSE FAIL {len(messages)}/{args.seeds}  {nodeid}: {messages[0]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
