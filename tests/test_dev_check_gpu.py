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


GPU_PARTS = {
    "cuda-matmul": {"vector-add", "matmul", "cuda-vector-add", "cuda-matmul", "performance"},
    "flash-attention": {"triton-forward", "causal", "gqa", "backward", "performance"},
    "paged-kv-cache": {"triton-paged-attention", "performance"},
    "gpu-architecture": {"gpu-measurements"},
    "profiling": {"cuda-trace"},
}


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
    # Exactly the parts whose code runs differently on a GPU (lab.yaml's `triton` and `needs_cuda`), never a
    # part that only runs torch code (flash-attention's reference-torch and tiled-torch).
    assert listed == GPU_PARTS, listed
    benches = {r["check"].removeprefix("bench ") for r in rows if r["check"].startswith("bench ")}
    assert benches == {p.name for p in (ROOT / "kernels").glob("bench_*.py")} and benches
    checks = {r["check"] for r in rows}
    assert {"doctor", "is_cuda round trip", "load_inline behind the wall"} <= checks
    assert all(r["ok"] is None for r in rows)  # nothing ran


def test_dry_run_alone_and_the_gpu_run_without_a_gpu_are_one_line_errors(run_cli, shipped_labs) -> None:
    alone = run_cli("dev", "check", "--dry-run")
    assert alone.exit_code == 2 and "--dry-run goes with --gpu" in (alone.stdout + alone.stderr)
    no_gpu = run_cli("dev", "check", "--gpu", "flash-attention")
    assert (
        no_gpu.exit_code == 2
        and "needs a CUDA GPU" in no_gpu.stderr
        and "Traceback" not in no_gpu.stderr + no_gpu.stdout
    )


def test_on_a_gpu_dev_check_skips_interpreter_only_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    from roadmap_cli.authoring.devcheck import check_wrong
    from roadmap_cli.labs.device import DeviceInfo
    from roadmap_cli.labs.spec import find_lab

    monkeypatch.delenv("ROADMAP_LABS_DIR", raising=False)
    spec = find_lab("cuda-matmul")
    gpu = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", "9.0")
    row = check_wrong(spec, "grid-one-extra-row", gpu)  # returns before grading: nothing runs here
    assert row.ok is None and "interpreter-only" in row.got


def test_triton_declarations_are_held_to_the_reference_solution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`triton: true` is a declared fact that dev check's static row checks against the solution."""
    import shutil

    from roadmap_cli.authoring.devcheck import static_problems, triton_declaration_problems
    from roadmap_cli.errors import ValidationError
    from roadmap_cli.labs.spec import find_lab

    shutil.copytree(ROOT / "labs" / "paged-kv-cache", tmp_path / "labs" / "paged-kv-cache")
    shutil.copytree(ROOT / "tests" / "fixtures_labs" / "labs" / "adder", tmp_path / "labs" / "adder")
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    shutil.copytree(ROOT / "tests" / "fixtures_labs" / "kernels", tmp_path / "kernels", dirs_exist_ok=True)
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(tmp_path / "labs"))
    assert triton_declaration_problems(find_lab("paged-kv-cache")) == []
    yaml_path = tmp_path / "labs" / "paged-kv-cache" / "lab.yaml"
    text = yaml_path.read_text(encoding="utf-8")
    yaml_path.write_text(text.replace("    triton: true", "    triton: false"), encoding="utf-8")
    problems = triton_declaration_problems(find_lab("paged-kv-cache"))
    assert len(problems) == 1 and "triton_paged_attention.py" in problems[0] and "no part declares" in problems[0]
    assert any("no part declares" in p for p in static_problems(find_lab("paged-kv-cache")))
    adder_yaml = tmp_path / "labs" / "adder" / "lab.yaml"
    adder = adder_yaml.read_text(encoding="utf-8")
    declared = '    tests: ["test_add.py"]\n'
    adder_yaml.write_text(adder.replace(declared, declared + "    triton: true\n"), encoding="utf-8")
    problems = triton_declaration_problems(find_lab("adder"))
    assert len(problems) == 1 and "has no @triton.jit kernel" in problems[0]
    adder_yaml.write_text(adder.replace(declared, declared + "    triton: yes-please\n"), encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        find_lab("adder")
    assert "triton" in " ".join([info.value.message, *info.value.details])


FAKE_GPU = """
from roadmap_cli.grading_kit import placement, wire
_arrive, _record = placement.arrive, wire._tensor_record
placement.arrive = lambda t, device: _arrive(t, "cpu")  # this machine's stand-in for the GPU
wire._tensor_record = lambda t: wire.Tagged("tensor", _record(t).data[:-1] + ("cuda:0",))
"""


def test_the_is_cuda_probe_runs_end_to_end_with_the_gpu_faked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The three processes of the round trip (grader, walled learner, grader) with the GPU itself faked: the
    probes' code runs as written (a missing import fails here, not on the first GPU)."""
    import json
    import subprocess
    import sys

    from roadmap_cli.authoring import gpucheck
    from roadmap_cli.grading import doctor

    def walled(code: str, timeout: float):
        return subprocess.run([sys.executable, "-I", "-c", FAKE_GPU + code], capture_output=True, timeout=timeout)

    monkeypatch.setattr(doctor, "walled_python", walled)
    step = next(s for s in gpucheck.plan([]) if s.kind == "is_cuda")
    row = gpucheck._probe_row(step)
    got = json.loads(row.got)
    # Everything but the arrival on a real GPU holds.
    assert got == {
        "arrived_on_cuda": False,
        "arrived_stride": [1, 3],
        "returned_on_cuda": True,
        "device": "cpu",
        "learner_device": "cuda:0",
        "stride": [1, 3],
        "equal": True,
        "grader_cuda_initialized": False,
    }, got
    assert row.ok is False


def test_benches_reuse_the_runs_build_caches_and_find_ninja(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_matmul's CUDA C is the lab solution's: the benches build in the folder the run's grades used (nvcc
    not paid again against the bench's time limit), with ninja on PATH; a bench past its limit is a failed row,
    not a traceback."""

    from roadmap_cli.authoring import gpucheck
    from roadmap_cli.grading_kit import learner_extras

    monkeypatch.setenv(learner_extras.CACHE_VAR, str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv(learner_extras.SCOPE_VAR, gpucheck.CACHE_SCOPE)
    env = gpucheck.benches_env()
    assert env["TORCH_EXTENSIONS_DIR"] == str(learner_extras.extensions_dir(str(tmp_path / "some-grade-ws")))
    assert env["TRITON_CACHE_DIR"] == str(learner_extras.triton_cache_dir(str(tmp_path / "another-ws")))
    ninja = pytest.importorskip("ninja")
    assert env["PATH"].split(":")[0] == ninja.BIN_DIR
    monkeypatch.setattr(gpucheck, "BENCH_TIMEOUT_S", 1)
    slow = tmp_path / "bench_slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    step = gpucheck.Step("bench", "kernels", "bench bench_slow.py", "--quick exits 0", path=str(slow), env=env)
    row = gpucheck._run_step(step, None, None, None)
    assert row.ok is False and "timed out" in row.got
    echo = tmp_path / "bench_echo.py"
    echo.write_text("import os\nprint(os.environ['TORCH_EXTENSIONS_DIR'])\n")
    step = gpucheck.Step("bench", "kernels", "bench bench_echo.py", "--quick exits 0", path=str(echo), env=env)
    row = gpucheck._run_step(step, None, None, None)
    assert row.ok is True and row.detail.strip() == env["TORCH_EXTENSIONS_DIR"]
