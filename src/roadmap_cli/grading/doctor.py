"""`roadmap doctor`: what this machine can grade.

torch is probed in a child process (a broken CUDA install can hang or crash
an import; the CLI itself never imports torch).
"""

from __future__ import annotations

import json
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
    from roadmap_cli.grading.runner import gradable_parts
    from roadmap_cli.labs.spec import load_all

    device = detect_device()
    torch_info = probe_torch()
    report = DoctorReport(device=device.name, cuda=device.cuda)
    add = report.checks.append
    add(Check("python", sys.version_info >= (3, 10), f"{platform.python_version()} ({sys.executable})"))
    add(Check("torch", "torch" in torch_info, torch_info.get("torch") or torch_info.get("torch_error", "missing")))
    add(Check("torch CUDA build", bool(torch_info.get("torch_cuda")) or None, torch_info.get("torch_cuda") or "CPU-only build"))
    add(Check("triton", "triton" in torch_info or None, torch_info.get("triton") or torch_info.get("triton_error", "missing")))
    gpu = torch_info.get("gpu")
    add(Check("CUDA GPU", bool(torch_info.get("cuda_available")) or None,
              f"{gpu} (compute capability {torch_info.get('capability')})" if gpu else f"none ({device.reason})"))
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
        add(Check("sandbox", None, f"weak: {why}; grades use the in-process sandbox only (install bubblewrap, "
                                   "e.g. the Debian package `bubblewrap`)"))
    add(Check("grading mode", True, "CUDA: every part" if device.cuda else
              "CPU: Triton under TRITON_INTERPRET=1; parts that need a CUDA GPU are not graded here"))
    if device.cuda and not torch_info.get("cuda_available"):
        report.notes.append("nvidia-smi sees a GPU but torch cannot use it: check the driver / CUDA build")
    specs, broken = load_all()
    for lab_id, exc in broken.items():
        report.notes.append(f"lab {lab_id} is invalid: {exc.details[0] if exc.details else exc.message}")
    from roadmap_cli.grading import manifest

    report.manifest = manifest.status([spec.root for spec in specs])
    add(Check("grader files", report.manifest["ok"], report.manifest["line"]))
    if report.manifest["ok"] is False:
        # Every grade refuses until the files are what was installed again.
        report.notes.append(f"{report.manifest['line']}. Grades are refused until the grader's files match the "
                            "install: reinstall roadmap (pip install --force-reinstall roadmap-cli, or in a "
                            "checkout `git checkout -- FILE` / `pip install -e .`); lab authors who change a lab "
                            f"on purpose set {manifest.UNLOCK_ENV}=1")
    for spec in specs:
        here = gradable_parts(spec, device)
        report.labs.append({"id": spec.id, "stage": spec.stage, "gradable": here,
                            "not_gradable": [p.id for p in spec.parts if p.id not in here]})
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
    rows += [{"access": "read-only", "path": path, "why": "the Python runtime and site-packages"}
             for path in oswall.python_runtime()]
    names = {"read_only": "read-only", "read_write": "read-write", "hide": "absent"}
    lab = SimpleNamespace(root="/<lab>")
    for kind, path, reason in isolation.learner_grants(lab, "<workspace>", "<grade scratch>", "<adapter shim>"):
        rows.append({"access": names[kind], "path": path.replace("/<lab>", "<lab folder>"), "why": reason})
    inside = isolation._view([], [])  # what is absent again inside the runtime granted above
    for kind, path in oswall._mounts(inside):
        if kind == "hide":
            rows.append({"access": "absent", "path": path, "why": inside["why"].get(path, "")})
    return {"sandbox": strength, "why": why, "uid": oswall.LEARNER_UID, "home": oswall.LEARNER_HOME,
            "view": rows if strength == oswall.STRONG else [],
            "line": ("strong: learner code, the C++ compiler and test binaries see only what is listed; nothing else "
                     "exists for them" if strength == oswall.STRONG else
                     f"weak: {why}; learner code runs as you, with the in-process sandbox only (install bubblewrap)")}
