"""Benchmark: hostile inputs against every reader of YAML and `roadmap import`.

Runs the probes of tests/hostile_probes.py (billion laughs, 10,000-deep
nesting, a 50 MB file, duplicate keys, unsafe tags, 100,000-deep JSON, a
4 MB string, NaN) in one fresh process with a capped address space, and
prints, per probe: refused cleanly or not, seconds and peak memory, each
also as a ratio to its limit (0.5 s, 200 MB). A ratio above 1.00 fails the
issue 12 budget. Machine noise: the limits are absolute, so the ratios are
against them; run it twice to see the spread.

    python bench/bench_hostile.py [--runs 2]
    python bench/bench_hostile.py --store     # overhead of the store's checks, as ratios
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
    parser.add_argument("--store", action="store_true", help="also measure the store's safety-check overhead")
    args = parser.parse_args()
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            print(f"run {run + 1}/{args.runs}")
            print(table(run_probes(Path(tmp))))


if __name__ == "__main__" and "--store" not in sys.argv:
    main()


def store_overhead(runs: int = 30) -> None:
    """Cost of the store's new safety checks on a well-filled database (1,000
    papers, 3,000 log entries, 300 attempts), alternating with/without in the
    same run: open_store with vs without the malformed-row scan (which the CLI
    runs only after a crash), and open + the first write with vs without the
    quick_check that write commands now pay once."""
    import json as _json
    import statistics
    import time

    import sqlalchemy as sa

    from roadmap_cli.store import engine as store_engine
    from roadmap_cli.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        store = open_store(home)
        parts = _json.dumps([{"id": f"p{i}", "points": 5.0, "max_points": 10.0, "status": "failed"} for i in range(4)])
        with store.connection() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO papers (title, title_key, status, added_on) VALUES (:t, :t, 'read', '2026-01-05')"
                ),
                [{"t": f"paper {i}"} for i in range(1000)],
            )
            conn.execute(
                sa.text(
                    "INSERT INTO cadence_entries (kind, on_date, hours, created_at) "
                    "VALUES ('hours', '2026-01-05', 1.5, '2026-01-05T10:00:00+00:00')"
                ),
                [{}] * 3000,
            )
            conn.execute(
                sa.text(
                    "INSERT INTO grade_attempts (lab_id, started_at, duration_s, outcome, score, max_score, parts, "
                    "perf, device, interpret_mode, workspace, grader_sha256) VALUES ('x', "
                    "'2026-01-05T10:00:00+00:00', 1, 'failed', 20, 40, :p, '[]', 'cpu', 1, '/w', 'h')"
                ),
                [{"p": parts}] * 300,
            )
        store.engine.dispose()
        opened = {True: [], False: []}
        for _ in range(runs):
            for check in (True, False):
                start = time.perf_counter()
                open_store(home, check_rows=check).engine.dispose()
                opened[check].append(time.perf_counter() - start)
        real_check = store_engine._refuse_if_corrupt
        wrote = {True: [], False: []}
        try:
            for i in range(runs):
                for check in (True, False):
                    # What one write command pays: open, then its first write (the check runs once per engine).
                    store_engine._refuse_if_corrupt = real_check if check else (lambda *_: None)
                    start = time.perf_counter()
                    store = open_store(home)
                    with store.connection() as conn:
                        conn.execute(
                            sa.text("INSERT INTO settings VALUES ('k', '1') ON CONFLICT(key) DO UPDATE SET value = '1'")
                        )
                    wrote[check].append(time.perf_counter() - start)
                    store.engine.dispose()
        finally:
            store_engine._refuse_if_corrupt = real_check
        o_with, o_without = statistics.median(opened[True]), statistics.median(opened[False])
        w_with, w_without = statistics.median(wrote[True]), statistics.median(wrote[False])
        print(
            f"open_store: with row check {o_with * 1e3:.2f} ms, without {o_without * 1e3:.2f} ms, ratio {o_with / o_without:.2f}x"
        )
        print(
            f"open + first write: with quick_check {w_with * 1e3:.2f} ms, without {w_without * 1e3:.2f} ms, ratio {w_with / w_without:.2f}x"
        )


if __name__ == "__main__" and "--store" in sys.argv:
    store_overhead()
