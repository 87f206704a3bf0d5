"""Checks of the `quizzes:` list that a schema cannot express.

Same contract as checks.py: `(loc, message)` pairs whose `loc` is the YAML
path, so the loader reports `file:line:col`. Run once, when a curriculum is
validated (a cached curriculum has passed them already).
"""

from __future__ import annotations

from roadmap_cli.curriculum.formula import FormulaError, evaluate, names_in

Loc = tuple
Problem = tuple[Loc, str]


def check_quizzes(cur) -> list[Problem]:
    problems: list[Problem] = []
    checkpoints = {c.id for c in cur.all_checkpoints()}
    quiz_of: dict[str, int] = {}
    question_at: dict[str, Loc] = {}
    for i, quiz in enumerate(cur.quizzes):
        loc = ("quizzes", i)
        if quiz.checkpoint not in checkpoints:
            problems.append((loc + ("checkpoint",), f"quiz for unknown checkpoint {quiz.checkpoint!r}"))
        elif quiz.checkpoint in quiz_of:
            problems.append(
                (
                    loc + ("checkpoint",),
                    f"checkpoint {quiz.checkpoint!r} already has a quiz "
                    f"(quizzes[{quiz_of[quiz.checkpoint]}]): merge the two",
                )
            )
        quiz_of.setdefault(quiz.checkpoint, i)
        for j, question in enumerate(quiz.questions):
            qloc = loc + ("questions", j)
            if question.id in question_at:
                first = question_at[question.id]
                problems.append(
                    (
                        qloc + ("id",),
                        f"duplicate question id {question.id!r} (first used at "
                        f"quizzes[{first[1]}].questions[{first[3]}])",
                    )
                )
            question_at.setdefault(question.id, qloc)
            problems += _check_question(question, qloc)
    return problems


def _check_question(question, loc: Loc) -> list[Problem]:
    kind = question.kind
    if kind == "numeric":
        return _check_numeric(question, loc)
    if kind == "choice":
        right = [k for k, o in enumerate(question.options) if o.correct]
        if len(right) != 1:
            return [
                (
                    loc + ("options",),
                    f"question {question.id!r}: exactly one option must be correct (found {len(right)})",
                )
            ]
        problems = [
            (
                loc + ("options", k),
                f"question {question.id!r}: wrong option {k + 1} needs a `why` (shown to a learner who picks it)",
            )
            for k, o in enumerate(question.options)
            if not o.correct and o.why is None
        ]
        problems += _repeats([o.text.en for o in question.options], loc + ("options",), question.id, "option")
        return problems
    if kind == "ordering":
        return _repeats([t.en for t in question.items], loc + ("items",), question.id, "item")
    return []


def _check_numeric(question, loc: Loc) -> list[Problem]:
    from roadmap_cli.curriculum.units import valid_question_unit

    problems: list[Problem] = []
    try:
        used = names_in(question.formula)
        value = evaluate(question.formula, question.inputs)
    except FormulaError as exc:
        return [(loc + ("formula",), f"question {question.id!r}: {exc}")]
    unused = sorted(set(question.inputs) - used)
    if unused:
        problems.append(
            (
                loc + ("inputs",),
                f"question {question.id!r}: input(s) {', '.join(unused)} not used by the formula (a typo?)",
            )
        )
    if value == 0:
        problems.append(
            (loc + ("formula",), f"question {question.id!r}: the answer is 0, which a relative tolerance cannot check")
        )
    if not valid_question_unit(question.unit):
        problems.append(
            (
                loc + ("unit",),
                f"question {question.id!r}: unit {question.unit!r} is neither a known "
                "unit (B, KiB, GB/s, ms, TFLOP/s, ...) nor a short label",
            )
        )
    return problems


def _repeats(texts: list[str], loc: Loc, qid: str, what: str) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for k, text in enumerate(texts):
        if text in seen:
            out.append((loc + (k,), f"question {qid!r}: {what} {k + 1} repeats {text!r}"))
        seen.add(text)
    return out
