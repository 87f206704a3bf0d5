"""Mark a reference file from a (starter, solution) pair: the converter that
turned the labs' two copies into one source, kept for lab authors who write
a starter by hand first.

`mark(starter, solution, path)` returns a reference file whose starter view
is byte-identical to `starter` and whose solution view is byte-identical to
`solution` (tests check both). Regions come from a line diff (difflib),
widened so that no marker falls inside a multi-line string (a docstring is
wrapped whole: no comment lines end up inside it) or after a backslash
continuation, and merged when they touch.
"""

from __future__ import annotations

import difflib
import io
import tokenize
from pathlib import Path

from roadmap_cli.labs.starter_build import BEGIN, END, STARTER, comment_out, comment_prefix


def _cut_allowed(lines: list[str], path: str | Path) -> list[bool]:
    """ok[k]: a marker line may be inserted before line k (k = len: at the end)."""
    ok = [True] * (len(lines) + 1)
    if Path(path).suffix != ".py":
        return ok
    for k, line in enumerate(lines):
        if line.rstrip("\r\n").endswith("\\"):
            ok[k + 1] = False
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return ok
    for tok in tokens:
        (start_row, _), (end_row, _) = tok.start, tok.end
        if tok.type == tokenize.STRING and end_row > start_row:
            for k in range(start_row, end_row):  # 1-based rows: boundaries inside the string
                ok[k] = False
    return ok


def _regions(starter: list[str], solution: list[str], ok: list[bool]) -> list[list[int]]:
    """[sol_lo, sol_hi, st_lo, st_hi] per region, widened to allowed cuts and merged."""
    matcher = difflib.SequenceMatcher(None, starter, solution, autojunk=False)
    regions = [[j1, j2, i1, i2] for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    while True:
        merged: list[list[int]] = []
        for region in regions:  # regions that touch or overlap become one
            if merged and region[0] <= merged[-1][1]:
                last = merged[-1]
                last[1], last[3] = max(last[1], region[1]), max(last[3], region[3])
            else:
                merged.append(region)
        regions = merged
        # Widen one line at a time; lines between regions are equal in both
        # files, so both sides move together. Touching a neighbour merges above.
        widened = False
        for region in regions:
            if not ok[region[0]]:
                region[0] -= 1
                region[2] -= 1
                widened = True
            if not ok[region[1]]:
                region[1] += 1
                region[3] += 1
                widened = True
        if not widened:
            return regions


def _indent_of(lines: list[str]) -> str:
    for line in lines:
        if line.strip():
            return line[: len(line) - len(line.lstrip())]
    return ""


def mark(starter: str, solution: str, path: str | Path) -> str:
    """The single-source reference file for one (starter, solution) pair."""
    prefix = comment_prefix(path)
    st = starter.splitlines(keepends=True)
    sol = solution.splitlines(keepends=True)
    if prefix is None:
        if starter != solution:
            raise ValueError(f"{path}: cannot mark a file type without a line-comment prefix")
        return solution
    for lines in (st, sol):
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"  # markers need whole lines; restored below
    out: list[str] = []
    at = 0
    for sol_lo, sol_hi, st_lo, st_hi in _regions(st, sol, _cut_allowed(sol, path)):
        out.extend(sol[at:sol_lo])
        indent = _indent_of(sol[sol_lo:sol_hi]) or _indent_of(st[st_lo:st_hi]) or _indent_of(sol[sol_hi:])
        out.append(f"{indent}{prefix} {BEGIN}\n")
        out.extend(sol[sol_lo:sol_hi])
        if st_hi > st_lo:
            out.append(f"{indent}{prefix} {STARTER}\n")
            out.extend(comment_out(line, prefix) for line in st[st_lo:st_hi])
        out.append(f"{indent}{prefix} {END}\n")
        at = sol_hi
    out.extend(sol[at:])
    text = "".join(out)
    if not solution.endswith("\n") or not starter.endswith("\n"):
        raise ValueError(f"{path}: a file without a final newline cannot be marked exactly")
    return text
