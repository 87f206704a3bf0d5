"""A BibTeX reader and writer for the paper log.

Reading: `@type{key, field = {value} | "value" | 2023 | macro # ...}` with
nested braces, `@string` macros, `@comment`/`@preamble` skipped, text outside
entries ignored (as BibTeX does). A malformed entry is reported as
`file:line:col: message` and skipped; the reader then resumes at the next
`@` that starts a line, so the rest of the file still imports.

Speed: the reader is a handful of compiled regular expressions walked once
over the text (no character-by-character loop in Python): a value with braces
nested up to three deep is one regex match; deeper or broken ones fall back to
a scan that jumps from brace to brace. Line and column numbers come from a
line index built once (a binary search per lookup), so the cost stays linear
in the size of the file. `bench/bench_bibtex.py` compares it with
bibtexparser 2 on the same files.

Safety: `@string` macros are expanded with a bound. A macro that refers to
itself twice, forty times over (`@string{b = a # a}`, `@string{c = b # b}`,
...), would otherwise need 2^40 characters; any value longer than
MAX_VALUE_CHARS, or more than MAX_EXPANSION_CHARS expanded in one file, stops
the import with one `file:line:col` line (a hostile file is refused whole).

Writing lives in `papers_transfer.py`; LaTeX <-> text in `latex.py`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

from roadmap_cli.errors import UserError
from roadmap_cli.research.latex import (
    authors_from_bibtex,
    authors_to_bibtex,
    latex_to_text,
    text_to_latex,
    url_from_bibtex,
    url_to_bibtex,
)

MONTH_MACROS = {
    m: str(i)
    for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)
}
# No real field is this long (a whole paper's abstract is ~2,000 characters):
# a longer value is refused (the entry is skipped), and one that got there by
# expanding macros is a macro bomb (the file is refused).
MAX_VALUE_CHARS = 200_000
# Characters produced by macro expansion in one file: a journal macro used by
# 50,000 entries is ~3 MB; the bound grows with the file so big honest files pass.
MAX_EXPANSION_BASE = 16_000_000

_NAME = re.compile(r"[A-Za-z0-9_:.+/\-]+")
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
_NUMBER = re.compile(r"\d+")
_SPACE = re.compile(r"\s*")
# `@type {` or `@type(`: the head of every block.
_HEAD = re.compile(r"@\s*([A-Za-z][A-Za-z0-9_\-]*)\s*([{(])")
# `, key` (the citation key after the head).
_KEY = re.compile(r"\s*([A-Za-z0-9_:.+/\-]+)")
# `, name =` (the start of the next field), in one match.
_FIELD = re.compile(r"\s*,\s*([A-Za-z][A-Za-z0-9_\-]*)\s*=\s*")
# The body of a {...} value with braces nested up to 3 deep. A backslash
# escapes the next character (so `\{` does not open a group), and a newline
# followed by `@` ends the match: that is the next entry, so the brace was
# never closed. Written as an "unrolled loop" (Friedl): a run of ordinary
# characters (one C loop in the regex engine), then any number of (special
# piece, run) pairs, where every special piece starts with a character no
# run can hold. So a megabyte value is one fast scan, and a value that does
# not close fails in linear time instead of backtracking through every split.
_RUN = r"[^{}\\\n]*"
_SPECIAL = r"(?:\\.|\n(?![ \t]*@))"
_DEPTH0 = rf"{_RUN}(?:{_SPECIAL}{_RUN})*"
_DEPTH1 = rf"{_RUN}(?:(?:{_SPECIAL}|\{{{_DEPTH0}\}}){_RUN})*"
_DEPTH2 = rf"{_RUN}(?:(?:{_SPECIAL}|\{{{_DEPTH1}\}}){_RUN})*"
_BODY = rf"{_RUN}(?:(?:{_SPECIAL}|\{{{_DEPTH2}\}}){_RUN})*"
_BRACED = re.compile(rf"({_BODY})\}}", re.S)
_QUOTED_RUN = r'[^"{}\\\n]*'
_QUOTED = re.compile(rf"({_QUOTED_RUN}(?:(?:{_SPECIAL}|\{{{_DEPTH2}\}}){_QUOTED_RUN})*)\"", re.S)
# `, name = {value}` or `, name = 2023` and the space after it, in one match:
# most fields of most files; anything else (quotes, macros, '#') takes the steps.
_SIMPLE_FIELD = re.compile(rf"\s*,\s*([A-Za-z][A-Za-z0-9_\-]*)\s*=\s*(?:\{{({_BODY})\}}|(\d+))\s*", re.S)
# What the fallback scan stops at.
_BRACE_MARK = re.compile(r"\\.|[{}]|\n[ \t]*@", re.S)
_QUOTE_MARK = re.compile(r"\\.|[{}\"]|\n[ \t]*@", re.S)
_LINE_START_AT = re.compile(r"^[ \t]*@", re.MULTILINE)


@dataclass
class BibEntry:
    type: str
    key: str
    fields: dict[str, str] = field(default_factory=dict)
    line: int = 0
    col: int = 0
    # where each field's name starts (an offset into the text): a bad value is
    # reported at its own line:col, looked up only when there is one
    field_at: dict[str, int] = field(default_factory=dict)


class _Malformed(Exception):
    def __init__(self, pos: int, message: str) -> None:
        super().__init__(message)
        self.pos, self.message = pos, message


class _Bomb(_Malformed):
    """Macro expansion past its bound: the whole file is refused."""


class LineIndex:
    """Position -> (line, column), both from 1, by binary search over the
    offsets where lines start (built once: C-speed split and accumulate)."""

    def __init__(self, text: str) -> None:
        lengths = map(len, text.split("\n"))
        self.starts = list(accumulate(map((1).__add__, lengths), initial=0))

    def where(self, pos: int) -> tuple[int, int]:
        line = bisect_right(self.starts, pos)
        return line, pos - self.starts[line - 1] + 1


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0
        self.macros = dict(MONTH_MACROS)
        self.expansion_left = MAX_EXPANSION_BASE + 4 * len(text)

    # -- small steps, used where the fast paths below do not match ----------------
    def skip_space(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()

    def expect(self, chars: str, what: str) -> str:
        self.skip_space()
        if self.pos >= len(self.text):
            raise _Malformed(self.pos, f"unexpected end of file, expected {what}")
        ch = self.text[self.pos]
        if ch not in chars:
            raise _Malformed(self.pos, f"expected {what}, found {ch!r}")
        self.pos += 1
        return ch

    def ident(self, pattern: re.Pattern, what: str) -> str:
        self.skip_space()
        match = pattern.match(self.text, self.pos)
        if not match:
            found = self.text[self.pos : self.pos + 1] or "end of file"
            raise _Malformed(self.pos, f"expected {what}, found {found!r}")
        self.pos = match.end()
        return match.group(0)

    # -- values -------------------------------------------------------------------
    def _scan(self, marks: re.Pattern, start: int, quoted: bool) -> int:
        """Fallback for deep nesting or broken values: jump from mark to mark.
        Returns the position of the closing `}` or `"`."""
        depth, ran_into_next_entry = (0 if quoted else 1), False
        window_end = start + MAX_VALUE_CHARS + 1  # no value is longer: never scan further
        for mark in marks.finditer(self.text, start, window_end):
            token = mark.group(0)
            if token == "{":
                depth += 1
            elif token == "}":
                depth -= 1
                if depth == 0 and not quoted:
                    return mark.start()
            elif token == '"' and depth == 0:
                return mark.start()
            elif token[0] == "\n":  # a line starting with '@': the next entry
                ran_into_next_entry = True
                break
        if not ran_into_next_entry and window_end < len(self.text):
            raise _Malformed(start - 1, f"value longer than {MAX_VALUE_CHARS:,} characters")
        if quoted:
            raise _Malformed(start - 1, 'unterminated "..." value')
        where = " before the next entry" if ran_into_next_entry else ""
        raise _Malformed(start - 1, f"unbalanced braces: '{{' is never closed{where}")

    def braced(self) -> str:
        """The text inside {...} (the opening brace already consumed), braces kept."""
        match = _BRACED.match(self.text, self.pos, self.pos + MAX_VALUE_CHARS + 1)
        if match is not None:
            self.pos = match.end()
            return match.group(1)
        end = self._scan(_BRACE_MARK, self.pos, quoted=False)
        value, self.pos = self.text[self.pos : end], end + 1
        return value

    def quoted(self) -> str:
        match = _QUOTED.match(self.text, self.pos, self.pos + MAX_VALUE_CHARS + 1)
        if match is not None:
            self.pos = match.end()
            return match.group(1)
        end = self._scan(_QUOTE_MARK, self.pos, quoted=True)
        value, self.pos = self.text[self.pos : end], end + 1
        return value

    def value(self) -> str:
        """A field value: parts joined by '#', macros expanded within bounds."""
        parts, length, expanded = [], 0, False
        text = self.text
        while True:
            self.skip_space()
            start = self.pos
            ch = text[start : start + 1]
            if ch == "{":
                self.pos += 1
                part = self.braced()
            elif ch == '"':
                self.pos += 1
                part = self.quoted()
            elif ch.isdigit():
                part = self.ident(_NUMBER, "a number")
            elif ch.isalpha():
                name = self.ident(_IDENT, "a value").lower()
                if name not in self.macros:
                    raise _Malformed(start, f"unknown macro {name!r} (put the value in braces)")
                part, expanded = self.macros[name], True
                self.expansion_left -= len(part)
                if self.expansion_left < 0:
                    raise _Bomb(
                        start,
                        f"@string macros expand to more than "
                        f"{MAX_EXPANSION_BASE + 4 * len(text):,} characters in this file "
                        f"(a macro bomb?); nothing was imported",
                    )
            else:
                raise _Malformed(
                    start, f'expected a value ({{...}}, "...", a number or a macro), found {ch or "end of file"!r}'
                )
            length += len(part)
            if length > MAX_VALUE_CHARS and expanded:
                raise _Bomb(
                    start,
                    f"value longer than {MAX_VALUE_CHARS:,} characters after expanding "
                    f"@string macros (a macro that doubles itself?); nothing was imported",
                )
            if length > MAX_VALUE_CHARS:
                raise _Malformed(start, f"value longer than {MAX_VALUE_CHARS:,} characters")
            parts.append(part)
            self.skip_space()
            if text[self.pos : self.pos + 1] != "#":
                return parts[0] if len(parts) == 1 else "".join(parts)
            self.pos += 1

    # -- blocks -------------------------------------------------------------------
    def entry(self, at: int, lines: LineIndex) -> BibEntry | None:
        """Read one block starting at '@' (position `at`); None for comments/strings."""
        text = self.text
        head = _HEAD.match(text, at)
        if head is None:  # let the small steps say what is wrong
            self.pos = at + 1
            kind = self.ident(_IDENT, "an entry type after '@'").lower()
            self.expect("{(", "'{' after @" + kind)
            raise AssertionError("unreachable: _HEAD would have matched")  # pragma: no cover
        kind, self.pos = head.group(1).lower(), head.end()
        close = "}" if head.group(2) == "{" else ")"
        if kind in ("comment", "preamble"):
            if close == "}":
                self.braced()
            else:
                end = text.find(")", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            return None
        if kind == "string":
            name = self.ident(_IDENT, "a macro name").lower()
            self.expect("=", "'=' after the macro name")
            self.macros[name] = self.value()
            self.expect(close, f"'{close}' closing @string")
            return None
        line, col = lines.where(at)
        key_match = _KEY.match(text, self.pos)
        if key_match is None:
            self.ident(_NAME, "a citation key")  # raises with the character found
        self.pos = key_match.end()
        fields: dict[str, str] = {}
        field_at: dict[str, int] = {}
        entry = BibEntry(kind, key_match.group(1), fields, line, col, field_at)
        while True:
            # (the window: a longer value fails here and is refused by the steps below, in bounded time)
            simple = _SIMPLE_FIELD.match(text, self.pos, self.pos + MAX_VALUE_CHARS + 1_000)
            if simple is not None and text[simple.end() : simple.end() + 1] != "#":
                name = simple.group(1).lower()
                if name in fields:
                    raise _Malformed(simple.start(1), f"field {name!r} appears twice in {entry.key!r}")
                braced = simple.group(2)
                if braced is not None and len(braced) > MAX_VALUE_CHARS:
                    raise _Malformed(simple.start(2) - 1, f"value longer than {MAX_VALUE_CHARS:,} characters")
                fields[name] = braced if braced is not None else simple.group(3)
                field_at[name] = simple.start(1)
                self.pos = simple.end()
                continue
            step = _FIELD.match(text, self.pos)
            if step is not None:  # `, name = ` then a value of another kind (quotes, macros, `#`)
                name, name_at, self.pos = step.group(1).lower(), step.start(1), step.end()
            else:
                if self.expect("," + close, f"',' or '{close}'") == close:
                    return entry
                self.skip_space()
                if text[self.pos : self.pos + 1] == close:  # trailing comma
                    self.pos += 1
                    return entry
                name_at = self.pos
                name = self.ident(_IDENT, "a field name").lower()
                self.expect("=", f"'=' after field {name!r}")
            if name in fields:
                raise _Malformed(name_at, f"field {name!r} appears twice in {entry.key!r}")
            field_at[name] = name_at
            fields[name] = self.value()


def parse_bibtex(text: str, *, source: str = "<bibtex>") -> tuple[list[BibEntry], list[str]]:
    """All well-formed entries, and one `source:line:col: message` per malformed one.

    Raises UserError (one line, with the location) for a macro bomb.
    """
    reader = _Reader(text)
    lines = LineIndex(text)
    entries: list[BibEntry] = []
    problems: list[str] = []
    at = text.find("@")
    while at >= 0:
        try:
            entry = reader.entry(at, lines)
            if entry is not None:
                entries.append(entry)
            at = text.find("@", reader.pos)
        except _Bomb as exc:
            line, col = lines.where(exc.pos)
            raise UserError(f"{source}:{line}:{col}: {exc.message}") from None
        except _Malformed as exc:
            line, col = lines.where(exc.pos)
            start_line, _ = lines.where(at)
            problems.append(f"{source}:{line}:{col}: {exc.message} (entry starting on line {start_line} skipped)")
            newline = text.find("\n", at)
            resume = _LINE_START_AT.search(text, newline + 1 if newline >= 0 else len(text))
            at = -1 if resume is None else resume.end() - 1
    return entries, problems


# The LaTeX helpers are re-exported: callers (and older imports) find them here too.
__all__ = [
    "BibEntry",
    "LineIndex",
    "MAX_VALUE_CHARS",
    "parse_bibtex",
    "authors_from_bibtex",
    "authors_to_bibtex",
    "latex_to_text",
    "text_to_latex",
    "url_from_bibtex",
    "url_to_bibtex",
]
