"""The toolbox grader tests share: learner imports, seeds, comparisons, guards
and (GPU) timing. Imported inside grader processes only, never by the CLI's
fast paths. See docs/labs.md.
"""

from roadmap_cli.grading_kit.compare import assert_close, assert_nontrivial, rel_fro_error
from roadmap_cli.grading_kit.guards import (
    ForbiddenOpError,
    count_triton_launches,
    forbid_torch_ops,
    inputs_unchanged,
)
from roadmap_cli.grading_kit.learner_errors import LearnerCrashed, LearnerError, LearnerTimeout, LearnerViolation
from roadmap_cli.grading_kit.sandbox import LearnerProxy, learner_side
from roadmap_cli.grading_kit.learner import (
    cuda_capability,
    device,
    gpu_name,
    has_cuda,
    interpret_mode,
    learner_module,
    to_device,
    workspace,
)
from roadmap_cli.grading_kit.seeds import PerSeedCache, seeded

# Loaded on first use (`kit.benchmark`, `kit.timing`...): statistics and
# dataclasses cost ~0.2 s of import in each grader and learner process, and
# only the GPU timing parts need them.
_LAZY = {
    "timing": ("roadmap_cli.grading_kit.timing", None),
    "Comparison": ("roadmap_cli.grading_kit.timing", "Comparison"),
    "Timing": ("roadmap_cli.grading_kit.timing", "Timing"),
    "benchmark": ("roadmap_cli.grading_kit.timing", "benchmark"),
    "compare_to_baseline": ("roadmap_cli.grading_kit.timing", "compare_to_baseline"),
    "score_fraction": ("roadmap_cli.grading_kit.timing", "score_fraction"),
    "DevicePeak": ("roadmap_cli.grading_kit.gpu_peaks", "DevicePeak"),
    "device_peak": ("roadmap_cli.grading_kit.gpu_peaks", "device_peak"),
    # Where the learner returned a tensor (grading_kit/placement.py; the grader's own tensors stay on the CPU
    # and kit.to_device hands them over). Loaded on use: placement imports torch.
    "learner_device": ("roadmap_cli.grading_kit.placement", "learner_device"),
    "returned_on_cuda": ("roadmap_cli.grading_kit.placement", "returned_on_cuda"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


__all__ = [
    "Comparison",
    "DevicePeak",
    "ForbiddenOpError",
    "LearnerCrashed",
    "LearnerError",
    "LearnerTimeout",
    "LearnerViolation",
    "LearnerProxy",
    "Timing",
    "assert_close",
    "assert_nontrivial",
    "benchmark",
    "compare_to_baseline",
    "count_triton_launches",
    "cuda_capability",
    "gpu_name",
    "device",
    "device_peak",
    "forbid_torch_ops",
    "has_cuda",
    "inputs_unchanged",
    "interpret_mode",
    "learner_device",
    "learner_module",
    "learner_side",
    "rel_fro_error",
    "returned_on_cuda",
    "score_fraction",
    "PerSeedCache",
    "seeded",
    "timing",
    "to_device",
    "workspace",
]
