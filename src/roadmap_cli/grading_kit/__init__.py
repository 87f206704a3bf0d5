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
from roadmap_cli.grading_kit.learner import device, has_cuda, interpret_mode, learner_module, workspace
from roadmap_cli.grading_kit.seeds import seeded

__all__ = [
    "ForbiddenOpError",
    "assert_close",
    "assert_nontrivial",
    "count_triton_launches",
    "device",
    "forbid_torch_ops",
    "has_cuda",
    "inputs_unchanged",
    "interpret_mode",
    "learner_module",
    "rel_fro_error",
    "seeded",
    "workspace",
]
