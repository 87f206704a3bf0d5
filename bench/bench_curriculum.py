"""Benchmark: loading curriculum.yaml cold (parse + validate) vs from the cache.

Two measurements, both alternating cold and cached runs in the same process
run so machine noise hits both alike:
  in-process: load_curriculum(path, cache_dir) with an empty cache dir
              (cold: YAML + pydantic + reference checks) vs a filled one
              (cached: JSON -> model);
  process:    a fresh `python -c "load_curriculum(...)"` each time, which
              also counts the imports the cold path needs (yaml) and the
              cached path skips.
Prints the medians and the ratio cold / cached.

    python bench/bench_curriculum.py [--runs 30]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def in_process(path: Path, runs: int) -> tuple[float, float]:
    from roadmap_cli.curriculum import load_curriculum

    warm = Path(tempfile.mkdtemp(prefix="bench-cur-warm-"))
    load_curriculum(path, cache_dir=warm)  # fills the cache (and warms imports)
    cold, cached = [], []
    for _ in range(runs):
        empty = Path(tempfile.mkdtemp(prefix="bench-cur-cold-"))
        t0 = time.perf_counter()
        load_curriculum(path, cache_dir=empty)
        cold.append(time.perf_counter() - t0)
        shutil.rmtree(empty)
        t0 = time.perf_counter()
        load_curriculum(path, cache_dir=warm)
        cached.append(time.perf_counter() - t0)
    shutil.rmtree(warm)
    return statistics.median(cold), statistics.median(cached)


def in_subprocess(path: Path, runs: int) -> tuple[float, float]:
    code = "import sys; from pathlib import Path; from roadmap_cli.curriculum import load_curriculum; load_curriculum(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))"
    warm = Path(tempfile.mkdtemp(prefix="bench-cur-warm-"))
    subprocess.run([sys.executable, "-c", code, str(path), str(warm)], check=True)
    cold, cached = [], []
    for _ in range(runs):
        empty = Path(tempfile.mkdtemp(prefix="bench-cur-cold-"))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, str(path), str(empty)], check=True)
        cold.append(time.perf_counter() - t0)
        shutil.rmtree(empty)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, str(path), str(warm)], check=True)
        cached.append(time.perf_counter() - t0)
    shutil.rmtree(warm)
    return statistics.median(cold), statistics.median(cached)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--path", type=Path, default=None, help="curriculum file (default: the built-in one)")
    args = parser.parse_args()
    from roadmap_cli.paths import default_curriculum_path

    path = args.path or default_curriculum_path()
    cold, cached = in_process(path, args.runs)
    print(f"in-process  cold {cold * 1000:7.2f} ms   cached {cached * 1000:7.2f} ms   ratio {cold / cached:5.1f}x")
    cold, cached = in_subprocess(path, max(5, args.runs // 3))
    print(f"process     cold {cold * 1000:7.2f} ms   cached {cached * 1000:7.2f} ms   ratio {cold / cached:5.2f}x")


if __name__ == "__main__":
    main()
