"""Running a `roadmap review` session: ask each due item, rate it, reschedule.

A question item is asked like in `roadmap quiz` and its checked answer gives
the rating (quiz/checking.py documents the mapping); a checkpoint item asks
the learner to explain it (aloud, on paper) and rate themselves
Again / Hard / Good / Easy. With answers from a file, items the file does
not mention stay due; ratings are stored together at the end, so an
unreadable answer or an interrupted session records nothing.
"""

from __future__ import annotations

from rich.markup import escape as e

from roadmap_cli.errors import UserError
from roadmap_cli.quiz.checking import RATING_NAMES, AnswerProblem, check, parse_rating


def _rate_from_file(cur, item, given: str, lang: str):
    """(rating, verdict or None) for one item answered in a file."""
    from roadmap_cli.quiz.review import QUESTION

    try:
        if item.kind == QUESTION:
            verdict = check(cur.question(item.ref)[0], given, lang)
            return verdict.rating, verdict
        return parse_rating(given), None
    except AnswerProblem as problem:
        raise UserError(f"answer to {item.item}: {problem}; nothing was recorded") from None


def _rate_interactive(console, cur, item, lang: str, heading: str):
    from roadmap_cli.cli.quiz_prompt import ask, ask_rating, read_line
    from roadmap_cli.quiz.review import QUESTION

    if item.kind == QUESTION:
        verdict = ask(console, cur.question(item.ref)[0], lang, heading)
        return verdict.rating, verdict
    checkpoint = cur.checkpoint(item.ref)
    console.print(f"\n[bold]{e(heading)}[/] [dim]checkpoint · {item.ref}[/]")
    console.print(f"Explain, aloud or on paper: [bold]{e(checkpoint.text.get(lang))}[/]")
    read_line(console, "press Enter when you have explained it")
    return ask_rating(console, "how well could you explain it? again / hard / good / easy"), None


def run_review(console, store, cur, learner: str, due: list, now, lang: str, *, answers, quiet: bool) -> dict:
    from roadmap_cli.cli.quiz_prompt import show_verdict, verdict_json
    from roadmap_cli.quiz import records, review

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
            rating, verdict = _rate_interactive(console, cur, item, lang, f"[{n}/{len(due)}]")
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


def render_summary(console, data: dict) -> None:
    if not data["reviewed"]:
        console.print(
            "Nothing due for review. [dim](done explain checkpoints and answered quiz questions come "
            "back here when FSRS says so: roadmap quiz, roadmap check)[/]"
        )
    else:
        console.print(f"\n[bold]Reviewed {len(data['reviewed'])}[/]")
        for r in data["reviewed"]:
            console.print(f"  {r['item']}  {r['rating']}  → next {r['next']}", soft_wrap=True)
    if data["due_left_today"]:
        console.print(f"[dim]{data['due_left_today']} more due later today (each item is asked once per session)[/]")
    if data["not_due"]:
        console.print(f"[dim]not due now, left alone: {', '.join(data['not_due'])}[/]", soft_wrap=True)
