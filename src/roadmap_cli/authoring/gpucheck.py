"""`roadmap dev check --gpu`: everything whose code runs differently on a GPU, in one table, in minutes.

No GPU has run this project's GPU paths in CI; this is the check to run on
the first machine that has one (docs/labs.md, "Verifiable only on a GPU").
In order:

  doctor         `roadmap doctor`'s GPU facts (driver vs the wheel's CUDA,
                 nvcc, ninja, compute mode, shared memory, the GPU behind the wall)
  is_cuda        a grader's CPU tensor arrives on the GPU behind the wall, and the CUDA
                 result comes back recorded as CUDA; the grader never opens a context
  load_inline    a CUDA extension built and run behind the wall
  solution       each lab's reference on its GPU parts (must pass)
  wrong:<id>     each wrong variant of those parts that is not interpreter-only (must fail)
  bench          every kernels/bench_*.py --quick (must exit 0)

A GPU part is one lab.yaml declares `needs_cuda: true` or `triton: true` (the
learner's Triton kernel runs compiled there instead of under the
interpreter); dev check's static row holds `triton:` to the reference
solution. The plan is computed without a GPU: `--dry-run` lists it (CI runs
that).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.authoring.devcheck import CheckRow, DevCheckReport, _grade_in, _statuses
from roadmap_cli.errors import UserError
from roadmap_cli.labs.device import DeviceInfo, detect_device
from roadmap_cli.labs.spec import LabSpec

BUDGET_S = 600  # one GPU, ten minutes: the whole run
BENCH_TIMEOUT_S = 150


@dataclass
class Step:
    kind: str  # doctor | is_cuda | load_inline | solution | wrong | bench
    lab: str
    check: str
    expected: str
    parts: tuple[str, ...] = ()
    wrong: str = ""
    path: str = ""
    env: Optional[dict] = None  # a bench's environment (None: this process's)


def gpu_parts(spec: LabSpec) -> list[str]:
    """The lab's parts whose code runs differently on a GPU, as lab.yaml declares them: `needs_cuda` parts
    and `triton` parts (the learner's Triton kernel, compiled there instead of interpreted). A part that only
    runs torch code is left out: torch on CUDA is torch's to test, not this check's."""
    return [part.id for part in spec.parts if part.needs_cuda or part.triton]


def benches() -> list[Path]:
    from roadmap_cli import paths

    return sorted(paths.kernels_root().glob("bench_*.py"))


def plan(specs: list[LabSpec]) -> list[Step]:
    steps = [
        Step("doctor", "-", "doctor", "every GPU check ok"),
        Step(
            "is_cuda",
            "-",
            "is_cuda round trip",
            "CPU input placed on the GPU in the learner process; its CUDA result recorded as such",
        ),
        Step("load_inline", "-", "load_inline behind the wall", "a CUDA extension builds and runs"),
    ]
    for spec in specs:
        parts = gpu_parts(spec)
        if not parts:
            continue
        steps.append(Step("solution", spec.id, "solution", f"passes {', '.join(parts)}", tuple(parts)))
        for wrong in spec.wrong:
            hit = tuple(p for p in wrong.fails if p in parts)
            if hit:
                expected = "skipped: interpreter-only" if wrong.interpreter_only else f"fails {', '.join(hit)}"
                steps.append(Step("wrong", spec.id, f"wrong:{wrong.id}", expected, hit, wrong.id))
    steps += [Step("bench", "kernels", f"bench {path.name}", "--quick exits 0", path=str(path)) for path in benches()]
    return steps


def dry_run(specs: list[LabSpec]) -> DevCheckReport:
    report = DevCheckReport(device="dry run (nothing runs)")
    report.rows = [
        CheckRow(s.lab, s.check, s.expected, "would run" if not s.expected.startswith("skipped") else "skipped", None)
        for s in plan(specs)
    ]
    return report


# ------------------------------------------------------------------ running it on a GPU


def run_gpu_check(
    specs: list[LabSpec],
    *,
    jobs: int = 4,
    on_row: Optional[Callable[[CheckRow], None]] = None,
    device: Optional[DeviceInfo] = None,
) -> DevCheckReport:
    from concurrent.futures import ThreadPoolExecutor

    from roadmap_cli.grading.launch import warm_graders

    device = device or detect_device()
    if not device.cuda:
        raise UserError(
            f"dev check --gpu needs a CUDA GPU that torch can use ({device.reason or 'none here'}); "
            "`roadmap dev check --gpu --dry-run` lists what it would run"
        )
    report = DevCheckReport(device=f"{device.kind} ({device.name})")
    if exclusive_compute_mode():
        jobs = 1  # one CUDA context per GPU: two grades' learner processes at once, and the second is refused
    steps = plan(specs)
    by_id = {s.id: s for s in specs}
    deadline = time.monotonic() + BUDGET_S

    def run(step: Step) -> CheckRow:
        if time.monotonic() > deadline:
            row = CheckRow(step.lab, step.check, step.expected, f"not run: past the {BUDGET_S} s budget", False)
        else:
            t0 = time.monotonic()
            row = _run_step(step, by_id.get(step.lab), device, warm)
            row.seconds = round(time.monotonic() - t0, 2)
        if on_row:
            on_row(row)
        return row

    from roadmap_cli.grading_kit.learner_extras import SCOPE_VAR

    # Every grade of this run builds in one extensions folder and Triton cache (learner_extras.py says why);
    # the engine (the wall's read-write folders) and every grader (the learner's environment) read it.
    os.environ[SCOPE_VAR] = CACHE_SCOPE
    bench_env = benches_env()
    warm = warm_graders(device)
    try:
        # The machine checks first, alone (a broken driver explains every later failure); then the grades.
        report.rows += [run(s) for s in steps if s.kind in ("doctor", "is_cuda", "load_inline")]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            report.rows += list(pool.map(run, [s for s in steps if s.kind in ("solution", "wrong")]))
    finally:
        warm.close()
        os.environ.pop(SCOPE_VAR, None)
    # Alone on the GPU: they time kernels.
    for step in (s for s in steps if s.kind == "bench"):
        step.env = bench_env
        report.rows.append(run(step))
    return report


CACHE_SCOPE = "dev-check-gpu"


def benches_env() -> dict:
    """The benchmarks' environment (call it with the run's cache scope set): the torch extensions folder and
    Triton cache this run's grades built in, and `ninja` on PATH as a learner process has it (load_inline
    needs it, and `.venv/bin/roadmap` puts no venv on PATH). bench_matmul.py loads the lab solution's CUDA C
    through the same cuda_kernels.py (the extension's name carries its source's hash), so nvcc is not paid
    again against BENCH_TIMEOUT_S."""
    from roadmap_cli.grading_kit.learner_extras import learner_env

    return {**os.environ, **learner_env(os.getcwd(), os.environ.get("PATH", ""))}


def exclusive_compute_mode() -> bool:
    """Whether nvidia-smi puts a GPU in EXCLUSIVE_PROCESS mode (one CUDA context at a time)."""
    from roadmap_cli.grading.doctor import _nvidia_smi

    modes = _nvidia_smi("--query-gpu=compute_mode", "--format=csv,noheader").lower()
    return "exclusive" in modes


def _run_step(step: Step, spec: Optional[LabSpec], device: DeviceInfo, warm) -> CheckRow:
    from roadmap_cli.labs import workspace as ws

    if step.kind == "doctor":
        return _doctor_row(step)
    if step.kind in ("is_cuda", "load_inline"):
        return _probe_row(step)
    if step.kind == "bench":
        try:
            proc = subprocess.run(
                [sys.executable, step.path, "--quick"],
                capture_output=True,
                text=True,
                timeout=BENCH_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                env=step.env,
            )
        except subprocess.TimeoutExpired:
            return CheckRow(step.lab, step.check, step.expected, f"timed out after {BENCH_TIMEOUT_S} s", False)
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-12:]
        return CheckRow(
            step.lab, step.check, step.expected, f"exit {proc.returncode}", proc.returncode == 0, detail="\n".join(tail)
        )
    assert spec is not None
    if step.kind == "solution":
        run = _grade_in(spec, lambda d: ws.write_solution(spec, d), parts=list(step.parts), device=device, warm=warm)
        ok = run.outcome == "passed" and all(run.part(p).status == "passed" for p in step.parts)
        return CheckRow(
            spec.id,
            step.check,
            step.expected,
            _statuses(run, list(step.parts)),
            ok,
            detail="" if ok else f"{run.outcome}: {run.message or ''} {run.log_tail[-600:]}",
        )
    if step.expected.startswith("skipped"):
        return CheckRow(spec.id, step.check, step.expected, "skipped", None)

    def build(d: Path) -> None:
        ws.write_solution(spec, d)
        ws.apply_patch(spec.patch_file(step.wrong), d)

    run = _grade_in(spec, build, parts=list(step.parts), device=device, stop_part_on_fail=True, warm=warm)
    ok = all(run.part(p).status == "failed" for p in step.parts)
    return CheckRow(
        spec.id,
        step.check,
        step.expected,
        _statuses(run, list(step.parts)),
        ok,
        detail=""
        if ok
        else "a wrong variant passed on the GPU: the check that catches it may be "
        "interpreter-only (mark it `interpreter_only: true`) or missing",
    )


def _doctor_row(step: Step) -> CheckRow:
    from roadmap_cli.grading.doctor import run_doctor

    report = run_doctor()
    gpu = [c for c in report.checks if c.name in GPU_CHECKS]
    bad = [f"{c.name}: {c.value}" for c in gpu if c.ok is not True]
    return CheckRow(
        step.lab, step.check, step.expected, f"{len(gpu) - len(bad)}/{len(gpu)} ok", not bad, detail="\n".join(bad)
    )


GPU_CHECKS = (
    "CUDA GPU",
    "driver vs torch CUDA",
    "nvcc major",
    "ninja",
    "compute mode",
    "shared memory per block",
    "GPU behind the wall",
)

# The round trip a grade makes: the grader's CPU tensor, sent as kit.to_device does, arrives on the GPU in the
# (walled) learner process; its CUDA result comes back as CPU data that records the device. Both grader-side
# halves run under the guard that refuses CUDA in the grader process (grading_kit/placement.py).
_GRADER_SEND = r"""
import pickle, sys, torch
from roadmap_cli.grading_kit import placement
placement.guard_grader_against_cuda()
x = torch.arange(6, dtype=torch.float16).reshape(2, 3).t()
sys.stdout.write(pickle.dumps(placement.tag(x, "cuda")).hex())
"""

_PROBE_IS_CUDA = r"""
import pickle, sys, torch
from roadmap_cli.grading_kit import wire
x = pickle.loads(bytes.fromhex(REQUEST))
arrived = [x.is_cuda, list(x.stride())]
y = (x * 2).t().contiguous().t()  # computed on the GPU, returned transposed like its input
sys.stdout.buffer.write(wire.dumps_reply(wire.encode((arrived, y), lambda obj: 0)))
"""

_PROBE_LOAD_INLINE = r"""
import torch
from torch.utils.cpp_extension import load_inline
cuda = '''
__global__ void twice_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    twice_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
'''
ext = load_inline(name="roadmap_gpu_check_twice_v1", cpp_sources="torch::Tensor twice(torch::Tensor x);",
                  cuda_sources=cuda, functions=["twice"], verbose=False)
x = torch.arange(1000, device="cuda", dtype=torch.float32)
y = ext.twice(x)
print("ok" if y.is_cuda and torch.equal(y, 2 * x) else "wrong", flush=True)
"""


def _probe_row(step: Step) -> CheckRow:
    from roadmap_cli.grading.doctor import walled_python as _walled

    try:
        if step.kind == "is_cuda":
            request = _grader_child(_GRADER_SEND, b"")
            proc = _walled(f"REQUEST = {request.decode().strip()!r}\n" + _PROBE_IS_CUDA, 120)
            if proc.returncode != 0:
                return CheckRow(
                    step.lab,
                    step.check,
                    step.expected,
                    f"exit {proc.returncode}",
                    False,
                    detail=proc.stderr.decode(errors="replace")[-800:],
                )
            got = _decode_in_child(proc.stdout)
            ok = (
                got.get("arrived_on_cuda") is True
                and got.get("arrived_stride") == [1, 3]
                and got.get("returned_on_cuda") is True
                and got.get("equal") is True
                and got.get("grader_cuda_initialized") is False
            )
            return CheckRow(step.lab, step.check, step.expected, json.dumps(got), ok)
        proc = _walled(_PROBE_LOAD_INLINE, 420)
        out = proc.stdout.decode(errors="replace").strip()
        ok = proc.returncode == 0 and out.endswith("ok")
        return CheckRow(
            step.lab,
            step.check,
            step.expected,
            out[-80:] or f"exit {proc.returncode}",
            ok,
            detail="" if ok else proc.stderr.decode(errors="replace")[-1200:],
        )
    except subprocess.TimeoutExpired as exc:
        return CheckRow(step.lab, step.check, step.expected, f"timed out after {exc.timeout:g} s", False)
    except RuntimeError as exc:  # the grader-side half failed (its guard refused CUDA, or an import)
        return CheckRow(step.lab, step.check, step.expected, "grader side failed", False, detail=str(exc))


_DECODE = r"""
import json, sys, torch
from roadmap_cli.grading_kit import placement, wire
placement.guard_grader_against_cuda()
(arrived_cuda, arrived_stride), t = wire.decode(wire.loads_reply(sys.stdin.buffer.read()), lambda i, n: None)
want = 2 * torch.arange(6, dtype=torch.float16).reshape(2, 3).t()
print(json.dumps({"arrived_on_cuda": arrived_cuda, "arrived_stride": arrived_stride,
                  "returned_on_cuda": placement.returned_on_cuda(t), "device": str(t.device),
                  "learner_device": str(placement.learner_device(t)), "stride": list(t.stride()),
                  "equal": bool(torch.equal(t, want)) and t.stride() == want.stride(),
                  "grader_cuda_initialized": torch.cuda.is_initialized()}))
"""


def _grader_child(code: str, payload: bytes) -> bytes:
    """`code` as a grader process would run it, in a child (this process never imports torch)."""
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code], input=payload, capture_output=True, timeout=120, env={**os.environ}
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode(errors="replace")[-600:])
    return proc.stdout


def _decode_in_child(payload: bytes) -> dict:
    """The grader's side of the round trip, in a child (this process never imports torch)."""
    try:
        return json.loads(_grader_child(_DECODE, payload).decode().strip().splitlines()[-1])
    except (RuntimeError, ValueError, IndexError) as exc:
        return {"error": str(exc)[-300:]}
