"""Rendering `roadmap status` for people (the JSON comes from the same report), with its cadence line."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as e  # curriculum and lab text is data, never markup
from rich.table import Table

from roadmap_cli.formats.output import progress_bar

_STATE_STYLE = {"done": "green", "current": "bold yellow", "upcoming": "dim"}


def render_status(console: Console, report) -> None:
    pct = report.done / report.total if report.total else 0.0
    console.print(f"[bold]{e(report.curriculum)}[/]")
    console.print(f"Overall  {progress_bar(pct, 30)} {report.done}/{report.total} checkpoints ({pct:.0%})")
    if report.current_stage is not None:
        console.print(f"Current stage: [bold yellow]{report.current_stage}[/]")

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("Stage")
    table.add_column("Progress")
    table.add_column("Done", justify="right")
    for s in report.stages:
        style = _STATE_STYLE[s.state]
        marker = "▶ " if s.state == "current" else ("✓ " if s.state == "done" else "  ")
        table.add_row(
            str(s.number),
            f"[{style}]{marker}{e(s.title)}[/]",
            progress_bar(s.done / s.total if s.total else 0, 16),
            f"{s.done}/{s.total}",
        )
    console.print(table)

    if report.milestones:
        console.print("[bold]Milestones[/]")
        for m in report.milestones:
            mark = "[green]✓[/]" if m.reached else "·"
            stages = f"{m.stages[0]}–{m.stages[-1]}" if m.stages else "-"
            console.print(f"  {mark} M{m.number} {e(m.title)} (stages {stages}): {m.done}/{m.total}")

    if report.schedule:
        console.print(_schedule_line(report.schedule, report.total))

    if report.phases:  # work of the long-range plan that the ten stages do not cover (not in the totals above)
        console.print("[bold]Plan phases[/]")
        for ph in report.phases:
            mark = "[green]✓[/]" if ph.done == ph.total else "·"
            span = f" ({e(ph.span)})" if ph.span else ""
            console.print(f"  {mark} P{ph.number} {e(ph.title)}{span}: {ph.done}/{ph.total}  [dim]{e(ph.plan)}[/]")

    console.print("[bold]Labs[/]")
    if report.labs:
        for lab in report.labs:
            title = lab.get("title", {})
            title = title.get(report.lang) or title.get("en") if isinstance(title, dict) else title
            best = f" {best_text(lab)}" if lab.get("state") != "not-started" else ""
            state = lab.get("state_text") or lab["state"]  # "passed on CPU (n parts need a CUDA GPU)"
            # wrapped between words on a narrow terminal (ids have no spaces: never split)
            console.print(f"  {e(str(lab['id'])):<18} stage {lab.get('stage', '?'):<3} {state}{best}")
    else:
        console.print(
            "  [dim]no labs available yet[/]" if report.labs is None else "  [dim]none started — roadmap lab list[/]"
        )

    console.print("[bold]This week's cadence[/]")
    if report.cadence:
        render_cadence_line(console, report.cadence)
    else:
        console.print("  [dim]nothing logged yet — roadmap paper log TITLE[/]")

    if report.reviews and (report.reviews["due"] or report.reviews["new"]):
        r = report.reviews
        new = f" ({r['new']} never reviewed)" if r["new"] else ""
        console.print(f"[bold]Reviews[/] {r['due'] + r['new']} due today{new} — [cyan]roadmap review[/]")

    if report.next:
        console.print("[bold]Next[/]")
        for a in report.next:
            console.print(f"  {e(a.text)} [dim]({a.checkpoint_id})[/]\n    [cyan]{e(a.command)}[/]")
    for note in report.notes:
        console.print(f"[dim]note: {e(note)}[/]")


def best_text(lab: dict) -> str:
    """`best 35/95`, or `not graded yet` before the first attempt (a 0 there would read as a failed one)."""
    if not lab.get("attempts"):
        return "not graded yet"
    return f"best {lab['best_score']:g}/{lab['max_score']:g}"


def _schedule_line(sch, total: int) -> str:
    """Where today falls on the plan, worded for a start date in the future
    and for a plan whose planned weeks are all behind us."""
    if sch.verdict == "not started":
        return f"[bold]Schedule[/] starts {sch.start_date}: nothing is expected yet; you have {sch.done} — [bold]not started[/]"
    where = (
        f"plan expects stage {sch.planned_stage}"
        if sch.planned_stage
        else "the planned weeks are over: plan expects every stage"
    )
    return (
        f"[bold]Schedule[/] started {sch.start_date}, week {sch.weeks_elapsed:g}: {where} and "
        f"{sch.expected_done} of {total} checkpoints; you have {sch.done} — [bold]{sch.verdict}[/]"
    )


def render_cadence_line(console: Console, summary: dict) -> None:
    """This week's cadence in one compact line under the dashboard. The summary comes from
    `roadmap_cli.research.cadence_summary`; missing keys are tolerated."""
    label = summary.get("week") or summary.get("label") or ""
    parts = []
    for kind, value in (summary.get("kinds") or summary.get("targets") or {}).items():
        done, target = value.get("done", 0), value.get("target", 0)
        style = "green" if target and done >= target else "yellow"
        parts.append(f"[{style}]{kind} {done}/{target}[/]")
    hours = summary.get("hours")
    if hours:
        low, high = hours.get("min"), hours.get("max")
        goal = (
            f"/{low:g}"
            if low is not None and high in (None, low)
            else (f"/{low:g}–{high:g}" if low is not None else "")
        )
        parts.append(f"hours {hours.get('done') or 0:g}{goal}")
    streak = summary.get("streak")
    if streak is not None:
        parts.append(f"streak {streak}")
    console.print(f"  {label}  " + "  ".join(parts))
