"""`roadmap dev check --gpu`: everything whose code runs differently on a GPU, in one table, in minutes.

No GPU has run this project's GPU paths in CI; this is the check to run on
the first machine that has one (docs/labs.md, "Verifiable only on a GPU").
In order:

  doctor         `roadmap doctor`'s GPU facts (driver vs the wheel's CUDA,
                 nvcc, ninja, compute mode, shared memory, the GPU behind the wall)
  is_cuda        a CUDA tensor made behind the wall comes back a CUDA tensor
  load_inline    a CUDA extension built and run behind the wall
  solution       each lab's reference on its GPU parts (must pass)
  wrong:<id>     each wrong variant of those parts that is not interpreter-only (must fail)
  bench          every kernels/bench_*.py --quick (must exit 0)

A GPU part is a `needs_cuda` part, or one whose tests (or the grader helper
modules they import) reach the device: Triton kernels run compiled there
instead of under the interpreter, torch code runs on CUDA tensors. The
plan is computed without a GPU: `--dry-run` lists it (CI runs that).
"""

from __future__ import annotations

import json
import os
import re
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
# What in a test file (or a grader helper it imports) means it runs on the device when there is one.
_DEVICE_MARK = re.compile(r"has_cuda|ON_GPU|\bdevice\(\)|interpret_mode|\btriton\b(?!_)|\.cuda\(|device=\"cuda\"")


@dataclass
class Step:
    kind: str  # doctor | is_cuda | load_inline | solution | wrong | bench
    lab: str
    check: str
    expected: str
    parts: tuple[str, ...] = ()
    wrong: str = ""
    path: str = ""


def _test_files(spec: LabSpec, prefix: str) -> list[Path]:
    target = spec.tests_dir / prefix.split("::")[0]
    if target.is_file():
        return [target]
    return sorted(target.glob("test_*.py")) if target.is_dir() else []


def gpu_parts(spec: LabSpec) -> list[str]:
    """The lab's parts whose code runs differently on a GPU."""
    helpers = {p.stem: p.read_text(encoding="utf-8") for p in spec.tests_dir.glob("*.py")
               if not p.name.startswith("test_") and p.stem not in ("adapter", "conftest")}
    found = []
    for part in spec.parts:
        reaches = part.needs_cuda
        for prefix in part.tests:
            for path in _test_files(spec, prefix):
                text = path.read_text(encoding="utf-8")
                imported = [h for name, h in helpers.items() if re.search(rf"^\s*(?:import|from) {name}\b", text, re.M)]
                reaches = reaches or any(_DEVICE_MARK.search(t) for t in (text, *imported))
        if reaches:
            found.append(part.id)
    return found


def benches() -> list[Path]:
    from roadmap_cli import paths

    return sorted(paths.kernels_root().glob("bench_*.py"))


def plan(specs: list[LabSpec]) -> list[Step]:
    steps = [Step("doctor", "-", "doctor", "every GPU check ok"),
             Step("is_cuda", "-", "is_cuda round trip", "a CUDA tensor crosses the wire as a CUDA tensor"),
             Step("load_inline", "-", "load_inline behind the wall", "a CUDA extension builds and runs")]
    for spec in specs:
        parts = gpu_parts(spec)
        if not parts:
            continue
        steps.append(Step("solution", spec.id, "solution", f"passes {', '.join(parts)}", tuple(parts)))
        for wrong in spec.wrong:
            hit = tuple(p for p in wrong.fails if p in parts)
            if hit:
                expected = ("skipped: interpreter-only" if wrong.interpreter_only else f"fails {', '.join(hit)}")
                steps.append(Step("wrong", spec.id, f"wrong:{wrong.id}", expected, hit, wrong.id))
    steps += [Step("bench", "kernels", f"bench {path.name}", "--quick exits 0", path=str(path)) for path in benches()]
    return steps


def dry_run(specs: list[LabSpec]) -> DevCheckReport:
    report = DevCheckReport(device="dry run (nothing runs)")
    report.rows = [CheckRow(s.lab, s.check, s.expected, "would run" if not s.expected.startswith("skipped") else
                            "skipped", None) for s in plan(specs)]
    return report


# ------------------------------------------------------------------ running it on a GPU


def run_gpu_check(specs: list[LabSpec], *, jobs: int = 4, on_row: Optional[Callable[[CheckRow], None]] = None,
                  device: Optional[DeviceInfo] = None) -> DevCheckReport:
    from concurrent.futures import ThreadPoolExecutor

    from roadmap_cli.grading.runner import warm_graders

    device = device or detect_device()
    if not device.cuda:
        raise UserError(f"dev check --gpu needs a CUDA GPU that torch can use ({device.reason or 'none here'}); "
                        "`roadmap dev check --gpu --dry-run` lists what it would run")
    report = DevCheckReport(device=f"{device.kind} ({device.name})")
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

    warm = warm_graders(device)
    try:
        # The machine checks first, alone (a broken driver explains every later failure); then the grades.
        report.rows += [run(s) for s in steps if s.kind in ("doctor", "is_cuda", "load_inline")]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            report.rows += list(pool.map(run, [s for s in steps if s.kind in ("solution", "wrong")]))
    finally:
        warm.close()
    report.rows += [run(s) for s in steps if s.kind == "bench"]  # alone on the GPU: they time kernels
    return report


def _run_step(step: Step, spec: Optional[LabSpec], device: DeviceInfo, warm) -> CheckRow:
    from roadmap_cli.labs import workspace as ws

    if step.kind == "doctor":
        return _doctor_row(step)
    if step.kind in ("is_cuda", "load_inline"):
        return _probe_row(step)
    if step.kind == "bench":
        proc = subprocess.run([sys.executable, step.path, "--quick"], capture_output=True, text=True,
                              timeout=BENCH_TIMEOUT_S, stdin=subprocess.DEVNULL)
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-12:]
        return CheckRow(step.lab, step.check, step.expected, f"exit {proc.returncode}", proc.returncode == 0,
                        detail="\n".join(tail))
    assert spec is not None
    if step.kind == "solution":
        run = _grade_in(spec, lambda d: ws.write_solution(spec, d), parts=list(step.parts), device=device, warm=warm)
        ok = run.outcome == "passed" and all(run.part(p).status == "passed" for p in step.parts)
        return CheckRow(spec.id, step.check, step.expected, _statuses(run, list(step.parts)), ok,
                        detail="" if ok else f"{run.outcome}: {run.message or ''} {run.log_tail[-600:]}")
    if step.expected.startswith("skipped"):
        return CheckRow(spec.id, step.check, step.expected, "skipped", None)

    def build(d: Path) -> None:
        ws.write_solution(spec, d)
        ws.apply_patch(spec.patch_file(step.wrong), d)

    run = _grade_in(spec, build, parts=list(step.parts), device=device, stop_part_on_fail=True, warm=warm)
    ok = all(run.part(p).status == "failed" for p in step.parts)
    return CheckRow(spec.id, step.check, step.expected, _statuses(run, list(step.parts)), ok,
                    detail="" if ok else "a wrong variant passed on the GPU: the check that catches it may be "
                                         "interpreter-only (mark it `interpreter_only: true`) or missing")


def _doctor_row(step: Step) -> CheckRow:
    from roadmap_cli.grading.doctor import run_doctor

    report = run_doctor()
    gpu = [c for c in report.checks if c.name in GPU_CHECKS]
    bad = [f"{c.name}: {c.value}" for c in gpu if c.ok is not True]
    return CheckRow(step.lab, step.check, step.expected, f"{len(gpu) - len(bad)}/{len(gpu)} ok", not bad,
                    detail="\n".join(bad))


GPU_CHECKS = ("CUDA GPU", "driver vs torch CUDA", "nvcc major", "ninja", "compute mode", "shared memory per block",
              "GPU behind the wall")

_PROBE_IS_CUDA = r"""
import torch
from roadmap_cli.grading_kit import wire
t = torch.arange(6, device="cuda", dtype=torch.float16).reshape(2, 3).t()
sys.stdout.buffer.write(wire.dumps_reply(wire.encode(t, lambda obj: 0)))
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
            proc = _walled(_PROBE_IS_CUDA, 120)
            if proc.returncode != 0:
                return CheckRow(step.lab, step.check, step.expected, f"exit {proc.returncode}", False,
                                detail=proc.stderr.decode(errors="replace")[-800:])
            got = _decode_in_child(proc.stdout)
            ok = got.get("is_cuda") is True and got.get("equal") is True
            return CheckRow(step.lab, step.check, step.expected, json.dumps(got), ok)
        proc = _walled(_PROBE_LOAD_INLINE, 420)
        out = proc.stdout.decode(errors="replace").strip()
        ok = proc.returncode == 0 and out.endswith("ok")
        return CheckRow(step.lab, step.check, step.expected, out[-80:] or f"exit {proc.returncode}", ok,
                        detail="" if ok else proc.stderr.decode(errors="replace")[-1200:])
    except subprocess.TimeoutExpired as exc:
        return CheckRow(step.lab, step.check, step.expected, f"timed out after {exc.timeout:g} s", False)


_DECODE = r"""
import json, sys, torch
from roadmap_cli.grading_kit import wire
t = wire.decode(wire.loads_reply(sys.stdin.buffer.read()), lambda i, n: None)
want = torch.arange(6, dtype=torch.float16).reshape(2, 3).t()
print(json.dumps({"is_cuda": t.is_cuda, "device": str(t.device), "stride": list(t.stride()),
                  "equal": bool(torch.equal(t.cpu(), want)) and t.stride() == want.stride()}))
"""


def _decode_in_child(payload: bytes) -> dict:
    """The grader's side of the round trip, in a child (this process never imports torch)."""
    proc = subprocess.run([sys.executable, "-I", "-c", _DECODE], input=payload, capture_output=True, timeout=120,
                          env={**os.environ})
    try:
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": proc.stderr.decode(errors="replace")[-300:]}
