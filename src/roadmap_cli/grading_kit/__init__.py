"""The toolbox grader tests share: learner imports, seeds, comparisons, guards
and (GPU) timing. Imported inside grader processes only, never by the CLI's
fast paths. See docs/labs.md.
"""

from roadmap_cli.grading_kit import timing
from roadmap_cli.grading_kit.compare import assert_close, assert_nontrivial, rel_fro_error
from roadmap_cli.grading_kit.guards import (
    ForbiddenOpError,
    count_triton_launches,
    forbid_torch_ops,
    inputs_unchanged,
)
from roadmap_cli.grading_kit.learner_errors import LearnerCrashed, LearnerError, LearnerTimeout, LearnerViolation
from roadmap_cli.grading_kit.sandbox import RemoteRef, learner_side
from roadmap_cli.grading_kit.learner import device, has_cuda, interpret_mode, learner_module, workspace
from roadmap_cli.grading_kit.devices import DevicePeak, device_peak
from roadmap_cli.grading_kit.seeds import seeded
from roadmap_cli.grading_kit.timing import Comparison, Timing, benchmark, compare_to_baseline, score_fraction

__all__ = [
    "Comparison",
    "DevicePeak",
    "ForbiddenOpError",
    "LearnerCrashed",
    "LearnerError",
    "LearnerTimeout",
    "LearnerViolation",
    "RemoteRef",
    "Timing",
    "assert_close",
    "assert_nontrivial",
    "benchmark",
    "compare_to_baseline",
    "count_triton_launches",
    "device",
    "device_peak",
    "forbid_torch_ops",
    "has_cuda",
    "inputs_unchanged",
    "interpret_mode",
    "learner_module",
    "learner_side",
    "rel_fro_error",
    "score_fraction",
    "seeded",
    "timing",
    "workspace",
]
