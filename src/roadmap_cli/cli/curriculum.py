"""Curriculum commands: `curriculum show|validate|readings`, `stages`, `stage show`.

Each command: parse -> call a function in roadmap_cli.curriculum.views (or
the loader) -> render. Text appears in one language, the context's `lang`.
"""

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of tables.")]

curriculum_app = typer.Typer(
    help="Inspect and validate the curriculum (stages, checkpoints, plans, reading list).", no_args_is_help=True
)
stage_app = typer.Typer(help="One stage of the curriculum.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(curriculum_app, name="curriculum")
    app.add_typer(stage_app, name="stage")
    app.command("stages")(stages)


def _done_ids(ctx) -> set[str]:
    from roadmap_cli.tracker.progress import completed

    return set(completed(ctx.store()))


@curriculum_app.command("show")
def show(as_json: JsonOpt = False) -> None:
    """Overview: stages with counts, milestones, levels, long-range plans, cadence, reading list."""
    from roadmap_cli.curriculum.views import overview
    from roadmap_cli.formats.output import emit

    ctx = context.current()
    data = overview(ctx.curriculum(), ctx.lang, path=str(ctx.curriculum_path()))

    def render(console) -> None:
        from rich.markup import escape as e  # curriculum text is data, never markup
        from rich.table import Table

        cp = data["checkpoints"]
        console.print(f"[bold]{e(data['title'])}[/]  ({e(data['path'])})")
        if data["summary"]:
            console.print(e(data["summary"]))
        table = Table("#", "stage", "weeks", "topics", "checkpoints", "build", "readings")
        for s in data["stages"]:
            table.add_row(
                str(s["number"]),
                e(s["title"]),
                str(s["planned_weeks"]),
                str(s["topics"]),
                str(s["checkpoints"]),
                str(s["build_checkpoints"]),
                str(s["readings"]),
            )
        console.print(table)
        console.print(
            f"{cp['total']} checkpoints ({cp['explain']} explain, {cp['build']} build), {data['planned_weeks']} planned weeks"
        )
        console.print("\n[bold]Milestones[/]")
        for m in data["milestones"]:
            note = f"  — {m['note']}" if m["note"] else ""
            console.print(
                f"  {m['number']}. "
                + e(f"{m['title']} (stages {', '.join(map(str, m['stages']))}): {'; '.join(m['abilities'])}{note}")
            )
        console.print(f"\n[bold]Final goal[/]  {e(data['final_goal'])}")
        console.print("\n[bold]Levels[/]")
        for lv in data["levels"]:
            console.print(f"  {lv['number']}. " + e(f"{lv['title']} — {lv['description']}"))
        for plan in data["plans"]:
            console.print(f"\n[bold]{e(plan['title'])}[/] [dim]({plan['id']})[/]")
            for ph in plan["phases"]:
                span = f" [{ph['span']}]" if ph["span"] else ""
                console.print(f"  {ph['number']}. " + e(f"{ph['title']}{span}"))
                for cp in ph["checkpoints"]:  # the phase's own work, beyond the ten stages
                    console.print("     · " + e(f"{cp['text']} ({cp['id']})"))
            if plan["fast_track"]:
                console.print(
                    "  " + e(f"fast track: {plan['fast_track']['months']} months — {plan['fast_track']['note']}")
                )
        hours = data["cadence"]["weekly_hours"]
        console.print(f"\n[bold]Cadence[/]  {hours['min']:g}-{hours['max']:g} hours a week")
        for t in data["cadence"]["targets"]:
            console.print(
                "  " + e(f"{t['count']} {t['kind']} / {t['period']}" + (f"  ({t['text']})" if t["text"] else ""))
            )
        rl = data["reading_list"]
        console.print(
            f"\n[bold]Reading list[/]  {rl['total']} entries ({rl['with_arxiv']} on arXiv): roadmap curriculum readings"
        )

    emit("curriculum show", data, as_json=as_json, render=render)


@curriculum_app.command("validate")
def validate(
    path: Annotated[
        Optional[str], typer.Argument(help="Curriculum YAML to check (default: the active curriculum).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a curriculum file; print every problem as file:line:col: message (exit 2 if invalid)."""
    from pathlib import Path

    from roadmap_cli.curriculum import check_curriculum
    from roadmap_cli.formats.output import emit

    target = Path(path).expanduser() if path else context.current().curriculum_path()
    report = check_curriculum(target)
    data = {"path": str(target), "valid": report.ok, "errors": report.errors, "warnings": report.warnings}

    def render(console) -> None:
        for line in report.errors + report.warnings:
            console.print(line, markup=False, soft_wrap=True)
        if report.ok:
            extra = f" ({len(report.warnings)} warning(s))" if report.warnings else ""
            console.print(f"{target}: valid{extra}", markup=False, soft_wrap=True)
        else:
            console.print(f"{target}: {len(report.errors)} problem(s)", markup=False, soft_wrap=True)

    emit("curriculum validate", data, as_json=as_json, render=render)
    if not report.ok:
        raise typer.Exit(code=2)


@curriculum_app.command("readings")
def readings(
    stage: Annotated[
        Optional[int], typer.Option("--stage", help="Only the readings tied to this stage number.")
    ] = None,
    kind: Annotated[
        Optional[str],
        typer.Option("--kind", help="Only this kind: paper, system, book, article, course, video or docs."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The curriculum's reading list (papers with arXiv ids, systems, books), each tied to a stage."""
    from roadmap_cli.curriculum import views
    from roadmap_cli.formats.output import emit

    ctx = context.current()
    rows = views.readings(ctx.curriculum(), stage=stage, kind=kind)

    def render(console) -> None:
        from rich.markup import escape
        from rich.table import Table

        table = Table("stage", "title", "year", "arXiv / URL")
        for r in rows:
            table.add_row(
                str(r["stage"]), escape(r["title"]), str(r["year"] or ""), escape(r["arxiv"] or r["url"] or "")
            )
        console.print(table)
        console.print(f"{len(rows)} reading(s)")

    emit("curriculum readings", rows, as_json=as_json, render=render)


def stages(as_json: JsonOpt = False) -> None:
    """All stages: number, title, checkpoints done/total, planned weeks."""
    from roadmap_cli.curriculum.views import stage_rows
    from roadmap_cli.formats.output import emit, progress_bar

    ctx = context.current()
    rows = stage_rows(ctx.curriculum(), _done_ids(ctx), ctx.lang)

    def render(console) -> None:
        from rich.markup import escape
        from rich.table import Table

        table = Table("#", "stage", "checkpoints", "", "weeks", "id")
        for r in rows:
            frac = r["done"] / r["total"] if r["total"] else 0.0
            table.add_row(
                str(r["number"]),
                escape(r["title"]),
                f"{r['done']}/{r['total']}",
                progress_bar(frac, 10),
                str(r["planned_weeks"]),
                r["id"],
            )
        console.print(table)

    emit("stages", rows, as_json=as_json, render=render)


@stage_app.command("show")
def stage_show(
    ref: Annotated[str, typer.Argument(help="Stage number (e.g. 2) or id (e.g. build-minigpt).")],
    as_json: JsonOpt = False,
) -> None:
    """One stage: goal, resources, topics and terms, checkpoints (✓, kind, id), readings."""
    from roadmap_cli.curriculum.views import stage_detail
    from roadmap_cli.formats.output import emit

    ctx = context.current()
    cur = ctx.curriculum()
    data = stage_detail(cur, cur.stage(ref), _done_ids(ctx), ctx.lang)
    from roadmap_cli.tracker.progress import checkpoint_records

    # what the learner wrote with `roadmap check --note/--evidence`, shown where the checkpoint is
    records = checkpoint_records(ctx.store(), [c["id"] for c in data["checkpoints"]])
    from roadmap_cli.quiz.records import best_scores, current_learner

    # the best quiz attempt per checkpoint (`roadmap quiz`): evidence shown as "quiz 3/3"
    quizzes = best_scores(ctx.store(), current_learner(ctx.store()), [c["id"] for c in data["checkpoints"]])
    for c in data["checkpoints"]:
        record = records.get(c["id"], {})
        c.update(
            completed_at=record.get("completed_at"),
            evidence=record.get("evidence"),
            notes=record.get("notes", []),
            quiz=quizzes.get(c["id"]),
        )

    def render(console) -> None:
        from rich.markup import escape

        console.print(f"[bold]Stage {data['number']} · {escape(data['title'])}[/]  [dim]{data['id']}[/]")
        console.print(
            f"{escape(data['goal'])}  ({data['planned_weeks']} weeks, {data['done']}/{data['total']} checkpoints)"
        )
        if data["resources"]:
            console.print("\n[bold]Resources[/]")
            for r in data["resources"]:
                where = r["url"] or (f"arXiv:{r['arxiv']}" if r["arxiv"] else "")
                console.print(f"  • {escape(r['title'])} [dim]({r['kind']})[/] {escape(where)}")
        if data["topics"]:
            console.print("\n[bold]Topics[/]")
        if data["topics"] and not any(t["terms"] or t["formula"] for t in data["topics"]):
            # a flat list of topics (stages 6-9) reads better on one line
            console.print("  " + escape(" · ".join(t["title"] for t in data["topics"])))
        for t in data["topics"] if any(t["terms"] or t["formula"] for t in data["topics"]) else []:
            terms = f": {', '.join(t['terms'])}" if t["terms"] else ""
            console.print(f"  • {escape(t['title'])}{escape(terms)}")
            if t["formula"]:
                for line in t["formula"].splitlines():
                    console.print(f"      {line}", markup=False)
        console.print("\n[bold]Checkpoints[/]")
        for c in data["checkpoints"]:
            # id on its own line, never wrapped: people copy it into `roadmap check`
            mark = "[green]✓[/]" if c["done"] else "·"
            proof = f"  [dim]← {', '.join(c['proved_by'])}[/]" if c["proved_by"] else ""
            quiz = c["quiz"]
            score = (
                f"  [{'green' if quiz['passed'] else 'yellow'}]quiz {quiz['correct']}/{quiz['total']}[/]"
                if quiz
                else ""
            )
            console.print(f"  {mark} {c['kind']:<8} [bold]{c['id']}[/]{score}{proof}", soft_wrap=True)
            console.print(f"             {escape(c['text'])}")
            if c["done"] and c["completed_at"]:
                evidence = f" · {escape(c['evidence'])}" if c["evidence"] else ""
                console.print(f"             [dim]done {c['completed_at'][:10]}{evidence}[/]", soft_wrap=True)
            for n in c["notes"]:
                console.print(f"             [dim]note {n['created_at'][:10]}:[/] {escape(n['text'])}", soft_wrap=True)
        if data["readings"]:
            console.print("\n[bold]Readings[/]")
            for r in data["readings"]:
                where = f"arXiv:{r['arxiv']}" if r["arxiv"] else (r["url"] or "")
                console.print(f"  • {escape(r['title'])} [dim]{escape(where)}[/]")

    emit("stage show", data, as_json=as_json, render=render)
