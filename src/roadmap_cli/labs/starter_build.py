"""One source for starter and solution: the reference files carry the starter.

A lab's reference solution (`solution/` overlaid with `solution_files`) is the
single source. The code a learner writes is marked, nbgrader-style, with the
starter's text written beside it as comments:

    def block_hash(parent_hash, token_ids):
        # BEGIN SOLUTION
        return hash((parent_hash, tuple(token_ids)))
        # STARTER
        # raise NotImplementedError("block_hash: see README.md, section 2")
        # END SOLUTION

The file stays valid, runnable code (the markers and the starter are
comments), so `kernels/` files still run as the project's reference kernels.
Three views of one source:

  reference  the file as it is (markers included): what runs in dev checks;
  solution   markers and starter lines removed: what a learner is shown and
             what wrong/*.patch apply to;
  starter    each region replaced by its starter lines, uncommented:
             what `roadmap dev build-starter` writes to starter/.

Starter lines are `<indent><prefix> <text>`, turned into `<indent><text>`;
`<indent><prefix>` alone is an empty line. The prefix is `#` for Python and
`//` for CUDA/C++. A region may hold no STARTER section (the starter has
nothing there) or no solution lines (the solution has nothing there). A
region may wrap a whole docstring, so docstrings stay clean in all views.
Files without markers are the same in all three views (given files such as
a lab's `prepare_data.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from roadmap_cli.errors import ValidationError

BEGIN, STARTER, END = "BEGIN SOLUTION", "STARTER", "END SOLUTION"
COMMENT_PREFIXES = {
    ".py": "#",
    ".cu": "//",
    ".cuh": "//",
    ".c": "//",
    ".cc": "//",
    ".cpp": "//",
    ".h": "//",
    ".hpp": "//",
}


def comment_prefix(path: str | Path) -> Optional[str]:
    """The line-comment prefix of a file type, or None (such files are never marked)."""
    return COMMENT_PREFIXES.get(Path(path).suffix)


@dataclass(frozen=True)
class Region:
    """One marked region; line numbers are 0-based indexes into the reference's lines."""

    begin: int  # the BEGIN SOLUTION line
    starter: Optional[int]  # the STARTER line, None when the region has no starter text
    end: int  # the END SOLUTION line

    @property
    def solution_lines(self) -> range:
        """Indexes of the reference lines of this region (what a learner writes)."""
        return range(self.begin + 1, self.starter if self.starter is not None else self.end)

    @property
    def starter_lines(self) -> range:
        return range(self.starter + 1, self.end) if self.starter is not None else range(0)


def _marker(line: str, prefix: str) -> Optional[str]:
    stripped = line.strip()
    for name in (BEGIN, STARTER, END):
        if stripped == f"{prefix} {name}":
            return name
    return None


def parse_regions(text: str, path: str | Path) -> list[Region]:
    """The regions of a reference file; a misplaced marker is a ValidationError naming file:line."""
    prefix = comment_prefix(path)
    if prefix is None:
        return []
    regions: list[Region] = []
    begin: Optional[int] = None
    starter: Optional[int] = None
    problems: list[str] = []
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        kind = _marker(line, prefix)
        if kind == BEGIN:
            if begin is not None:
                problems.append(f"{path}:{i + 1}: {BEGIN} inside the region opened at line {begin + 1}")
            begin, starter = i, None
        elif kind == STARTER:
            if begin is None or starter is not None:
                problems.append(f"{path}:{i + 1}: {STARTER} outside a region (or twice in one)")
            starter = i
        elif kind == END:
            if begin is None:
                problems.append(f"{path}:{i + 1}: {END} without {BEGIN}")
            else:
                regions.append(Region(begin, starter, i))
            begin, starter = None, None
        elif starter is not None and begin is not None and _uncomment(line, prefix) is None:
            problems.append(f"{path}:{i + 1}: a starter line must be a comment ({prefix} ...)")
    if begin is not None:
        problems.append(f"{path}:{begin + 1}: {BEGIN} is never closed by {END}")
    if problems:
        raise ValidationError(f"bad solution markers in {path}", details=problems)
    return regions


def _uncomment(line: str, prefix: str) -> Optional[str]:
    """`<indent><prefix> <text>` -> `<indent><text>`; `<indent><prefix>` -> empty line."""
    match = re.match(r"([ \t]*)" + re.escape(prefix) + r"( ?)(.*?)(\r?\n?)$", line, re.DOTALL)
    if match is None:
        return None
    indent, space, rest, eol = match.groups()
    if not space and not rest:
        return eol
    return indent + rest + eol


def comment_out(line: str, prefix: str) -> str:
    """The inverse of `_uncomment` (used when marking a file)."""
    body = line.rstrip("\r\n")
    eol = line[len(body) :]
    if not body:
        return prefix + eol
    if not body.strip():
        return f"{prefix} {body}{eol}"  # a whitespace-only line keeps its whitespace
    indent = body[: len(body) - len(body.lstrip())]
    return f"{indent}{prefix} {body.lstrip()}{eol}"


def _views(text: str, path: str | Path) -> tuple[str, str]:
    prefix = comment_prefix(path)
    regions = parse_regions(text, path)
    if not regions:
        return text, text
    lines = text.splitlines(keepends=True)
    starter: list[str] = []
    solution: list[str] = []
    at = 0
    for region in regions:
        starter.extend(lines[at : region.begin])
        solution.extend(lines[at : region.begin])
        solution.extend(lines[i] for i in region.solution_lines)
        starter.extend(_uncomment(lines[i], prefix) for i in region.starter_lines)
        at = region.end + 1
    starter.extend(lines[at:])
    solution.extend(lines[at:])
    return "".join(starter), "".join(solution)


def starter_text(text: str, path: str | Path) -> str:
    """The starter view of a reference file."""
    return _views(text, path)[0]


def solution_text(text: str, path: str | Path) -> str:
    """The solution view (no markers, no starter lines): what learners are shown."""
    return _views(text, path)[1]


def has_markers(text: str, path: str | Path) -> bool:
    prefix = comment_prefix(path)
    return prefix is not None and any(_marker(line, prefix) for line in text.splitlines())


def read_solution(path: Path, rel: Optional[str] = None) -> str:
    """A source file's solution view (for files that are not text, use the bytes yourself)."""
    return solution_text(path.read_text(encoding="utf-8"), rel or path.name)


# ---------------------------------------------------------------- whole labs


def generated_starter(spec) -> dict[str, str]:
    """Workspace path -> starter text, generated from the lab's single source."""
    out = {}
    for rel, source in spec.solution_sources().items():
        out[rel] = starter_text(source.read_text(encoding="utf-8"), source)
    return out


def _checked_in(spec) -> dict[str, Path]:
    if not spec.starter_dir.is_dir():
        return {}
    return {
        p.relative_to(spec.starter_dir).as_posix(): p
        for p in sorted(spec.starter_dir.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def stale_files(spec) -> list[str]:
    """Problems of the checked-in starter/ against the one generated from the source ([] = up to date)."""
    wanted = generated_starter(spec)
    have = _checked_in(spec)
    problems = []
    for rel, text in wanted.items():
        if rel not in have:
            problems.append(f"starter/{rel} is missing")
        elif have[rel].read_bytes() != text.encode("utf-8"):
            problems.append(f"starter/{rel} differs from the one built from {_source_name(spec, rel)}")
    for rel in have:
        if rel not in wanted:
            problems.append(f"starter/{rel} has no source (put it in solution/, unmarked if it is given code)")
    return problems


def _source_name(spec, rel: str) -> str:
    source = spec.solution_sources()[rel]
    try:
        return source.relative_to(spec.root.parent.parent).as_posix()
    except ValueError:
        return str(source)


def build_starter(spec) -> list[str]:
    """Write starter/ from the source; returns the workspace paths written or removed."""
    wanted = generated_starter(spec)
    have = _checked_in(spec)
    changed = []
    for rel, text in wanted.items():
        target = spec.starter_dir / rel
        if rel in have and have[rel].read_bytes() == text.encode("utf-8"):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
        changed.append(rel)
    for rel, path in have.items():
        if rel not in wanted:
            path.unlink()
            changed.append(rel)
    return changed


if __name__ == "__main__":  # `python -m roadmap_cli.labs.starter_build FILE [--starter]`: print a view
    import sys

    source = Path(sys.argv[1])
    view = starter_text if "--starter" in sys.argv[2:] else solution_text
    sys.stdout.write(view(source.read_text(encoding="utf-8"), source))
