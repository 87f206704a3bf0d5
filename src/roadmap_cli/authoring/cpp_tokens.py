"""Tokens of C, C++ and CUDA sources, for mutants_cpp.py.

Comments, preprocessor lines and whitespace are skipped; string and char
literals (raw strings included) are single tokens, so nothing inside them is
ever mutated. `<` ... `>` pairs that bracket template arguments are marked
(`static_cast<int>(x)` is not two comparisons), and `is_declaration` tells
`T* name = ...` (a declaration) from an expression, the two facts a
token-level mutator needs that a parser would otherwise give.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PUNCTS = sorted(
    [
        "<<<",
        ">>>",
        "<=>",
        "<<=",
        ">>=",
        "->*",
        "...",
        "::",
        "->",
        "++",
        "--",
        "<<",
        ">>",
        "<=",
        ">=",
        "==",
        "!=",
        "&&",
        "||",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "&=",
        "|=",
        "^=",
        ".*",
    ],
    key=len,
    reverse=True,
)
DECL_QUALIFIERS = {
    "const",
    "constexpr",
    "static",
    "volatile",
    "thread_local",
    "inline",
    "mutable",
    "register",
    "extern",
    "typename",
    "unsigned",
    "signed",
    "long",
    "short",
    "struct",
    "class",
    "enum",
    "__shared__",
    "__device__",
    "__constant__",
    "__restrict__",
    "__managed__",
}
TEMPLATE_AFTER = {"(", "{", "::", ">", ">>", ">>>", ")", ",", ";", "&", "*", "&&", "[", "...", "=", "}"}


@dataclass
class Token:
    kind: str  # ident | number | string | punct
    text: str
    start: int
    end: int
    line: int  # 0-based
    space_before: bool = False
    space_after: bool = False
    template: bool = False  # a `<`, `>` or `>>` that brackets template arguments


def tokenize(text: str) -> list[Token]:
    """Tokens of a C/C++ source; comments, preprocessor lines and whitespace are skipped."""
    tokens: list[Token] = []
    i, n, line, line_start = 0, len(text), 0, True
    while i < n:
        c = text[i]
        if c == "\n":
            i, line, line_start = i + 1, line + 1, True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line, i = line + text.count("\n", i, j), j
            continue
        if c == "#" and line_start:  # a directive, with its `\` continuations
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0 or not text[:k].rstrip("\r").endswith("\\"):
                    break
                j, line = k + 1, line + 1
            i = n if k < 0 else k
            continue
        line_start = False
        start = i
        m = re.compile(r"(?:u8|[uUL])?R\"([^()\\ ]{0,16})\(").match(text, i)
        if m:  # raw string R"delim( ... )delim"
            close = text.find(")" + m.group(1) + '"', m.end())
            i = n if close < 0 else close + len(m.group(1)) + 2
            kind = "string"
        elif re.compile(r"(?:u8|[uUL])?[\"']").match(text, i):
            j = re.compile(r"(?:u8|[uUL])?([\"'])").match(text, i).end()
            quote = text[j - 1]
            while j < n and text[j] != quote and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i, kind = j + 1, "string"
        elif c.isalpha() or c == "_":
            i = re.compile(r"\w+").match(text, i).end()
            kind = "ident"
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            i = re.compile(r"\.?\d(?:[eEpP][+-]|[\w.']|)*").match(text, i).end()
            kind = "number"
        else:
            punct = next((p for p in PUNCTS if text.startswith(p, i)), c)
            i += len(punct)
            kind = "punct"
        tokens.append(
            Token(
                kind,
                text[start:i],
                start,
                i,
                line,
                space_before=start > 0 and text[start - 1] in " \t\n\r",
                space_after=i < n and text[i] in " \t\n\r",
            )
        )
        line += text.count("\n", start, i)
    mark_templates(tokens)
    return tokens


def mark_templates(tokens: list[Token]) -> None:
    """Mark the `<` ... `>` pairs that bracket template arguments, not comparisons:
    after an identifier, only type-like tokens up to the matching `>`, and a
    `(`, `::`, `>`, name, ... after it (`a < b && c > d` stays two comparisons)."""
    for i, tok in enumerate(tokens):
        if tok.text != "<" or tok.template or i == 0 or tokens[i - 1].kind != "ident":
            continue
        depth, paren, j, marks = 1, 0, i + 1, [i]
        while j < len(tokens) and depth > 0:
            t = tokens[j]
            nxt = tokens[j + 1].text if j + 1 < len(tokens) else ""
            if t.text == "<" and tokens[j - 1].kind == "ident":
                depth += 1
            elif t.text in (">", ">>", ">>>") and paren == 0:
                depth -= len(t.text)
            elif t.text in ("(", "["):
                paren += 1
            elif t.text in (")", "]"):
                paren -= 1
                if paren < 0:
                    break
            elif t.kind in ("ident", "number") or t.text in ("::", ",", "..."):
                pass
            elif t.text in ("*", "&", "&&") and nxt in (">", ">>", ",", "*", "&", ")", "["):
                pass
            else:
                break
            if t.text in ("<", ">", ">>", ">>>"):
                marks.append(j)
            j += 1
        if depth <= 0 and (j >= len(tokens) or tokens[j].text in TEMPLATE_AFTER or tokens[j].kind == "ident"):
            for k in marks:
                tokens[k].template = True


def skip_type(tokens: list[Token], i: int, end: int) -> int:
    """Index after a (qualified, templated) type name starting at i, or i when there is none."""
    while i < end and tokens[i].text in DECL_QUALIFIERS:
        i += 1
    start = i
    while i < end and tokens[i].kind == "ident":
        i += 1
        if i < end and tokens[i].text == "<" and tokens[i].template:
            depth = 0
            while i < end:
                depth += {"<": 1, ">": -1, ">>": -2, ">>>": -3}.get(tokens[i].text, 0) if tokens[i].template else 0
                i += 1
                if depth <= 0:
                    break
        if i < end and tokens[i].text == "::":
            i += 1
            continue
        break
    while i < end and (tokens[i].text in ("*", "&", "&&", "const", "volatile")):
        i += 1
    return i if i > start else start


def is_declaration(tokens: list[Token], i: int, end: int) -> bool:
    """Do tokens[i:end] start with `type name` (a declaration, or a parameter)?"""
    j = skip_type(tokens, i, end)
    if j == i or tokens[j - 1].kind == "punct" and tokens[j - 1].text in ("::",):
        return False
    return (
        j < end
        and tokens[j].kind == "ident"
        and (j + 1 == end or tokens[j + 1].text in ("=", ";", "(", "{", "[", ",", ":", ")"))
    )
