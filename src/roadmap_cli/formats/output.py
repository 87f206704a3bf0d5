"""Rendering for people (rich) and for scripts (a versioned JSON envelope).

Every read command builds one result object and hands it to `emit`, with a
render function for people. The JSON and the table come from the same data,
so the two outputs never drift apart.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable

from rich.console import Console, ConsoleDimensions

JSON_SCHEMA_VERSION = 1
# Width when the output is not a terminal (a pipe, a file, a test's capture):
# nothing wraps, so a path, an id or a line of code is never split in two and
# `grep`/copy-paste see whole lines. Tables take only the width they need.
NO_WRAP_WIDTH = 10_000
# ...except a table's: piped, a table is laid out in at most this many columns (its long cells fold
# inside their column), so `roadmap lab list | less` stays readable. --json is the format for scripts.
PIPED_TABLE_WIDTH = 100


class AdaptiveConsole(Console):
    """A rich Console that wraps at the terminal's width on a terminal, and
    never when piped (rich would otherwise wrap at 80 columns, or at
    $COLUMNS, whatever the reader is). Decided at each print: the same
    process may write to a terminal and to a captured stream (tests)."""

    @property
    def size(self) -> ConsoleDimensions:
        if not self.is_terminal and not self.is_jupyter:
            return ConsoleDimensions(NO_WRAP_WIDTH, self._height or 25)
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: A003 - rich's name
        if kwargs.get("width") is None and not self.is_terminal and not self.is_jupyter:
            from rich.table import Table  # the commands that print tables have imported it already

            if any(isinstance(o, Table) for o in objects):
                kwargs["width"] = PIPED_TABLE_WIDTH
        super().print(*objects, **kwargs)


console = AdaptiveConsole(highlight=False)
err_console = AdaptiveConsole(stderr=True, highlight=False)


def to_jsonable(value: Any) -> Any:
    """Turn pydantic models, dataclasses, dates and paths into plain JSON data."""
    if hasattr(value, "model_dump"):
        return to_jsonable(value.model_dump(mode="json"))
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return to_jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    return value


def envelope(command: str, data: Any) -> dict:
    return {"roadmap": JSON_SCHEMA_VERSION, "command": command, "data": to_jsonable(data)}


def emit(command: str, data: Any, *, as_json: bool, render: Callable[[Console], None] | None = None) -> None:
    """Print `data` as a JSON envelope, or call `render` for people."""
    if as_json:
        sys.stdout.write(json.dumps(envelope(command, data), ensure_ascii=False, indent=2) + "\n")
        return
    if render is not None:
        render(console)
    else:
        console.print(data)


def error_line(message: str, details: list[str] | None = None) -> None:
    from rich.markup import escape

    # The message often quotes user input (paths, ids): never read it as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    for line in details or []:
        err_console.print(f"  {line}", markup=False, soft_wrap=True)


def progress_bar(fraction: float, width: int = 20) -> str:
    """A plain-text bar ("█████░░░░░") that also reads well without colour."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * width)
    return "█" * filled + "░" * (width - filled)
