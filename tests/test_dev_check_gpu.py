"""`roadmap dev check --gpu`: its plan (`--dry-run`, which CI runs: no GPU needed) names every Triton and
needs_cuda part of every lab and every kernel benchmark (issue 37). The run itself needs a GPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def shipped_labs(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ROADMAP_LABS_DIR", raising=False)
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device
    from roadmap_cli.labs.spec import all_labs

    detect_device.cache_clear()
    yield all_labs()
    detect_device.cache_clear()


def _triton_parts(spec) -> set[str]:
    """Parts whose test files launch or inspect Triton kernels, by a test-side reading of their files."""
    found = set()
    for part in spec.parts:
        for prefix in part.tests:
            path = spec.tests_dir / prefix.split("::")[0]
            if path.is_file() and re.search(r"\btriton\b(?!_)|Triton", path.read_text(encoding="utf-8")):
                found.add(part.id)
    return found


def test_the_dry_run_lists_every_gpu_part_and_every_kernel_bench(run_cli, shipped_labs) -> None:
    result = run_cli("dev", "check", "--gpu", "--dry-run", "--json")
    assert result.exit_code == 0, result.stdout[-2000:]
    rows = result.json()["data"]["rows"]
    listed: dict[str, set[str]] = {}
    for row in rows:
        if row["check"] == "solution":
            listed[row["lab"]] = set(row["expected"].removeprefix("passes ").split(", "))
    for spec in shipped_labs:
        want = {p.id for p in spec.parts if p.needs_cuda} | _triton_parts(spec)
        assert want <= listed.get(spec.id, set()), (spec.id, sorted(want - listed.get(spec.id, set())))
        for wrong in spec.wrong:
            hit = [p for p in wrong.fails if p in listed.get(spec.id, set())]
            matching = [r for r in rows if r["lab"] == spec.id and r["check"] == f"wrong:{wrong.id}"]
            assert bool(matching) == bool(hit), (spec.id, wrong.id)
            if matching:
                assert (matching[0]["got"] == "skipped") == wrong.interpreter_only, (spec.id, wrong.id)
    # The Triton parts this issue names, whatever the test-side reading above finds.
    assert {"triton-forward", "causal", "gqa", "backward", "performance"} <= listed["flash-attention"]
    assert {"vector-add", "matmul", "cuda-vector-add", "cuda-matmul", "performance"} <= listed["cuda-matmul"]
    assert {"triton-paged-attention", "performance"} <= listed["paged-kv-cache"]
    benches = {r["check"].removeprefix("bench ") for r in rows if r["check"].startswith("bench ")}
    assert benches == {p.name for p in (ROOT / "kernels").glob("bench_*.py")} and benches
    checks = {r["check"] for r in rows}
    assert {"doctor", "is_cuda round trip", "load_inline behind the wall"} <= checks
    assert all(r["ok"] is None for r in rows)  # nothing ran


def test_dry_run_alone_and_the_gpu_run_without_a_gpu_are_one_line_errors(run_cli, shipped_labs) -> None:
    alone = run_cli("dev", "check", "--dry-run")
    assert alone.exit_code == 2 and "--dry-run goes with --gpu" in (alone.stdout + alone.stderr)
    no_gpu = run_cli("dev", "check", "--gpu", "flash-attention")
    assert no_gpu.exit_code == 2 and "needs a CUDA GPU" in no_gpu.stderr and "Traceback" not in no_gpu.stderr + no_gpu.stdout


def test_on_a_gpu_dev_check_skips_interpreter_only_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    from roadmap_cli.authoring.devcheck import check_wrong
    from roadmap_cli.labs.device import DeviceInfo
    from roadmap_cli.labs.spec import find_lab

    monkeypatch.delenv("ROADMAP_LABS_DIR", raising=False)
    spec = find_lab("cuda-matmul")
    gpu = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", "9.0")
    row = check_wrong(spec, "grid-one-extra-row", gpu)  # returns before grading: nothing runs here
    assert row.ok is None and "interpreter-only" in row.got
