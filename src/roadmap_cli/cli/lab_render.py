"""Rich rendering for the `lab` commands (imported inside command bodies)."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.markup import escape as e  # lab text, test ids and failure messages are data, never markup
from rich.table import Table

from roadmap_cli.cli.status_render import best_text
from roadmap_cli.labs.device import device_label

STATE_STYLE = {
    "passed": "green",
    "passed-on-cpu": "yellow",
    "partial": "yellow",
    "in-progress": "cyan",
    "not-started": "dim",
}


def _gradable(value) -> str:
    return {True: "yes", False: "[yellow]partly (GPU)[/]", None: "?"}[value]


def lab_list(console: Console, data: dict) -> None:
    from rich.cells import cell_len

    from roadmap_cli.formats.output import PIPED_TABLE_WIDTH

    table = Table(title=f"Labs (grading on {data['device']})")
    # The state ("passed on CPU (1 part needs a CUDA GPU)") stays on one line while the title
    # column, which folds, keeps at least 12 columns; on a narrower screen it wraps between words.
    width = console.width if console.is_terminal else min(console.width, PIPED_TABLE_WIDTH)
    longest = {
        key: max((cell_len(str(r.get(key) or "")) for r in data["labs"]), default=0) for key in ("id", "state_text")
    }
    whole_state = width - (longest["id"] + 5 + longest["state_text"] + 5 + 13 + 3 * 6 + 1) >= 12
    for col in ("id", "stage", "title", "state", "best", "gradable here"):
        # Ids are typed back into commands: never break one over two lines.
        table.add_column(col, overflow="fold", no_wrap=col == "id" or (col == "state" and whole_state))
    for row in data["labs"]:
        style = STATE_STYLE.get(row["state"], "")
        table.add_row(
            e(row["id"]),
            str(row["stage"]),
            e(row.get("title_text") or row["title"]["en"]),
            f"[{style}]{row.get('state_text') or row['state']}[/]",
            f"{row['best_score']:g}/{row['max_score']:g}" if row.get("attempts") else "[dim]—[/]",
            _gradable(row["gradable_here"]),
        )
    console.print(table)
    if any(r["parts_not_gradable_here"] for r in data["labs"]):
        console.print("[dim]partly (GPU): the parts that need a CUDA GPU are not graded or scored here.[/]")
    for lab, problems in data.get("invalid", {}).items():
        console.print(
            f"[yellow]warning:[/] lab {e(lab)} is not listed: {e(problems[1] if len(problems) > 1 else problems[0])}",
            soft_wrap=True,
            markup=True,
        )


def lab_status(console: Console, data: dict) -> None:
    if not data["labs"]:
        console.print("No lab started yet: `roadmap lab list`, then `roadmap lab start ID`.")
        return
    for lab in data["labs"]:
        style = STATE_STYLE.get(lab["state"], "")
        console.print(
            f"[bold]{e(lab['id'])}[/] [{style}]{lab.get('state_text') or lab['state']}[/] "
            + best_text(lab)
            + (f"  workspace {e(lab['workspace'])}" if lab.get("workspace") else ""),
            soft_wrap=True,
        )
        if lab.get("hints_total"):
            console.print(f"  hints seen: {lab['hints_seen']}/{lab['hints_total']}")
        if lab["parts_not_gradable_here"]:
            console.print(f"  not graded here (needs a CUDA GPU): {', '.join(lab['parts_not_gradable_here'])}")
        if not lab["history"]:
            console.print("  no attempts yet: run `roadmap grade` in the workspace")
            continue
        attempt_table(console, lab["id"], lab["history"], last_column="perf", skipped_said=True)


def attempt_table(
    console: Console,
    lab_id: str,
    attempts: list[dict],
    *,
    last_column: str,
    title: Optional[str] = None,
    skipped_said: bool = False,
) -> None:
    """`lab status`/`lab history`: one row per attempt, readable on an 80-column terminal.

    What every row shares is said once above the table (the device, the parts this machine cannot
    grade), so the columns left keep their width: the date and the outcome are never squeezed to
    nothing. `last_column` is "perf" (lab status) or "s" (lab history: seconds).
    """
    if title:
        console.print(f"[bold]{title}[/]", soft_wrap=True)
    devices = {_device_cell(a, lab_id) for a in attempts}
    one_device = len(devices) == 1
    if one_device:
        console.print(f"[dim]device: {e(next(iter(devices)).replace(chr(10), ', '))}[/]", soft_wrap=True)
    skipped = sorted({p["id"] for a in attempts for p in a["parts"] if p["status"] == "not-graded-here"})
    if skipped and not skipped_said:
        console.print(f"[dim]not graded here (needs a CUDA GPU): {e(', '.join(skipped))}[/]", soft_wrap=True)
    perf = last_column == "perf" and any(a.get("perf") for a in attempts)
    columns = [
        "#",
        "when (UTC)",
        "outcome",
        "score",
        "parts",
        "commit",
        *([] if one_device else ["device"]),
        *(["perf"] if perf else ["s"] if last_column == "s" else []),
    ]
    table = Table(show_edge=False)
    for col in columns:
        # "#" is the lab's own attempt number (`roadmap lab diff A B` takes it). The date, the score,
        # part ids and shas stay whole (one part per line); the outcome wraps between words; free text folds.
        table.add_column(
            col,
            overflow="fold",
            no_wrap=col in ("#", "when (UTC)", "score", "parts", "commit", "s"),
            min_width=len(col) if col in ("when (UTC)", "outcome", "score", "parts", "commit") else None,
        )
    for a in attempts:
        # Parts that need a GPU are named once above the table, not in every row.
        parts = "\n".join(f"{p['id']} {_part_cell(p)}" for p in a["parts"] if p["status"] != "not-graded-here")
        commit = (a["commit_sha"] or "")[:8] + ("\n+dirty" if a["dirty"] else "")
        # "passed-on-cpu (1 part not graded here)": the honest word with its count, wrapped between
        # words when the terminal is narrow
        outcome = a["outcome_text"] + ("" if a.get("counted", True) else " (not counted)")
        if a.get("kind") in ("verified", "self-graded"):
            # A cohort: whether the server vouches for it (the worker graded it) or it is the learner's claim.
            outcome += f"\n{a['kind']}"
        cells = [
            str(a.get("number") or a["id"]),
            (a["started_at"] or "").replace("T", " ")[5:16],
            e(outcome),
            f"{a['score']:g}/{a['max_score']:g}",
            e(parts),
            e(commit),
        ]
        if not one_device:
            cells.append(e(_device_cell(a, lab_id)))
        if perf:
            cells.append(e("; ".join(f"{f['name']}={f['value']:.4g} {f['unit']}" for f in a["perf"][:3])))
        elif last_column == "s":
            cells.append(f"{a['duration_s'] or 0:.1f}")
        table.add_row(*cells)
    console.print(table)


def _device_cell(a: dict, lab_id: str) -> str:
    device = device_label(a["device"], a["interpret_mode"], lab_id, short=True)
    if a.get("graded_on"):
        device += f"\non remote {a['graded_on']}"  # `grade --on NAME`: graded there, recorded here
    if a.get("sandbox") == "weak":
        device += "\nweak sandbox"  # graded without the OS wall (no bubblewrap there)
    return device


def _part_cell(p: dict) -> str:
    if p["status"] == "not-graded-here":
        return "not graded here"
    if p["status"] in ("not-run", "focused"):
        return "–"
    return f"{p['points']:g}/{p['max_points']:g}"


def lab_history(console: Console, data: dict) -> None:
    if not data["attempts"]:
        console.print(f"{data['lab']}: no attempts yet: run `roadmap grade` in the workspace")
        return
    attempt_table(
        console,
        data["lab"],
        data["attempts"],
        last_column="s",
        title=f"{e(data['lab'])}: {data['total']} attempt(s), newest first",
    )


def lab_diff(console: Console, data: dict) -> None:
    a, b = data["a"], data["b"]
    console.print(
        f"[bold]{e(data['lab'])}[/] attempt #{a['number']} ({a['outcome_text']} {a['score']:g}/{a['max_score']:g}) "
        f"→ #{b['number']} ({b['outcome_text']} {b['score']:g}/{b['max_score']:g})",
        soft_wrap=True,
    )
    if not data["changed"]:
        console.print(
            f"no test changed outcome ({data['unchanged']} the same, {data['not_comparable']} ran in only one of them)"
        )
        return
    mark = {"fixed": "[green]+[/]", "broken": "[red]-[/]", "other": "[yellow]~[/]"}
    for c in data["changed"]:
        console.print(f"{mark[c['kind']]} {e(c['test'])}: {c['a']} → {c['b']}", soft_wrap=True, highlight=False)
    s = data["summary"]
    console.print(
        f"[dim]{s['fixed']} fixed, {s['broken']} broken, {s['other']} other change(s); "
        f"{data['unchanged']} unchanged; {data['not_comparable']} ran in only one of them[/]"
    )


# ------------------------------------------------------------------ lab show


def handout(console: Console, data: dict, lang: str, pager: bool = True) -> None:
    """The handout: through $PAGER (`less -R` by default, exits at once when
    it fits, like git) on a terminal; the Markdown source as plain text when
    piped, so code blocks are never wrapped or re-flowed."""
    if lang != "en" and not data.get("translated"):
        # The handout is written in English: the title and summary come first in the chosen language.
        head = f"{data['title'].get(lang) or data['title']['en']}\n{data['summary'].get(lang) or data['summary']['en']}\n\n"
    else:
        head = ""
    if not console.is_terminal:
        console.file.write(head + data["readme"].rstrip("\n") + "\n")
        return
    from rich.markdown import Markdown

    if not pager:
        console.print(head, markup=False, end="")
        console.print(Markdown(data["readme"]))
        return
    import io
    import os
    import shlex
    import subprocess

    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, width=console.width, color_system=console.color_system).print(
        e(head), Markdown(data["readme"])
    )
    command = shlex.split(os.environ.get("PAGER") or "less -R")
    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    try:
        subprocess.run(command, input=buffer.getvalue(), text=True, env=env, check=False)
    except (OSError, ValueError):  # no pager installed: print it
        console.file.write(buffer.getvalue())
