"""Cold vs warm build of the cpp-extension lab's reference C++ (issue 15).

Cold: an empty cache folder, so rms_norm.cpp (torch extension) and the ASan
block-pool test binary are compiled. Warm: the same sources again, found by
hash in the cache (what a second grade of unchanged code pays). Runs
alternate cold/warm `--rounds` times in one process on fresh cache folders;
the box is shared, so the figure to read is the ratio cold / warm.

    .venv/bin/python bench/bench_cpp_extension_build.py [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from roadmap_cli.grading_kit import cpp_build

LAB = Path(__file__).resolve().parents[1] / "labs" / "cpp-extension"


def build_all() -> tuple[float, bool]:
    t0 = time.perf_counter()
    ext = cpp_build.torch_extension([LAB / "solution" / "rms_norm.cpp"], workspace=LAB / "solution")
    asan = cpp_build.asan_binary(
        LAB / "tests" / "block_pool_test.cpp", LAB / "solution", [LAB / "solution" / "block_pool.h"]
    )
    return time.perf_counter() - t0, ext.cached and asan.cached


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    cold, warm = [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="cppext-bench-") as cache:
            os.environ["ROADMAP_CPP_CACHE"] = cache
            t, cached = build_all()
            assert not cached, "a fresh cache folder must compile"
            cold.append(t)
            t, cached = build_all()
            assert cached, "the second build of the same sources must hit the cache"
            warm.append(t)
    c, w = statistics.median(cold), statistics.median(warm)
    print(
        f"cold build (extension + ASan binary): {c:.1f} s   warm (cache hit): {w * 1e3:.1f} ms   "
        f"cold/warm = {c / w:.0f}x   ({args.rounds} round(s), alternating)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
