"""Quiz questions in the curriculum (the top-level `quizzes:` list).

    quizzes:
      - checkpoint: s1-explain-query-key-value
        questions:
          - id: s1-qkv-score-scale          # stable: review cards are stored under it
            kind: numeric | choice | ordering | recall
            prompt: {zh: ..., en: ...}
            ...

Four kinds, each checked by `roadmap_cli.quiz.checking`:
- numeric: `formula` over named `inputs`, `unit`, relative `tolerance`.
  The answer is computed from the formula (curriculum/formula.py), never
  typed by hand; `explanation` says why the formula is what it is.
- choice: `options`, exactly one `correct: true`; every wrong option has a
  `why` (shown when it is picked).
- ordering: `items` written in the right order (shown shuffled).
- recall: a `model_answer` the learner compares their own answer with,
  then grades themselves (Again / Hard / Good / Easy).

Models are frozen and forbid unknown keys like the rest of the curriculum;
the checks a schema cannot express (one correct option, a formula that
evaluates, ids unique, the checkpoint exists) live in quiz_checks.py.
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal, Optional, Union

from pydantic import Field

from roadmap_cli.curriculum.base import Text, _Model

ID_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
INPUT_NAME_PATTERN = r"^[a-z_][a-z0-9_]*$"
QUESTION_KINDS = ("numeric", "choice", "ordering", "recall")
PASS_FRACTION = 0.8  # a checkpoint's quiz passes at >= 80% right


class _Question(_Model):
    id: str = Field(pattern=ID_PATTERN)
    prompt: Text


class NumericQuestion(_Question):
    kind: Literal["numeric"]
    formula: str = Field(min_length=1, max_length=300)
    inputs: dict[Annotated[str, Field(pattern=INPUT_NAME_PATTERN)], float] = {}
    unit: str = ""  # "B", "KiB", "ms", "GB/s", "%", or a label such as "warps"
    tolerance: float = Field(default=0.01, ge=0, le=0.5)  # relative
    explanation: Text

    @cached_property
    def answer(self) -> float:
        """Computed from the formula; quiz_checks has proved it evaluates."""
        from roadmap_cli.curriculum.formula import evaluate

        return evaluate(self.formula, self.inputs)


class ChoiceOption(_Model):
    text: Text
    correct: bool = False
    why: Optional[Text] = None  # required on a wrong option: why it is wrong


class ChoiceQuestion(_Question):
    kind: Literal["choice"]
    options: list[ChoiceOption] = Field(min_length=2, max_length=8)

    @property
    def correct_index(self) -> int:
        return next(i for i, o in enumerate(self.options) if o.correct)


class OrderingQuestion(_Question):
    kind: Literal["ordering"]
    items: list[Text] = Field(min_length=3, max_length=10)  # in the right order
    explanation: Optional[Text] = None


class RecallQuestion(_Question):
    kind: Literal["recall"]
    model_answer: Text


Question = Annotated[
    Union[NumericQuestion, ChoiceQuestion, OrderingQuestion, RecallQuestion], Field(discriminator="kind")
]

QUESTION_CLASSES = {
    "numeric": NumericQuestion,
    "choice": ChoiceQuestion,
    "ordering": OrderingQuestion,
    "recall": RecallQuestion,
}


class Quiz(_Model):
    checkpoint: str = Field(pattern=ID_PATTERN)
    questions: list[Question] = Field(min_length=1)
