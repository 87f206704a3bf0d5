"""`roadmap quiz`: which questions to ask, and what a finished quiz records.

    select(curriculum, ref, done)        -> [(checkpoint, quiz)]  (a checkpoint, a stage, or the current stage)
    question_view(question, lang)        -> what is shown (options/items in their shown order, labelled)
    finish(store, curriculum, verdicts)  -> per-checkpoint results; records attempts and review cards

A checkpoint's attempt passes at >= 80% right (quiz_models.PASS_FRACTION);
the attempt is the evidence `stage show` prints beside the checkpoint
(`quiz 3/3`). Passing does not tick the checkpoint: explain checkpoints are
self-assessed, and `roadmap check` stays the learner's call. Every answer
is also a review (source "quiz") of that question's FSRS card.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from roadmap_cli.errors import NotFoundError, UserError
from roadmap_cli.quiz.checking import LETTERS, shown_order


@dataclass
class CheckpointResult:
    checkpoint_id: str
    correct: int
    total: int
    passed: bool
    already_done: bool
    verdicts: list = field(default_factory=list)


def select(curriculum, ref: Optional[str], done: dict) -> list[tuple]:
    """[(checkpoint, quiz)] for a checkpoint id, a stage (number or id), or,
    with no ref, the current stage (the first with unfinished checkpoints)."""
    checkpoint_ids = [c.id for c in curriculum.all_checkpoints()]
    if ref is not None and ref in checkpoint_ids:
        checkpoint = curriculum.checkpoint(ref)
        quiz = curriculum.quiz_for(ref)
        if quiz is None:
            raise UserError(f"checkpoint {ref} has no quiz questions ({_with_quizzes(curriculum)})")
        return [(checkpoint, quiz)]
    if ref is not None:
        try:
            stage = curriculum.stage(ref)
        except NotFoundError:
            choices = checkpoint_ids + [s.id for s in curriculum.stages]
            raise NotFoundError("stage or checkpoint", ref, choices) from None
    else:
        stage = _default_stage(curriculum, done)
    chosen = [(cp, curriculum.quiz_for(cp.id)) for cp in stage.checkpoints if curriculum.quiz_for(cp.id)]
    if not chosen:
        raise UserError(f"stage {stage.number} has no quiz questions ({_with_quizzes(curriculum)})")
    return chosen


def _default_stage(curriculum, done: dict):
    """The current stage if it has quizzes, else the nearest earlier stage
    that has (what you learnt last), else the first later one."""
    from roadmap_cli.tracker.progress import current_stage

    now = current_stage(curriculum, done) or curriculum.stages[-1]
    earlier = [s for s in curriculum.stages if s.number <= now.number][::-1]
    later = [s for s in curriculum.stages if s.number > now.number]
    for stage in earlier + later:
        if any(curriculum.quiz_for(cp.id) for cp in stage.checkpoints):
            return stage
    return now


def _with_quizzes(curriculum) -> str:
    numbers = sorted({curriculum.stage_of(q.checkpoint).number for q in curriculum.quizzes})
    return f"stages with quizzes: {', '.join(map(str, numbers))}" if numbers else "this curriculum has no quizzes"


def question_view(question, lang: str) -> dict:
    """A question as shown (and as `quiz --json` lists it): never the answer."""
    view = {"id": question.id, "kind": question.kind, "prompt": question.prompt.get(lang)}
    if question.kind == "numeric":
        view["unit"] = question.unit
        view["tolerance"] = question.tolerance
    elif question.kind in ("choice", "ordering"):
        texts = question.options if question.kind == "choice" else question.items
        view["options" if question.kind == "choice" else "items"] = [
            {"label": LETTERS[k], "text": (texts[i].text if question.kind == "choice" else texts[i]).get(lang)}
            for k, i in enumerate(shown_order(question))
        ]
    return view


def finish(store, curriculum, chosen: list[tuple], verdicts: dict, *, now=None) -> list[CheckpointResult]:
    """Record one attempt per checkpoint and review every answered question,
    in one transaction; return the results."""
    from roadmap_cli.tracker.progress import completed
    from roadmap_cli.quiz import records, review

    now = now or review.utc_now()
    learner = records.current_learner(store)
    done = completed(store)
    results = []
    with store.connection() as conn:
        for checkpoint, quiz in chosen:
            answered = [verdicts[q.id] for q in quiz.questions if q.id in verdicts]
            if not answered:
                continue
            row = records.record_attempt(conn, learner, checkpoint.id, records.iso(now), answered)
            for verdict in answered:
                review.apply_rating(
                    conn, learner, review.item_key(review.QUESTION, verdict.question_id), verdict.rating, now, "quiz"
                )
            results.append(
                CheckpointResult(
                    checkpoint.id, row["correct"], row["total"], row["passed"], checkpoint.id in done, answered
                )
            )
    return results


def load_answers(path: str) -> dict[str, str]:
    """An answers file for non-interactive runs: a JSON or YAML mapping of
    question id (or review item) -> answer text; "-" reads stdin."""
    import sys

    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as exc:
        raise UserError(f"cannot read answers file {path}: {exc.strerror or exc}") from None
    from roadmap_cli.formats.yamlsafe import YamlProblem, load_with_nodes

    try:
        data, _ = load_with_nodes(text)  # YAML is a superset of JSON; bounded loader
    except YamlProblem as problem:
        raise UserError(f"answers file {path}: {problem.lines(path)[0]}") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise UserError(f"answers file {path}: expected a mapping of question id -> answer")
    return {key: str(value) for key, value in data.items() if value is not None}
