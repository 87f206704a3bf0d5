"""Is there a CUDA GPU that torch can use? Answered without importing torch.

`roadmap grade` must stay light, so the parent process never imports torch:
it asks `nvidia-smi` for the GPU and reads torch's generated `version.py`
(which records the CUDA version the wheel was built for, or None for a CPU
build). Those two agreeing is not enough: a driver older than the wheel's
CUDA, or a broken install, leaves `torch.cuda.is_available()` False, and a
"cuda" grade would hand Triton parts CPU tensors without the interpreter.
So the last word is torch's own, asked once in a child process and kept in
the user's cache folder, keyed by everything that can change the answer
(torch, the driver, the GPUs, CUDA_VISIBLE_DEVICES, the Python).
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
                capture_output=True,
                text=True,
                timeout=15,
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


_PROBE = (
    "import json, sys, warnings\n"
    "warnings.simplefilter('always')\n"
    "with warnings.catch_warnings(record=True) as seen:\n"
    "    import torch\n"
    "    ok = torch.cuda.is_available()\n"
    "print(json.dumps([ok, [str(w.message).splitlines()[0] for w in seen][-1:]]))\n"
)


def _probe_key(gpus: list) -> str:
    import hashlib
    import sys

    try:
        driver = Path("/proc/driver/nvidia/version").read_text(encoding="utf-8", errors="replace")
    except OSError:
        driver = ""
    parts = [
        sys.executable,
        _version("torch") or "",
        torch_built_with_cuda() or "",
        repr(gpus),
        driver,
        os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _probe_cache() -> Optional[Path]:
    try:
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("roadmap", appauthor=False)) / "cuda-probe.json"
    except ImportError:
        return None


def torch_sees_cuda(gpus: list) -> tuple[bool, str]:
    """(torch.cuda.is_available(), why not) from a child process, cached per key (_probe_key)."""
    import json
    import sys

    key, cache = _probe_key(gpus), _probe_cache()
    if cache is not None:
        try:
            saved = json.loads(cache.read_text(encoding="utf-8"))
            if saved.get("key") == key:
                return bool(saved["ok"]), str(saved["why"])
        except (OSError, ValueError, KeyError, AttributeError):
            pass
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
        )
        ok, warned = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return False, f"importing torch to ask torch.cuda.is_available() failed: {exc}"  # not cached: may pass later
    why = (
        ""
        if ok
        else "torch.cuda.is_available() is False"
        + (f" ({warned[0]})" if warned else " (a driver older than the wheel's CUDA?)")
    )
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"key": key, "ok": bool(ok), "why": why}), encoding="utf-8")
            os.replace(tmp, cache)
        except OSError:
            pass
    return bool(ok), why


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
    usable, why = torch_sees_cuda(gpus)
    if not usable:
        return cpu(why)
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
