"""Reaching the learner's workspace from a grader process."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType


_resolved: dict[str, Path] = {}
# name -> (module, workspace root) already checked to come from that workspace:
# adapters call learner_module on every call, and resolving paths costs ~0.3 ms.
_verified: dict[str, tuple[ModuleType, str]] = {}


def workspace() -> Path:
    """The learner's workspace, as set by the engine (or the current dir)."""
    raw = os.environ.get("ROADMAP_WORKSPACE") or os.getcwd()
    if raw not in _resolved:
        _resolved[raw] = Path(raw).resolve()
    return _resolved[raw]


def learner_module(name: str) -> ModuleType:
    """Import module `name` from the workspace (not from anywhere else).

    The workspace goes first on sys.path so a same-named module elsewhere can
    never shadow the learner's file. In a sandboxed grader process this
    returns a proxy of the module, imported in the learner process
    (see sandbox.py): call learner code inside `@kit.learner_side` functions.
    """
    from roadmap_cli.grading_kit import sandbox

    if sandbox.active():
        return sandbox.proxy_module(name)  # type: ignore[return-value]
    root = str(workspace())
    known = _verified.get(name)
    if known is not None and known[1] == root and sys.modules.get(name) is known[0] and sys.path[0] == root:
        return known[0]
    if sys.path[0] != root:
        sys.path.insert(0, root)
    module = sys.modules.get(name)
    inside = os.path.join(root, "")  # "/ws/" so that "/ws2/x.py" is not inside "/ws"
    if module is not None and not str(getattr(module, "__file__", "")).startswith(inside):
        del sys.modules[name]
    module = importlib.import_module(name)
    origin = Path(module.__file__ or "").resolve()
    if not str(origin).startswith(inside):
        raise ImportError(f"{name} was imported from {origin}, not from the workspace {root}")
    _verified[name] = (module, root)
    return module


def has_cuda() -> bool:
    """Whether the lab's code runs on a CUDA GPU in this grade.

    In a grader process the engine's choice ($ROADMAP_DEVICE, made after asking torch in a child
    process) is the answer: the grader never asks CUDA anything itself (grading_kit/placement.py).
    Elsewhere (the learner process, tests run by hand) torch is asked."""
    chosen = os.environ.get("ROADMAP_DEVICE")
    if chosen == "cpu":
        return False
    from roadmap_cli.grading_kit import sandbox

    if chosen == "cuda" and sandbox.active():
        return True
    import torch

    return torch.cuda.is_available()


def device() -> str:
    """The lab's device: where the learner's code runs ("cuda" or "cpu"). The grader's own tensors are
    always on the CPU; `kit.to_device` hands them over."""
    return "cuda" if has_cuda() else "cpu"


_lab_device = device  # to_device's parameter is named `device` too


def gpu_name() -> str | None:
    """The GPU's name ("NVIDIA H100 80GB HBM3"), or None without CUDA. In a grader process from the engine
    ($ROADMAP_GPU_NAME), for the same reason as `cuda_capability`; it is never what learner code reports."""
    if not has_cuda():
        return None
    from roadmap_cli.grading_kit import sandbox

    recorded = os.environ.get("ROADMAP_GPU_NAME", "")
    if sandbox.active() or recorded:
        return recorded or None
    import torch

    return torch.cuda.get_device_name(0)


def cuda_capability() -> tuple[int, int] | None:
    """The GPU's compute capability, (9, 0) on an H100, or None without CUDA. In a grader process from the
    engine ($ROADMAP_GPU_CAPABILITY: asking torch would open a CUDA context here)."""
    if not has_cuda():
        return None
    from roadmap_cli.grading_kit import sandbox

    recorded = os.environ.get("ROADMAP_GPU_CAPABILITY", "")
    if sandbox.active() or recorded:
        try:
            major, minor = recorded.split(".")
            return int(major), int(minor)
        except ValueError:
            return None
    import torch

    return tuple(torch.cuda.get_device_capability())  # type: ignore[return-value]


def to_device(tensor, device=None):
    """The grader's (CPU) `tensor` as the learner's code receives it: on the lab's device (`device()`, or
    `device`). In a grade, a record of CPU data that the learner process rebuilds there, whole buffer
    included (grading_kit/placement.py): the grader process never holds a CUDA tensor. Without a learner
    process (tests run by hand, or learner-side code) the tensor is moved here."""
    import torch

    from roadmap_cli.grading_kit import placement, sandbox

    target = torch.device(device if device is not None else _lab_device())
    if not sandbox.active():
        return placement.arrive(tensor, str(target))
    if tensor.device.type != "cpu":
        raise ValueError(
            f"to_device takes the grader's CPU tensors, got one on {tensor.device}: the grader "
            "process never holds a CUDA tensor (grading_kit/placement.py)"
        )
    return placement.tag(tensor, target)


def interpret_mode() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"
