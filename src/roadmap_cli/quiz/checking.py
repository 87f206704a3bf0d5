"""Check one answer to one question: right or wrong, why, and an FSRS rating.

How each kind is checked (README, "Quizzes and review"):
- numeric: the answer may be arithmetic ("2*32*128") and may carry a unit
  (curriculum/units.py); right when within the question's relative tolerance of
  the computed answer.
- choice: a letter (a, b, ...) or number (1, 2, ...) of the options as shown;
  a wrong pick shows that option's `why` and the right option.
- ordering: the shown labels in order ("c a d b", "cadb", "3 1 4 2"); only
  the exact order is right; the feedback gives the right order.
- recall: the learner's own grade after seeing the model answer
  (again / hard / good / easy, or 1-4).

Rating for the review scheduler (FSRS): a right checked answer is Good, a
wrong one Again; an ordering one adjacent swap away is Hard (still a miss
for the quiz score); recall is the learner's own rating (Hard and better
count as right). Options and items are shown in an order shuffled by the
question id, so the order is the same every time and in every test.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

AGAIN, HARD, GOOD, EASY = 1, 2, 3, 4  # the values of fsrs.Rating
RATING_NAMES = {AGAIN: "again", HARD: "hard", GOOD: "good", EASY: "easy"}
LETTERS = "abcdefghij"


class AnswerProblem(ValueError):
    """An answer that cannot be read at all (asked again when interactive)."""


@dataclass
class Verdict:
    question_id: str
    kind: str
    answer: str
    correct: bool
    rating: int
    expected: str
    feedback: list[str] = field(default_factory=list)


def shown_order(question) -> list[int]:
    """Indices of the options/items in the order they are shown: shuffled,
    seeded by the question id, never the written (right) order."""
    items = question.options if question.kind == "choice" else question.items
    order = list(range(len(items)))
    random.Random(question.id).shuffle(order)
    if order == sorted(order):
        order = order[1:] + order[:1]
    return order


def parse_rating(text: str) -> int:
    word = text.strip().lower()
    for value, name in RATING_NAMES.items():
        if word in (name, name[0], str(value)):
            return value
    raise AnswerProblem(f"{text!r}: answer again, hard, good or easy (or 1-4)")


def format_number(value: float) -> str:
    if abs(value - round(value)) < 1e-9 * max(1.0, abs(value)):
        return f"{int(round(value)):,}"
    return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:.4g}"


def format_quantity(value: float, unit: str) -> str:
    """524288 B -> "524,288 B (512 KiB)": big byte counts also in binary units."""
    text = f"{format_number(value)} {unit}".strip()
    if unit == "B" and value >= 1024:
        for prefix, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if value >= size:
                return f"{text} ({format_number(value / size)} {prefix})"
    return text


def check(question, answer: str, lang: str = "en") -> Verdict:
    checker = {"numeric": _numeric, "choice": _choice, "ordering": _ordering, "recall": _recall}[question.kind]
    return checker(question, answer.strip(), lang)


def _numeric(q, answer: str, lang: str) -> Verdict:
    from roadmap_cli.curriculum.formula import FormulaError, evaluate
    from roadmap_cli.curriculum.units import UnitProblem, UnreadableUnit, convert, prefix_hint, split_answer

    if not answer:
        raise AnswerProblem("give a number (arithmetic such as 2*32*128 is fine)")
    expected = format_quantity(q.answer, q.unit)
    try:
        value = evaluate(answer.replace(",", "").replace("_", ""))
        unit = ""
    except FormulaError:
        number, unit = split_answer(answer)
        try:
            value = evaluate(number)
        except FormulaError:
            raise AnswerProblem(
                f"{answer!r} is not a number (arithmetic such as 2*32*128 is fine; a unit may follow)"
            ) from None
    try:
        given = convert(value, unit, q.unit)
    except UnreadableUnit as exc:
        # Not an answer to score: asked again (an answers file is refused whole).
        raise AnswerProblem(str(exc)) from None
    except UnitProblem as exc:
        return Verdict(q.id, "numeric", answer, False, AGAIN, expected, [str(exc), _why(q, lang)])
    error = abs(given - q.answer) / abs(q.answer)
    if error <= q.tolerance:
        return Verdict(q.id, "numeric", answer, True, GOOD, expected, [_why(q, lang)])
    allowed = f"tolerance {q.tolerance:.0%}" if q.tolerance else "the exact number is needed"
    feedback = [f"{format_quantity(given, q.unit)} is {error:.1%} off ({allowed})"]
    hint = prefix_hint(unit)
    if hint and 0.01 < error < 0.2:
        feedback.append(hint)
    feedback.append(_why(q, lang))
    return Verdict(q.id, "numeric", answer, False, AGAIN, expected, feedback)


def _why(q, lang: str) -> str:
    return f"{q.formula} = {format_quantity(q.answer, q.unit)}. {q.explanation.get(lang)}"


def _pick(answer: str, count: int) -> int:
    """The shown position (0-based) named by a letter or a 1-based number."""
    word = answer.strip().lower().rstrip(").")
    if len(word) == 1 and word in LETTERS[:count]:
        return LETTERS.index(word)
    if word.isdigit() and 1 <= int(word) <= count:
        return int(word) - 1
    raise AnswerProblem(f"{answer!r}: answer with a letter a-{LETTERS[count - 1]} (or a number 1-{count})")


def _choice(q, answer: str, lang: str) -> Verdict:
    order = shown_order(q)
    picked = order[_pick(answer, len(order))]
    right = q.correct_index
    right_label = LETTERS[order.index(right)]
    expected = f"{right_label}) {q.options[right].text.get(lang)}"
    if picked == right:
        feedback = [q.options[right].why.get(lang)] if q.options[right].why else []
        return Verdict(q.id, "choice", answer, True, GOOD, expected, feedback)
    option = q.options[picked]
    return Verdict(
        q.id,
        "choice",
        answer,
        False,
        AGAIN,
        expected,
        [f"{LETTERS[order.index(picked)]}) is wrong: {option.why.get(lang)}"],
    )


def _labels(answer: str, count: int) -> list[int]:
    """Shown positions (0-based) from "c a d b", "cadb", "c,a,d,b" or "3 1 4 2"."""
    text = answer.strip().lower()
    tokens = re.findall(r"\d+", text) if re.search(r"\d", text) else re.findall(r"[a-z]", text)
    try:
        picks = [_pick(t, count) for t in tokens]
    except AnswerProblem:
        picks = []
    if sorted(picks) != list(range(count)):
        last = LETTERS[count - 1]
        raise AnswerProblem(
            f"{answer!r}: give all {count} labels once each, in order (e.g. "
            f"{' '.join(LETTERS[:count][::-1])}); a-{last} or 1-{count}"
        )
    return picks


def _ordering(q, answer: str, lang: str) -> Verdict:
    order = shown_order(q)
    given = [order[p] for p in _labels(answer, len(order))]  # the written index of each pick
    right_labels = " ".join(LETTERS[order.index(i)] for i in range(len(order)))
    expected = right_labels + ": " + " → ".join(t.get(lang) for t in q.items)
    explanation = [q.explanation.get(lang)] if q.explanation else []
    if given == sorted(given):
        return Verdict(q.id, "ordering", answer, True, GOOD, expected, explanation)
    wrong = [k for k, i in enumerate(given) if i != k]
    one_swap = len(wrong) == 2 and wrong[1] == wrong[0] + 1
    first = wrong[0]
    feedback = [
        f"step {first + 1} should be {LETTERS[order.index(first)]}) {q.items[first].get(lang)}",
        f"right order: {expected}",
    ] + explanation
    return Verdict(q.id, "ordering", answer, False, HARD if one_swap else AGAIN, expected, feedback)


def _recall(q, answer: str, lang: str) -> Verdict:
    rating = parse_rating(answer)
    return Verdict(q.id, "recall", answer, rating >= HARD, rating, q.model_answer.get(lang))
