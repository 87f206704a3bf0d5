"""Quizzes and review in the terminal: asking one question (rich prompts), showing the verdict, a
review session's summary.

Asking and showing are shared by `roadmap quiz` and `roadmap review`. An answer that cannot be
read at all ("banana" for a number) is asked again; a wrong answer is not.
End of input (Ctrl-D, or a piped script that runs out) stops the session
with one line, before anything is recorded.
"""

from __future__ import annotations

from rich.markup import escape as e  # curriculum text is data, never markup

from roadmap_cli.errors import UserError
from roadmap_cli.quiz.checking import RATING_NAMES, AnswerProblem, Verdict, check, parse_rating
from roadmap_cli.quiz.session import question_view


def read_line(console, label: str) -> str:
    from rich.prompt import Prompt

    try:
        return Prompt.ask(label, console=console, default="", show_default=False)
    except EOFError:
        raise UserError("input ended before the session did; nothing was recorded") from None


def show_question(console, question, lang: str, heading: str) -> None:
    view = question_view(question, lang)
    console.print(f"\n[bold]{e(heading)}[/] [dim]{question.kind} · {question.id}[/]")
    console.print(e(view["prompt"]))
    if question.kind == "numeric":
        unit = f" in {question.unit}" if question.unit else ""
        within = f"±{question.tolerance:.0%}" if question.tolerance else "exact"
        console.print(
            f"[dim]a number{e(unit)} (arithmetic like 2*32*128 is fine; another unit of the same "
            f"quantity is converted; {within})[/]"
        )
    for entry in view.get("options", []) + view.get("items", []):
        _indented(console, f"{entry['label']}) {entry['text']}", hanging=len(entry["label"]) + 2)
    if question.kind == "ordering":
        console.print(
            "[dim]type the labels in the right order, e.g. "
            + " ".join(x["label"] for x in reversed(view["items"]))
            + "[/]"
        )


def ask_rating(console, label: str = "how well did you recall it? again / hard / good / easy") -> int:
    while True:
        text = read_line(console, label)
        try:
            return parse_rating(text)
        except AnswerProblem as problem:
            console.print(f"[yellow]{e(str(problem))}[/]")


def ask(console, question, lang: str, heading: str) -> Verdict:
    show_question(console, question, lang, heading)
    if question.kind == "recall":
        read_line(console, "your answer (say it, write it, or type it here; Enter shows the model answer)")
        console.print(f"[bold]model answer[/] {e(question.model_answer.get(lang))}")
        rating = ask_rating(console)
        verdict = check(question, RATING_NAMES[rating], lang)
    else:
        while True:
            text = read_line(console, "answer")
            try:
                verdict = check(question, text, lang)
                break
            except AnswerProblem as problem:
                console.print(f"[yellow]{e(str(problem))}[/]")
    show_verdict(console, verdict)
    return verdict


def show_verdict(console, verdict: Verdict) -> None:
    if verdict.kind == "recall":
        console.print(f"[dim]rated {RATING_NAMES[verdict.rating]}[/]")
        return
    # Wrapped at a terminal's width between words (piped, the console never wraps: whole lines for grep).
    if verdict.correct:
        console.print(f"[green]✓ right[/] [dim]({e(verdict.expected)})[/]")
        for line in verdict.feedback:
            _indented(console, line, style="dim")
        return
    console.print(f"[red]✗ {e(verdict.answer) or '(no answer)'}[/] — expected {e(verdict.expected)}")
    for line in verdict.feedback:
        _indented(console, line)


def _indented(console, text: str, *, hanging: int = 0, style: str = "") -> None:
    """`text` two columns in; its wrapped lines `hanging` columns further (under an option's text, not its
    label). Plain text: curriculum text is data, never markup."""
    from rich.padding import Padding
    from rich.text import Text

    if not hanging:
        console.print(Padding(Text(text, style=style), (0, 0, 0, 2)))
        return
    head, rest = text[:hanging], text[hanging:]
    from rich.table import Table

    grid = Table.grid()
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(Text(head, style=style), Text(rest, style=style))
    console.print(Padding(grid, (0, 0, 0, 2)))


def verdict_json(verdict: Verdict) -> dict:
    return {
        "question": verdict.question_id,
        "kind": verdict.kind,
        "answer": verdict.answer,
        "correct": verdict.correct,
        "rating": RATING_NAMES[verdict.rating],
        "expected": verdict.expected,
        "feedback": verdict.feedback,
    }


def ask_review_item(console, cur, item, lang: str, heading: str):
    """(rating, verdict or None) for one review item asked in the terminal: a question is asked as in a quiz;
    a checkpoint is explained aloud or on paper, then rated by the learner."""
    from roadmap_cli.quiz.review import QUESTION

    if item.kind == QUESTION:
        verdict = ask(console, cur.question(item.ref)[0], lang, heading)
        return verdict.rating, verdict
    checkpoint = cur.checkpoint(item.ref)
    console.print(f"\n[bold]{e(heading)}[/] [dim]checkpoint · {item.ref}[/]")
    console.print(f"Explain, aloud or on paper: [bold]{e(checkpoint.text.get(lang))}[/]")
    read_line(console, "press Enter when you have explained it")
    return ask_rating(console, "how well could you explain it? again / hard / good / easy"), None


def review_summary(console, data: dict) -> None:
    """What a review session did: each item's rating and next due date, what is left for later."""
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
