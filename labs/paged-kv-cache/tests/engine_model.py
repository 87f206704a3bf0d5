"""The model the learner's engine runs in the engine tests (learner-side:
lab.yaml `learner_side` shows this file and grader_model.py to the learner
process, nothing else of tests/).

`make_model` builds the grader's copy of the lab's TinyTransformer
(grader_model.py, identical to the workspace's read-only model.py); with
`scale`, attention uses that softmax scale instead of head_dim ** -0.5, so an
engine that ignores `model.scale` is caught. No expected value is here: the
outputs the engine must reproduce come from reference.py, grader-side only.
"""

from __future__ import annotations

from typing import Optional

import grader_model


def make_model(overrides: dict, scale: Optional[float] = None):
    config = grader_model.ModelConfig(**overrides)
    if scale is None:
        return grader_model.TinyTransformer(config)
    return ScaledModel(config, scale)


class ScaledModel(grader_model.TinyTransformer):
    """The same weights and math, another softmax scale."""

    def __init__(self, config, scale: float) -> None:
        super().__init__(config)
        self._scale = scale

    @property
    def scale(self) -> float:
        return self._scale
