"""Every command that prints a table reads well on an 80-column terminal, and
stays narrow when piped.

On a terminal (a rich console 80 columns wide) each table is measured the way
rich lays it out: a column narrower than its header means the header wraps
(the "when (UTC)" of `lab history` used to come out one letter per line), and
a column squeezed below 3 cells shows nothing. Every line must fit in 80
columns. Piped (not a terminal: nothing wraps, output/AdaptiveConsole), a
table is at most PIPED_LIMIT columns wide; `--json` and TSV are the formats
for wider data. The home folder's path is data, not layout: lines that print
it are left out of the width checks.
"""

from __future__ import annotations

import re

import io
import shutil
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from roadmap_cli.formats.output import AdaptiveConsole

FIXTURES = Path(__file__).parent / "fixtures_labs"
ADDER = FIXTURES / "labs" / "adder"
WIDTH = 80
PIPED_LIMIT = 100


class RecordingTerminal(Console):
    """An 80-column terminal (no colour) that keeps the tables it was asked to print."""

    def __init__(self) -> None:
        super().__init__(
            width=WIDTH,
            height=50,
            force_terminal=True,
            color_system=None,
            file=io.StringIO(),
            highlight=False,
            legacy_windows=False,
            _environ={},
        )
        self.tables: list[Table] = []

    def print(self, *objects, **kwargs) -> None:  # noqa: A003 - rich's name
        self.tables += [o for o in objects if isinstance(o, Table)]
        super().print(*objects, **kwargs)

    def text(self) -> str:
        return self.file.getvalue()


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> RecordingTerminal:
    """Commands print through roadmap_cli.formats.output.console (looked up at call time): make it the terminal."""
    from roadmap_cli.formats import output

    term = RecordingTerminal()
    monkeypatch.setattr(output, "console", term)
    return term


def column_problems(term: RecordingTerminal) -> list[str]:
    """Columns that rich lays out narrower than their header, or under 3 cells, at this width."""
    problems = []
    for table in term.tables:
        widths = table._calculate_column_widths(term, term.options.update_width(WIDTH))  # rich's own layout
        for column, width in zip(table.columns, widths):
            header = str(column.header)
            cells = [cell_len(line) for cell in column.cells for line in str(cell).splitlines()] or [0]
            if table.show_header and header and width < cell_len(header):
                problems.append(f"{table.title!r}: header {header!r} wraps ({width} < {cell_len(header)} cells)")
            if width < min(3, max(cells)):
                problems.append(f"{table.title!r}: column {header!r} shrinks to {width} cell(s)")
    return problems


def long_lines(text: str, limit: int, home: Path) -> list[str]:
    return [line for line in text.splitlines() if cell_len(line) > limit and str(home) not in line]


def check_terminal(run_cli, term: RecordingTerminal, home: Path, *args: str, tables: bool = True) -> str:
    term.file = io.StringIO()
    term.tables.clear()
    result = run_cli(*args)
    assert result.exit_code in (0, 1), (args, result)
    text = term.text()
    if tables:
        assert term.tables, f"{args}: printed no table (is it still a table-printing command?)"
    assert not column_problems(term), (args, column_problems(term), text)
    assert not long_lines(text, WIDTH, home), (args, long_lines(text, WIDTH, home))
    return text


class RecordingPipe(AdaptiveConsole):
    """The console of a piped run (not a terminal), keeping what each table printed."""

    def __init__(self) -> None:
        super().__init__(file=io.StringIO(), highlight=False, color_system=None, _environ={})
        self.table_text: list[str] = []

    def print(self, *objects, **kwargs) -> None:  # noqa: A003 - rich's name
        if not any(isinstance(o, Table) for o in objects):
            return super().print(*objects, **kwargs)
        with self.capture() as captured:
            super().print(*objects, **kwargs)
        self.table_text.append(captured.get())
        self.file.write(captured.get())


def check_piped(run_cli, monkeypatch, home: Path, *args: str, whole: bool = False) -> str:
    """Piped, every table is at most PIPED_LIMIT columns wide (`whole`: every line of the output is).
    Prose lines are never wrapped when piped (a checkpoint's sentence, a command to copy stay whole)."""
    from roadmap_cli.formats import output

    pipe = RecordingPipe()
    monkeypatch.setattr(output, "console", pipe)
    result = run_cli(*args)
    assert result.exit_code in (0, 1), (args, result)
    text = pipe.file.getvalue()
    assert not pipe.is_terminal and pipe.width > PIPED_LIMIT  # really the piped layout
    checked = text if whole else "".join(pipe.table_text)
    assert not long_lines(checked, PIPED_LIMIT, home), (args, long_lines(checked, PIPED_LIMIT, home))
    return text


# The real curriculum and labs: every command that prints a table from them.
REAL_TABLES = [
    ("status",),
    ("stages",),
    ("curriculum", "show"),
    ("curriculum", "readings"),
    ("lab", "list"),
    ("cohort", "status"),
    ("doctor",),
]


@pytest.mark.parametrize("args", REAL_TABLES, ids=" ".join)
def test_real_tables_at_80_columns(run_cli, terminal, roadmap_home, monkeypatch, args) -> None:
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    monkeypatch.setenv("ROADMAP_LEARNER", "ada.lovelace@example-university.org")
    assert run_cli("log", "hours", "2").exit_code == 0
    assert run_cli("lab", "start", "minigpt").exit_code == 0
    check_terminal(run_cli, terminal, roadmap_home, *args)


@pytest.mark.parametrize("args", REAL_TABLES, ids=" ".join)
def test_real_tables_piped_stay_within_100_columns(run_cli, roadmap_home, monkeypatch, args) -> None:
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    assert run_cli("lab", "start", "minigpt").exit_code == 0
    check_piped(run_cli, monkeypatch, roadmap_home, *args, whole=args == ("lab", "list"))


@pytest.fixture
def graded_adder(run_cli, fake_labs, roadmap_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture lab graded four ways: starter (failed), one part, right (passed on CPU, with perf
    figures), and right again with uncommitted changes."""
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", ws).exit_code == 0
    monkeypatch.chdir(ws)
    run_cli("grade")
    run_cli("grade", "--part", "add")
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    (ws / "mul.py").write_text("def mul(a, b):\n    return a * b\n")
    run_cli("grade")
    (ws / "notes.txt").write_text("uncommitted\n")
    run_cli("grade")
    return ws


ADDER_TABLES = [
    ("lab", "history", "adder"),
    ("lab", "status", "adder"),
    ("lab", "status"),
    ("lab", "list"),
    ("grade",),
    ("status",),
]


def test_lab_tables_at_80_columns_and_piped_within_100(run_cli, terminal, roadmap_home, graded_adder, monkeypatch):
    """Both layouts of the same four grades (one test: the fixture's grades are its cost)."""
    for args in ADDER_TABLES:
        text = check_terminal(run_cli, terminal, graded_adder.parent, *args)
        if args[:2] == ("lab", "history"):
            assert "when (UTC)" in text and "passed-on-cpu" in text  # the date column and the outcome, whole
            rows = [line for line in text.splitlines() if line.strip()[:2] in ("1 ", "2 ", "3 ", "4 ")]
            assert len(rows) == 4 and all(len(line.split()) >= 4 for line in rows), text  # a date in every row
    for args in ADDER_TABLES:
        check_piped(run_cli, monkeypatch, graded_adder.parent, *args)


def test_the_check_can_fail(terminal) -> None:
    """A table whose columns cannot fit is caught (the test is not vacuous)."""
    table = Table("when (UTC)", "a very long header indeed", "x" * 30, "y" * 30)
    table.add_row("12-07 15:58", "z" * 40, "w" * 30, "v" * 30)
    terminal.print(table)
    assert column_problems(terminal)


def test_the_grade_table_keeps_points_and_tests_at_80_columns_with_long_part_titles() -> None:
    """Newcomer walk (issue 36): minigpt's part titles are long; the part column took the whole width and the
    points, tests and mark columns shrank to nothing at 80 columns (and wrapped two characters wide at 100)."""
    from types import SimpleNamespace

    from rich.console import Console

    from roadmap_cli.cli.grade_render import grade_report
    from roadmap_cli.labs.spec import find_lab

    lab = find_lab("minigpt")
    parts = [
        SimpleNamespace(
            id=p.id,
            title={"en": p.title.en + " " + p.title.en},
            points=0.0,
            max_points=float(p.points),
            status="failed",
            tests_passed=0,
            tests_total=7,
            needs_cuda=False,
            message="x",
        )
        for p in lab.parts
    ]
    run = SimpleNamespace(
        lab_id="minigpt",
        outcome="failed",
        parts=parts,
        score=0.0,
        max_score=100.0,
        device="cpu",
        interpret_mode=False,
        sandbox="strong",
        duration_s=1.0,
        tests=[],
        cuda_checks=[],
    )
    outcome = SimpleNamespace(
        run=run,
        precheck=None,
        commit_sha=None,
        dirty=False,
        attempt_number=1,
        attempt_id=1,
        graded_where=None,
        marked=[],
        hint=None,
        solution_unlocked=False,
        cuda_checks=[],
    )
    for width in (80, 100):
        console = Console(width=width, record=True, force_terminal=True, color_system=None)
        try:
            grade_report(console, outcome, "en")
        except AttributeError:
            pass  # what follows the table (failures, figures, footer) needs a whole outcome: not this test's

        text = console.export_text()
        rows = [line for line in text.splitlines() if line.startswith("│ ✗")]
        assert len(rows) == len(parts), text
        for row in rows:
            assert re.search(r"│ 0/\d+ +│", row), (width, text)  # the points, whole, on the part's first line
            assert "0/7" in row, (width, text)  # the tests column, whole, on the same line
            assert len(row) <= width
