"""Quizzes and spaced review: `roadmap quiz`, `roadmap review` (services in roadmap_cli/quiz)."""

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print a versioned JSON envelope: without --answers, the questions (or due items); with it, the results.",
    ),
]
AnswersOpt = Annotated[
    Optional[str],
    typer.Option(
        "--answers",
        help="Answer without prompts: a JSON/YAML file (- for stdin) mapping question id (or review "
        "item) to the answer; recall questions and checkpoints take again/hard/good/easy.",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("quiz")(quiz)
    app.command("review")(review)


def quiz(
    ref: Annotated[
        Optional[str], typer.Argument(help="A checkpoint id or a stage (number or id); default: the current stage.")
    ] = None,
    answers: AnswersOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a checkpoint's (or a stage's) quiz; >= 80% right is recorded as evidence on the checkpoint."""
    from roadmap_cli.formats.output import console, emit
    from roadmap_cli.tracker.progress import completed
    from roadmap_cli.quiz import session

    ctx = context.current()
    cur, store, lang = ctx.curriculum(), ctx.store(), ctx.lang
    chosen = session.select(cur, ref, completed(store))
    if as_json and answers is None:
        listing = [
            {
                "checkpoint": cp.id,
                "text": cp.text.get(lang),
                "questions": [session.question_view(q, lang) for q in quiz.questions],
            }
            for cp, quiz in chosen
        ]
        emit("quiz", {"checkpoints": listing}, as_json=True, render=None)
        return
    from roadmap_cli.cli.quiz_render import ask, show_verdict, verdict_json

    questions = [q for _, quiz in chosen for q in quiz.questions]
    if answers is not None:
        verdicts = _check_all(questions, session.load_answers(answers), lang)
        if not as_json:
            for q in questions:
                show_verdict(console, verdicts[q.id])
    else:
        from rich.markup import escape

        verdicts, n = {}, 0
        for cp, quiz_of_cp in chosen:
            console.print(f"\n[bold]── {escape(cp.text.get(lang))}[/] [dim]({cp.id})[/]", soft_wrap=True)
            for q in quiz_of_cp.questions:
                n += 1
                verdicts[q.id] = ask(console, q, lang, f"[{n}/{len(questions)}]")
    results = session.finish(store, cur, chosen, verdicts)
    data = {
        "results": [
            {
                "checkpoint": r.checkpoint_id,
                "correct": r.correct,
                "total": r.total,
                "passed": r.passed,
                "checkpoint_done": r.already_done,
                "answers": [verdict_json(v) for v in r.verdicts],
            }
            for r in results
        ]
    }

    def render(out) -> None:
        out.print("\n[bold]Quiz results[/]")
        for r in results:
            mark = "[green]passed[/]" if r.passed else "[yellow]not passed (80% needed)[/]"
            out.print(f"  {r.checkpoint_id}  quiz {r.correct}/{r.total}  {mark}", soft_wrap=True)
            if r.passed and not r.already_done:
                out.print(
                    f"    [dim]recorded as evidence; when you can explain it: [/][cyan]roadmap check {r.checkpoint_id}[/]",
                    soft_wrap=True,
                )
        out.print("[dim]each answer also scheduled its question for review: roadmap review[/]")

    emit("quiz", data, as_json=as_json, render=render)


def _check_all(questions, given: dict, lang: str) -> dict:
    """Every question answered from the file, all read before anything is recorded."""
    from roadmap_cli.errors import UserError
    from roadmap_cli.quiz.checking import AnswerProblem, check

    missing = [q.id for q in questions if q.id not in given]
    if missing:
        raise UserError(f"answers file has no answer for {len(missing)} question(s): {', '.join(missing)}")
    verdicts = {}
    for q in questions:
        try:
            verdicts[q.id] = check(q, given[q.id], lang)
        except AnswerProblem as problem:
            raise UserError(f"answer to {q.id}: {problem}; nothing was recorded") from None
    return verdicts


def review(
    answers: AnswersOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Review at most this many items now.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Spaced review (FSRS) of your done explain checkpoints and the quiz questions you have answered."""
    from roadmap_cli.formats.output import console, emit
    from roadmap_cli.quiz import records
    from roadmap_cli.quiz import review as service

    ctx = context.current()
    cur, store, lang = ctx.curriculum(), ctx.store(), ctx.lang
    now = service.utc_now()
    learner = records.current_learner(store)
    due = service.due_items(store, cur, learner, now)[:limit]
    if as_json and answers is None:
        from roadmap_cli.quiz.session import question_view

        listing = [
            {
                "item": d.item,
                "kind": d.kind,
                "checkpoint": d.checkpoint_id,
                "due": d.due,
                "new": d.due is None,
                **(
                    {"question": question_view(cur.question(d.ref)[0], lang)}
                    if d.kind == service.QUESTION
                    else {"text": cur.checkpoint(d.ref).text.get(lang)}
                ),
            }
            for d in due
        ]
        emit("review", {"due": listing}, as_json=True, render=None)
        return
    from roadmap_cli.cli.quiz_render import review_summary
    from roadmap_cli.quiz.session import load_answers

    data = _run_review(
        console,
        store,
        cur,
        learner,
        due,
        now,
        lang,
        answers=None if answers is None else load_answers(answers),
        quiet=as_json,
    )
    emit("review", data, as_json=as_json, render=lambda out: review_summary(out, data))


# ------------------------------------------------------------------ a review session


def _rate_from_file(cur, item, given: str, lang: str):
    """(rating, verdict or None) for one item answered in a file."""
    from roadmap_cli.errors import UserError
    from roadmap_cli.quiz.checking import AnswerProblem, check, parse_rating
    from roadmap_cli.quiz.review import QUESTION

    try:
        if item.kind == QUESTION:
            verdict = check(cur.question(item.ref)[0], given, lang)
            return verdict.rating, verdict
        return parse_rating(given), None
    except AnswerProblem as problem:
        raise UserError(f"answer to {item.item}: {problem}; nothing was recorded") from None


def _run_review(console, store, cur, learner: str, due: list, now, lang: str, *, answers, quiet: bool) -> dict:
    """A `roadmap review` session: ask each due item, rate it, reschedule.

    A question item is asked like in `roadmap quiz` and its checked answer gives
    the rating (quiz/checking.py documents the mapping); a checkpoint item asks
    the learner to explain it (aloud, on paper) and rate themselves
    Again / Hard / Good / Easy. With answers from a file, items the file does
    not mention stay due; ratings are stored together at the end, so an
    unreadable answer or an interrupted session records nothing."""
    from roadmap_cli.cli.quiz_render import ask_review_item, show_verdict, verdict_json
    from roadmap_cli.quiz import records, review
    from roadmap_cli.quiz.checking import RATING_NAMES

    rated = []  # (item, rating, verdict)
    for n, item in enumerate(due, 1):
        if answers is not None:
            given = answers.get(item.item, answers.get(item.ref))
            if given is None:
                continue
            rating, verdict = _rate_from_file(cur, item, given, lang)
            if verdict is not None and not quiet:
                show_verdict(console, verdict)
        else:
            rating, verdict = ask_review_item(console, cur, item, lang, f"[{n}/{len(due)}]")
        rated.append((item, rating, verdict))
    if answers is not None:
        known = {d.item for d in due} | {d.ref for d in due}
        unknown = sorted(k for k in answers if k not in known)
    else:
        unknown = []
    reviewed = []
    with store.connection() as conn:  # one transaction for the whole session
        for item, rating, verdict in rated:
            next_due = review.apply_rating(conn, learner, item.item, rating, now, "review")
            reviewed.append(
                {
                    "item": item.item,
                    "rating": RATING_NAMES[rating],
                    "due": next_due,
                    "next": review.next_due_text(next_due, now),
                    **({"answer": verdict_json(verdict)} if verdict is not None else {}),
                }
            )
    until = records.iso(review.end_of_local_day(now))
    still_due = [i for i, d in records.cards_due(store, learner, until)]
    return {
        "reviewed": reviewed,
        "due_left_today": len(still_due),
        "not_due": unknown,
        "left_out": max(len(due) - len(rated), 0),
    }
