"""Is there a CUDA GPU that torch can use? Answered without importing torch.

`roadmap grade` must stay light, so the parent process never imports torch:
it asks `nvidia-smi` for the GPU and reads torch's generated `version.py`
(which records the CUDA version the wheel was built for, or None for a CPU
build). Inside the grader the plugin reports what torch itself saw.
`ROADMAP_DEVICE=cpu` forces CPU grading (tests, or a broken driver).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional


@dataclass
class DeviceInfo:
    kind: str  # "cuda" or "cpu"
    name: str  # GPU name, or "cpu"
    capability: Optional[str] = None  # e.g. "9.0"
    torch_version: Optional[str] = None
    torch_cuda: Optional[str] = None  # CUDA version torch was built with (None: CPU build)
    triton_version: Optional[str] = None
    reason: str = ""  # why we are on CPU, for doctor
    gpus: list[str] = field(default_factory=list)

    @property
    def cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def interpret_mode(self) -> bool:
        return not self.cuda


def _version(dist: str) -> Optional[str]:
    from importlib import metadata  # ~30 ms: not before `roadmap grade` has started pytest

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def torch_built_with_cuda() -> Optional[str]:
    """The CUDA version in torch/version.py, read as text (no import)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return match.group(1) if match else None


def query_gpus() -> tuple[list[tuple[str, Optional[str]]], str]:
    """[(name, compute capability)] from nvidia-smi, and why it is empty."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], "no nvidia-smi on PATH"
    for fields in ("name,compute_cap", "name"):
        try:
            proc = subprocess.run(
                [exe, f"--query-gpu={fields}", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=15,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [], f"nvidia-smi failed: {exc}"
        if proc.returncode == 0:
            gpus = []
            for line in proc.stdout.strip().splitlines():
                cols = [c.strip() for c in line.split(",")]
                gpus.append((cols[0], cols[1] if len(cols) > 1 else None))
            return gpus, "" if gpus else "nvidia-smi lists no GPU"
    return [], f"nvidia-smi failed: {proc.stderr.strip()[:200]}"


@lru_cache(maxsize=1)
def detect_device() -> DeviceInfo:
    torch_version, triton_version = _version("torch"), _version("triton")
    torch_cuda = torch_built_with_cuda()

    def cpu(reason: str) -> DeviceInfo:
        return DeviceInfo("cpu", "cpu", None, torch_version, torch_cuda, triton_version, reason)

    if os.environ.get("ROADMAP_DEVICE") == "cpu":
        return cpu("ROADMAP_DEVICE=cpu")
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return cpu("CUDA_VISIBLE_DEVICES hides every GPU")
    gpus, why = query_gpus()
    if not gpus:
        return cpu(why)
    if torch_version is None:
        return cpu("torch is not installed")
    if torch_cuda is None:
        return cpu(f"torch {torch_version} is a CPU-only build")
    name, capability = gpus[0]
    info = DeviceInfo("cuda", name, capability, torch_version, torch_cuda, triton_version)
    info.gpus = [g[0] for g in gpus]
    return info


def nvidia_smi_present() -> bool:
    """Cheap hint (no subprocess) for `lab list`: no nvidia-smi means no GPU."""
    return os.environ.get("ROADMAP_DEVICE") != "cpu" and shutil.which("nvidia-smi") is not None


_TRITON_IMPORT = re.compile(r"^\s*(?:import|from)\s+triton\b", re.MULTILINE)


def uses_triton(lab_id: str) -> bool:
    """Whether a lab's code runs Triton kernels (its starter or its grader imports triton).

    On a CPU every grade runs with TRITON_INTERPRET=1, but only these labs go
    through the interpreter: a footer saying "Triton interpreter" for a lab
    without Triton would misname what ran. Read from the files, so it cannot
    drift from them.
    """
    from roadmap_cli.labs.plan import labs_root

    return _imports_triton(labs_root() / lab_id)


@lru_cache(maxsize=None)
def _imports_triton(lab_dir: Path) -> bool:
    for folder in ("starter", "tests"):
        for path in sorted((lab_dir / folder).rglob("*.py")):
            try:
                if _TRITON_IMPORT.search(path.read_text(encoding="utf-8", errors="replace")):
                    return True
            except OSError:
                continue
    return False


def device_label(device: Optional[str], interpret_mode: bool, lab_id: str, *, short: bool = False) -> str:
    """`cpu (Triton interpreter)` for a CPU grade of a Triton lab, plain `cpu` for any other lab."""
    label = device or "?"
    if interpret_mode and uses_triton(lab_id):
        label += " (interpreter)" if short else " (Triton interpreter)"
    return label
