"""A small BibTeX reader and writer for the paper log.

Reading: `@type{key, field = {value} | "value" | 2023 | macro # ...}` with
nested braces, `@string` macros, `@comment`/`@preamble` skipped, text outside
entries ignored (as BibTeX does). A malformed entry is reported as
`file:line:col: message` and skipped; the reader then resumes at the next
`@` that starts a line, so the rest of the file still imports.

Writing: one `@misc`/`@article` per paper with the standard fields plus
`roadmap_status`, `roadmap_read_on`, `roadmap_stage` and `roadmap_rating`
(BibTeX ignores fields it does not know), so export -> import keeps the log.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

MONTH_MACROS = {m: str(i) for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_NAME = re.compile(r"[A-Za-z0-9_:.+/\-]+")
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")


@dataclass
class BibEntry:
    type: str
    key: str
    fields: dict[str, str] = field(default_factory=dict)
    line: int = 0
    col: int = 0


class _Malformed(Exception):
    def __init__(self, pos: int, message: str) -> None:
        super().__init__(message)
        self.pos, self.message = pos, message


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0
        self.macros = dict(MONTH_MACROS)

    def where(self, pos: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, pos) + 1
        return line, pos - (self.text.rfind("\n", 0, pos) + 1) + 1

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

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
            found = self.text[self.pos:self.pos + 1] or "end of file"
            raise _Malformed(self.pos, f"expected {what}, found {found!r}")
        self.pos = match.end()
        return match.group(0)

    def braced(self) -> str:
        """The text inside {...} (the opening brace already consumed), braces kept."""
        depth, start = 1, self.pos
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\":
                self.pos += 2
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    self.pos += 1
                    return self.text[start:self.pos - 1]
            elif ch == "@" and self.text[self.text.rfind("\n", 0, self.pos) + 1:self.pos].strip() == "":
                raise _Malformed(start - 1, "unbalanced braces: '{' is never closed before the next entry")
            self.pos += 1
        raise _Malformed(start - 1, "unbalanced braces: '{' is never closed")

    def quoted(self) -> str:
        depth, start = 0, self.pos
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\":
                self.pos += 2
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == '"' and depth == 0:
                self.pos += 1
                return self.text[start:self.pos - 1]
            self.pos += 1
        raise _Malformed(start - 1, 'unterminated "..." value')

    def value(self) -> str:
        """A field value: parts joined by '#'."""
        parts = []
        while True:
            self.skip_space()
            start = self.pos
            ch = self.text[self.pos:self.pos + 1]
            if ch == "{":
                self.pos += 1
                parts.append(self.braced())
            elif ch == '"':
                self.pos += 1
                parts.append(self.quoted())
            elif ch.isdigit():
                parts.append(self.ident(re.compile(r"\d+"), "a number"))
            elif ch.isalpha():
                name = self.ident(_IDENT, "a value").lower()
                if name not in self.macros:
                    raise _Malformed(start, f"unknown macro {name!r} (put the value in braces)")
                parts.append(self.macros[name])
            else:
                raise _Malformed(start, f"expected a value ({{...}}, \"...\", a number or a macro), found {ch or 'end of file'!r}")
            self.skip_space()
            if self.text[self.pos:self.pos + 1] != "#":
                return "".join(parts)
            self.pos += 1

    def entry(self, at: int) -> BibEntry | None:
        """Read one entry starting at '@' (position `at`); None for comments/strings."""
        self.pos = at + 1
        kind = self.ident(_IDENT, "an entry type after '@'").lower()
        close = "}" if self.expect("{(", "'{' after @" + kind) == "{" else ")"
        if kind in ("comment", "preamble"):
            if close == "}":
                self.braced()
            else:
                end = self.text.find(")", self.pos)
                self.pos = len(self.text) if end < 0 else end + 1
            return None
        if kind == "string":
            name = self.ident(_IDENT, "a macro name").lower()
            self.expect("=", "'=' after the macro name")
            self.macros[name] = self.value()
            self.expect(close, f"'{close}' closing @string")
            return None
        line, col = self.where(at)
        key = self.ident(_NAME, "a citation key")
        entry = BibEntry(kind, key, {}, line, col)
        while True:
            if self.expect("," + close, f"',' or '{close}'") == close:
                return entry
            self.skip_space()
            if self.text[self.pos:self.pos + 1] == close:  # trailing comma
                self.pos += 1
                return entry
            name_at = self.pos
            name = self.ident(_IDENT, "a field name").lower()
            self.expect("=", f"'=' after field {name!r}")
            if name in entry.fields:
                raise _Malformed(name_at, f"field {name!r} appears twice in {key!r}")
            entry.fields[name] = self.value()


def _next_entry_start(text: str, after: int) -> int:
    """The next '@' at the start of a line (after spaces), or -1."""
    match = re.compile(r"^[ \t]*@", re.MULTILINE).search(text, after)
    return -1 if match is None else match.end() - 1


def parse_bibtex(text: str, *, source: str = "<bibtex>") -> tuple[list[BibEntry], list[str]]:
    """All well-formed entries, and one `source:line:col: message` per malformed one."""
    reader = _Reader(text)
    entries: list[BibEntry] = []
    problems: list[str] = []
    at = text.find("@")
    while at >= 0:
        try:
            entry = reader.entry(at)
            if entry is not None:
                entries.append(entry)
            at = text.find("@", reader.pos)
        except _Malformed as exc:
            line, col = reader.where(exc.pos)
            start_line, _ = reader.where(at)
            problems.append(f"{source}:{line}:{col}: {exc.message} (entry starting on line {start_line} skipped)")
            at = _next_entry_start(text, max(at + 1, text.find("\n", at) + 1 if text.find("\n", at) >= 0 else len(text)))
    return entries, problems


# --- LaTeX text <-> plain text -------------------------------------------------

_ACCENTS = {'"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303", "=": "\u0304",
            ".": "\u0307", "c": "\u0327", "v": "\u030c", "u": "\u0306", "H": "\u030b"}
_ACCENT = re.compile(r"\{?\\([\"'`^~=.]|[cvuH](?=[\s{]))\s*\{?([A-Za-z])\}?\}?")
_ESCAPED = re.compile(r"\\([&%$#_{}])")
# `~` is a non-breaking space in BibTeX: a literal tilde (in a title or a URL)
# must be written as \textasciitilde{} or it comes back as a space.
_SPECIALS = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "~": r"\textasciitilde{}"}
_TILDE = re.compile(r"\\textasciitilde(?:\{\}|\b)")


def latex_to_text(value: str, *, keep_lines: bool = False) -> str:
    """`{FlashAttention}-2: Fast \\& {\\"u}ber` -> `FlashAttention-2: Fast & über`.

    Runs of spaces collapse; with `keep_lines` (notes) the text is kept as
    written, line breaks and indentation included.
    """
    text = _TILDE.sub("\ue002", value)
    text = _ACCENT.sub(lambda m: m.group(2) + _ACCENTS[m.group(1)], text)
    # Escaped braces are kept (as placeholders while grouping braces go).
    text = _ESCAPED.sub(lambda m: {"{": "\ue000", "}": "\ue001"}.get(m.group(1), m.group(1)), text)
    text = text.replace("{", "").replace("}", "").replace("~", " ")
    text = text.replace("\ue000", "{").replace("\ue001", "}").replace("\ue002", "~")
    if keep_lines:
        text = "\n".join(line.rstrip() for line in text.strip("\n").splitlines())
    else:
        text = " ".join(text.split())
    return unicodedata.normalize("NFC", text)


_BRACES = {"{": r"\{", "}": r"\}"}


def text_to_latex(value: str) -> str:
    """Escape what would break a BibTeX value; braces are balanced by construction."""
    return "".join(_SPECIALS.get(ch) or _BRACES.get(ch, ch) for ch in value)


def url_to_bibtex(url: str) -> str:
    """A URL field is verbatim for biblatex/hyperref: write it as it is (a
    `\\&` or `\\textasciitilde{}` would end up in the link), escaping only
    braces, which would unbalance the field."""
    return "".join(_BRACES.get(ch, ch) for ch in url)


def url_from_bibtex(value: str) -> str:
    """Read a URL field: verbatim, but undo the escapes older exports (and
    some tools) write, and never turn `~` into a space."""
    text = _TILDE.sub("~", value.strip())
    return _ESCAPED.sub(lambda m: m.group(1), text)


def authors_from_bibtex(value: str) -> str:
    """`Dao, Tri and Fu, Daniel Y.` -> `Tri Dao, Daniel Y. Fu` (how the log shows names)."""
    names = [n.strip() for n in re.split(r"\s+and\s+", latex_to_text(value)) if n.strip()]
    out = []
    for name in names:
        if "," in name:
            last, _, first = name.partition(",")
            name = f"{first.strip()} {last.strip()}".strip()
        out.append(name)
    return ", ".join(out)


def authors_to_bibtex(value: str) -> str:
    return " and ".join(text_to_latex(n.strip()) for n in value.split(",") if n.strip())
