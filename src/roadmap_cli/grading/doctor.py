"""`roadmap doctor`: what this machine can grade.

torch is probed in a child process (a broken CUDA install can hang or crash
an import; the CLI itself never imports torch).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional

PROBE = r"""
import json, os, sys
info = {}
try:
    import torch
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    info["cuda_available"] = torch.cuda.is_available()
    if info["cuda_available"]:
        info["gpu"] = torch.cuda.get_device_name(0)
        info["capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
        info["gpu_count"] = torch.cuda.device_count()
        props = torch.cuda.get_device_properties(0)
        info["shared_per_block"] = int(getattr(props, "shared_memory_per_block_optin", 0) or
                                       getattr(props, "shared_memory_per_block", 0) or 0)
except Exception as exc:
    info["torch_error"] = repr(exc)[:300]
try:
    import triton
    info["triton"] = triton.__version__
except Exception as exc:
    info["triton_error"] = repr(exc)[:300]
print(json.dumps(info))
"""


@dataclass
class Check:
    name: str
    ok: Optional[bool]  # None: optional and missing
    value: str


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)
    device: str = "cpu"
    cuda: bool = False
    labs: list[dict] = field(default_factory=list)  # {id, gradable: [...], not_gradable: [...]}
    manifest: dict = field(default_factory=dict)  # grading/manifest.py's status: source, ok, first changed file
    notes: list[str] = field(default_factory=list)


def _tool_version(cmd: list[str], pattern: str) -> Optional[str]:
    exe = shutil.which(cmd[0])
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out)
    return match.group(1) if match else out.strip().splitlines()[0] if out.strip() else "?"


def probe_torch(timeout: float = 120) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"torch_error": f"importing torch took more than {timeout:g} s"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"torch_error": (proc.stderr or "the probe printed nothing").strip()[-300:]}


def run_doctor() -> DoctorReport:
    from roadmap_cli.labs.device import detect_device
    from roadmap_cli.grading.selection import gradable_parts
    from roadmap_cli.labs.spec import load_all

    device = detect_device()
    torch_info = probe_torch()
    report = DoctorReport(device=device.name, cuda=device.cuda)
    add = report.checks.append
    add(Check("python", sys.version_info >= (3, 10), f"{platform.python_version()} ({sys.executable})"))
    add(Check("torch", "torch" in torch_info, torch_info.get("torch") or torch_info.get("torch_error", "missing")))
    add(
        Check(
            "torch CUDA build",
            bool(torch_info.get("torch_cuda")) or None,
            torch_info.get("torch_cuda") or "CPU-only build",
        )
    )
    add(
        Check(
            "triton",
            "triton" in torch_info or None,
            torch_info.get("triton") or torch_info.get("triton_error", "missing"),
        )
    )
    gpu = torch_info.get("gpu")
    add(
        Check(
            "CUDA GPU",
            bool(torch_info.get("cuda_available")) or None,
            f"{gpu} (compute capability {torch_info.get('capability')})" if gpu else f"none ({device.reason})",
        )
    )
    nvcc = _tool_version(["nvcc", "--version"], r"release ([\d.]+)")
    add(Check("nvcc", bool(nvcc) or None, nvcc or "not found (CUDA C parts need it with a GPU)"))
    git = _tool_version(["git", "--version"], r"git version (\S+)")
    add(Check("git", bool(git), git or "not found (workspaces and dev check need git)"))
    from roadmap_cli.grading_kit import oswall

    try:
        strength, why = oswall.status()
    except oswall.WallUnavailable as exc:
        strength, why = oswall.WEAK, str(exc)
    if strength == oswall.STRONG:
        add(Check("sandbox", True, "strong: learner code runs behind bubblewrap (own namespaces, references absent)"))
    else:
        add(
            Check(
                "sandbox",
                None,
                f"weak: {why}; grades use the in-process sandbox only (install bubblewrap, "
                "e.g. the Debian package `bubblewrap`)",
            )
        )
    add(
        Check(
            "grading mode",
            True,
            "CUDA: every part"
            if device.cuda
            else "CPU: Triton under TRITON_INTERPRET=1; parts that need a CUDA GPU are not graded here",
        )
    )
    if device.cuda and not torch_info.get("cuda_available"):
        report.notes.append("nvidia-smi sees a GPU but torch cannot use it: check the driver / CUDA build")
    if shutil.which("nvidia-smi") is not None and os.environ.get("ROADMAP_DEVICE") != "cpu":
        # What a CUDA grade needs beyond "torch sees a GPU" (issue 37): each a fact a grade would fail on.
        facts = gpu_facts(torch_info, nvcc)
        for check in gpu_checks(facts):
            add(check)
    specs, broken = load_all()
    for lab_id, exc in broken.items():
        report.notes.append(f"lab {lab_id} is invalid: {exc.details[0] if exc.details else exc.message}")
    from roadmap_cli.grading import manifest

    report.manifest = manifest.status([spec.root for spec in specs])
    add(Check("grader files", report.manifest["ok"], report.manifest["line"]))
    if report.manifest["ok"] is False:
        # Every grade refuses until the files are what was installed again.
        report.notes.append(
            f"{report.manifest['line']}. Grades are refused until the grader's files match the "
            "install: reinstall roadmap (pip install --force-reinstall roadmap-cli, or in a "
            "checkout `git checkout -- FILE` / `pip install -e .`); lab authors who change a lab "
            f"on purpose set {manifest.UNLOCK_ENV}=1"
        )
    for spec in specs:
        here = gradable_parts(spec, device)
        report.labs.append(
            {
                "id": spec.id,
                "stage": spec.stage,
                "gradable": here,
                "not_gradable": [p.id for p in spec.parts if p.id not in here],
            }
        )
    return report


def sandbox_report() -> dict:
    """`roadmap doctor --sandbox`: the OS wall here, and everything learner code
    sees behind it (grading_kit/oswall.py's system part, grading/isolation.py's
    per grade), in the order bwrap builds it; a grade's own folders are named
    by what they are (<workspace>, ...), the rest by their real path."""
    from types import SimpleNamespace

    from roadmap_cli.grading import isolation
    from roadmap_cli.grading_kit import oswall

    try:
        strength, why = oswall.status()
    except oswall.WallUnavailable as exc:
        strength, why = oswall.WEAK, str(exc)
    rows = [{"access": access, "path": path, "why": reason} for access, path, reason in oswall.describe(None)]
    rows += [
        {"access": "read-only", "path": path, "why": "the Python runtime and site-packages"}
        for path in oswall.python_runtime()
    ]
    names = {"read_only": "read-only", "read_write": "read-write", "hide": "absent"}
    lab = SimpleNamespace(root="/<lab>")
    for kind, path, reason in isolation.learner_grants(lab, "<workspace>", "<grade scratch>", "<adapter shim>"):
        rows.append({"access": names[kind], "path": path.replace("/<lab>", "<lab folder>"), "why": reason})
    inside = isolation._view([], [])  # what is absent again inside the runtime granted above
    for kind, path in oswall._mounts(inside):
        if kind == "hide":
            rows.append({"access": "absent", "path": path, "why": inside["why"].get(path, "")})
    return {
        "sandbox": strength,
        "why": why,
        "uid": oswall.LEARNER_UID,
        "home": oswall.LEARNER_HOME,
        "view": rows if strength == oswall.STRONG else [],
        "line": (
            "strong: learner code, the C++ compiler and test binaries see only what is listed; nothing else "
            "exists for them"
            if strength == oswall.STRONG
            else f"weak: {why}; learner code runs as you, with the in-process sandbox only (install bubblewrap)"
        ),
    }


# ------------------------------------------------------------------ GPU facts (a CUDA grade's needs)

_WALLED_PROBE = (
    "import json, torch\n"
    "ok = torch.cuda.is_available()\n"
    "print(json.dumps({'available': ok, 'count': torch.cuda.device_count() if ok else 0}))\n"
)


def walled_python(code: str, timeout: float) -> subprocess.CompletedProcess:
    """`code` run where a learner process runs: behind the OS wall (when this machine has it), with the
    learner's environment and folders (grading_kit/learner_extras.py). Output as bytes."""
    import tempfile
    from pathlib import Path

    from roadmap_cli.grading.isolation import learner_view
    from roadmap_cli.grading_kit import oswall, sandbox
    from roadmap_cli.labs.spec import all_labs

    with tempfile.TemporaryDirectory(prefix="roadmap-walled-") as tmp:
        ws, scratch, shim = (Path(tmp) / n for n in ("ws", "scratch", "shim"))
        for folder in (ws, scratch, shim):
            folder.mkdir()
        try:
            strong = oswall.status()[0] == oswall.STRONG
        except oswall.WallUnavailable:
            strong = False
        specs = all_labs()
        view = learner_view(specs[0], str(ws), str(scratch), str(shim)) if strong and specs else None
        env = sandbox.learner_env({"workspace": str(ws), "os_wall": view})
        with oswall.walled([sys.executable, "-I", "-c", code], view) as (argv, fds):
            return subprocess.run(
                argv, env=env, cwd=ws, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, pass_fds=fds
            )


def _nvidia_smi(*args: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def gpu_facts(torch_info: dict, nvcc: Optional[str]) -> dict:
    """Everything gpu_checks judges, gathered here (nvidia-smi, the torch probe, a walled probe)."""
    header = _nvidia_smi()
    driver = re.search(r"Driver Version:\s*([\d.]+)", header)
    driver_cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    modes = [
        m.strip() for m in _nvidia_smi("--query-gpu=compute_mode", "--format=csv,noheader").splitlines() if m.strip()
    ]
    try:
        import ninja

        ninja_path: Optional[str] = os.path.join(ninja.BIN_DIR, "ninja")
    except ImportError:
        ninja_path = shutil.which("ninja")
    walled: dict = {}
    try:
        proc = walled_python(_WALLED_PROBE, 180)
        walled = (
            json.loads(proc.stdout.decode().strip().splitlines()[-1])
            if proc.returncode == 0
            else {
                "error": proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
            }
        )
    except (subprocess.TimeoutExpired, ValueError, IndexError, OSError) as exc:
        walled = {"error": [str(exc)]}
    return {
        "torch_cuda": torch_info.get("torch_cuda"),
        "driver": driver.group(1) if driver else None,
        "driver_cuda": driver_cuda.group(1) if driver_cuda else None,
        "nvcc": nvcc,
        "ninja": ninja_path,
        "compute_modes": modes,
        "shared_per_block": torch_info.get("shared_per_block"),
        "capability": torch_info.get("capability"),
        "walled": walled,
    }


def _version_tuple(text: Optional[str]) -> Optional[tuple[int, ...]]:
    match = re.match(r"(\d+)(?:\.(\d+))?", text or "")
    return (int(match.group(1)), int(match.group(2) or 0)) if match else None


def gpu_checks(facts: dict) -> list[Check]:
    """The GPU lines of `roadmap doctor`, judged from `facts` (gpu_facts; tests give their own)."""
    checks = []
    torch_cuda, driver_cuda = _version_tuple(facts.get("torch_cuda")), _version_tuple(facts.get("driver_cuda"))
    if torch_cuda is None:
        checks.append(
            Check(
                "driver vs torch CUDA",
                False,
                "torch is a CPU-only build: install the CUDA wheel for your driver (README: Which torch to install)",
            )
        )
    elif driver_cuda is None:
        checks.append(
            Check(
                "driver vs torch CUDA",
                None,
                f"torch built for CUDA {facts['torch_cuda']}; the "
                "driver's CUDA version is unknown (nvidia-smi said none)",
            )
        )
    elif driver_cuda[0] < torch_cuda[0]:
        checks.append(
            Check(
                "driver vs torch CUDA",
                False,
                f"driver {facts.get('driver')} supports CUDA "
                f"{facts['driver_cuda']}, torch was built for {facts['torch_cuda']}: torch cannot use "
                "the GPU; update the driver or install the wheel for your CUDA",
            )
        )
    elif driver_cuda < torch_cuda:
        checks.append(
            Check(
                "driver vs torch CUDA",
                None,
                f"driver supports CUDA {facts['driver_cuda']}, torch "
                f"built for {facts['torch_cuda']}: runs by minor-version compatibility, but kernels "
                "needing a newer PTX (Triton's) may fail to load; a newer driver is safer",
            )
        )
    else:
        checks.append(
            Check(
                "driver vs torch CUDA",
                True,
                f"driver {facts.get('driver')} (CUDA {facts['driver_cuda']}) >= torch's CUDA {facts['torch_cuda']}",
            )
        )
    nvcc = _version_tuple(facts.get("nvcc"))
    if nvcc is None:
        checks.append(
            Check(
                "nvcc major",
                False,
                "no nvcc: the CUDA C parts (load_inline) cannot build; "
                "install the CUDA toolkit matching torch's CUDA major",
            )
        )
    elif torch_cuda is not None and nvcc[0] != torch_cuda[0]:
        checks.append(
            Check(
                "nvcc major",
                False,
                f"nvcc {facts['nvcc']} but torch built for CUDA "
                f"{facts['torch_cuda']}: load_inline refuses a different major version",
            )
        )
    else:
        checks.append(Check("nvcc major", True, f"nvcc {facts['nvcc']}"))
    checks.append(
        Check(
            "ninja",
            bool(facts.get("ninja")),
            facts.get("ninja") or "not found: load_inline needs it (pip install ninja; it is a roadmap dependency)",
        )
    )
    modes = facts.get("compute_modes") or []
    kinds = {m.lower().replace("_", " ").strip() for m in modes}
    # Only the learner process opens a CUDA context (the grader's tensors stay on the CPU: grading_kit/placement.py),
    # so EXCLUSIVE_PROCESS (one context per GPU) grades; PROHIBITED allows no context at all.
    prohibited = any(k.startswith("prohibited") for k in kinds)
    exclusive = any(k.startswith("exclusive") for k in kinds)
    value = ", ".join(modes) or "unknown"
    if prohibited:
        value += ": no process may open a CUDA context, the learner process's included (sudo nvidia-smi -c DEFAULT)"
    elif exclusive:
        value += (
            ": one CUDA context per GPU, the learner process's (the grader opens none); grades on it run "
            "one at a time (dev check -j 1; dev check --gpu does so by itself)"
        )
    checks.append(Check("compute mode", not prohibited if modes else None, value))
    smem = facts.get("shared_per_block")
    if smem:
        small = smem < 160 * 1024
        checks.append(
            Check(
                "shared memory per block",
                True,
                f"{smem // 1024} KB (compute capability "
                f"{facts.get('capability')})" + ("; flash-attention's tiles shrink to fit" if small else ""),
            )
        )
    else:
        checks.append(Check("shared memory per block", None, "unknown (torch sees no GPU)"))
    walled = facts.get("walled") or {}
    if walled.get("available"):
        checks.append(Check("GPU behind the wall", True, f"the learner process sees {walled.get('count')} GPU(s)"))
    else:
        why = "; ".join(walled.get("error") or []) or "torch.cuda.is_available() is False there"
        checks.append(
            Check(
                "GPU behind the wall",
                False,
                f"the learner process cannot use the GPU: {why} "
                "(/dev/nvidia* must be reachable; MPS's pipe folder too)",
            )
        )
    return checks
