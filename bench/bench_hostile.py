"""Benchmark: hostile inputs against every reader of YAML and `roadmap import`.

Runs the probes of tests/hostile_probes.py (billion laughs, 10,000-deep
nesting, a 50 MB file, duplicate keys, unsafe tags, 100,000-deep JSON, a
16 MB string, NaN) in one fresh process with a capped address space, and
prints, per probe: refused cleanly or not, seconds and peak memory, each
also as a ratio to its limit (0.5 s, 200 MB). A ratio above 1.00 fails the
issue 12 budget. Machine noise: the limits are absolute, so the ratios are
against them; run it twice to see the spread.

    python bench/bench_hostile.py [--runs 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hostile_probes import run_probes, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            print(f"run {run + 1}/{args.runs}")
            print(table(run_probes(Path(tmp))))


if __name__ == "__main__":
    main()
