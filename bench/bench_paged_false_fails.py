"""False-fail rate of the paged-kv-cache grader on its reference solution.

Every seed-dependent test of the lab (random traces, random workloads, random
attention inputs, the "the workload must reach case X" strength checks) is run
on the reference solution once per secret seed, in-process (no sandbox: the
verdict logic is the same, only the transport differs). A right solution must
never fail; the script prints, per test, how many seeds failed and the first
message.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_paged_false_fails.py --seeds 200 [--skip-triton]

The workspace is the solution view of the lab (markers stripped) in a temp dir.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "paged-kv-cache"

# (module, test function, parameter sets): the seed-dependent tests.
SEEDED = [
    (
        "test_block_manager",
        "test_random_traces_keep_every_invariant",
        [dict(block_size=b, caching=c) for b in (1, 2, 3, 4) for c in (True, False)],
    ),
    ("test_scheduler", "test_random_workloads_follow_the_handout", [dict(caching=True), dict(caching=False)]),
    ("test_paged_attention", "test_slot_mapping_is_exact", [dict(block_size=b) for b in (1, 3, 16)]),
    ("test_paged_attention", "test_write_kv_is_exact", [dict(block_size=b) for b in (1, 3)]),
    (
        "test_paged_attention",
        "test_paged_attention_matches_gather_then_attend",
        [
            dict(block_size=b, num_heads=h, num_kv_heads=k, distribution=d)
            for b in (1, 3)
            for h, k in ((4, 2), (8, 1))
            for d in ("normal", "shifted")
        ],
    ),
    (
        "test_engine",
        "test_outputs_equal_decoding_each_request_alone",
        [dict(scenario=s) for s in ("prefix-caching", "preemption", "preemption-no-caching", "model-scale")],
    ),
    (
        "test_triton_paged_attention",
        "test_triton_kernel_matches_gather_then_attend",
        [dict(block_size=2, num_heads=4, num_kv_heads=2, head_dim=24, max_len=9)],
    ),
]


def solution_workspace() -> Path:
    from roadmap_cli.labs.starter_build import solution_text

    ws = Path(tempfile.mkdtemp(prefix="paged-ref-"))
    for path in (LAB / "solution").glob("*.py"):
        (ws / path.name).write_text(solution_text(path.read_text(), path.name))
    kernel = ROOT / "kernels" / "triton" / "paged_attention.py"
    (ws / "triton_paged_attention.py").write_text(solution_text(kernel.read_text(), "triton_paged_attention.py"))
    return ws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--skip-triton", action="store_true", help="leave out the (slow) interpreter test")
    parser.add_argument("--only", default="", help="only modules whose name contains this")
    args = parser.parse_args()
    ws = solution_workspace()
    os.environ.update(ROADMAP_WORKSPACE=str(ws), ROADMAP_DEVICE="cpu", TRITON_INTERPRET="1")
    sys.path.insert(0, str(LAB / "tests"))
    import torch

    torch.set_num_threads(1)
    failures: dict[str, list] = {}
    runs: dict[str, int] = {}
    start = time.perf_counter()
    for module_name, fn_name, params in SEEDED:
        if args.skip_triton and "triton" in module_name or args.only not in module_name:
            continue
        module = importlib.import_module(module_name)
        fn = getattr(module, fn_name)
        wants_perf = "record_perf" in inspect.signature(fn).parameters
        for seed in range(args.seeds):
            os.environ["ROADMAP_SECRET_SEED"] = str(1000 + seed)
            for p in params:
                key = f"{module_name}::{fn_name}[{','.join(str(v) for v in p.values())}]"
                runs[key] = runs.get(key, 0) + 1
                try:
                    fn(**p, **({"record_perf": lambda *a, **k: None} if wants_perf else {}))
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    failures.setdefault(key, []).append((seed, "".join(traceback.format_exception_only(exc))[:600]))
    elapsed = time.perf_counter() - start
    total = sum(runs.values())
    failed = sum(len(v) for v in failures.values())
    print(f"{total} seeded test runs over {args.seeds} seeds in {elapsed:.0f}s: {failed} failed")
    for key in sorted(runs):
        bad = failures.get(key, [])
        print(f"  {len(bad):4d}/{runs[key]:<4d} {key}")
        if bad:
            print(f"        first: seed {bad[0][0]}: {bad[0][1].strip()}")


if __name__ == "__main__":
    main()
