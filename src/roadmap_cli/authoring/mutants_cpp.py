"""Mechanical mutants of C, C++ and CUDA sources (.c/.cc/.cpp/.h/.hpp/.cu/.cuh).

The token-level twin of mutants.py's Python operators, with the same names,
applied only to tokens inside solution regions and never inside comments,
string/char literals or preprocessor lines:

  compare  <  <=  >  >=  ==  != swapped for their boundary twin (template
           brackets such as static_cast<int>(x) are recognised and left alone)
  arith    + -, * /, % /, << >>, & |, and the same in `+=` `-=` `*=` `/=`;
           `*` and `&` only where they are binary (spaced alike on both
           sides after a value: `a * b`, not the declarator in `T* p`)
  bool-op  && <-> ||
  unary    a dropped `!` or unary `-`
  const    decimal integer constants +1 and -1 (suffixes kept); true <-> false
  args     two adjacent arguments of a call swapped (never a parameter list,
           a lambda, or a string literal: moving the pieces of an error
           message changes only its text)
  drop     one `;`-terminated statement inside a function body (lambdas
           included) replaced by `;` -- never a declaration, a `return`, a
           `using`, or a statement that owns a label or an `else`

A mutant that does not compile anyway (C++ is not fully parseable from
tokens) is not a meaningful bug: `dev mutate` classifies it `invalid` from
the build log and leaves it out of the score. Tokens, template brackets and
declarations come from cpp_tokens.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Optional

from roadmap_cli.authoring.cpp_tokens import DECL_QUALIFIERS, Token, is_declaration, tokenize
from roadmap_cli.labs.starter_build import parse_regions

SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh"}
GPU_SUFFIXES = {".cu", ".cuh"}  # compiled by nvcc: graded only on a CUDA GPU

COMPARE = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
ARITH = {
    "+": "-",
    "-": "+",
    "*": "/",
    "/": "*",
    "%": "/",
    "<<": ">>",
    ">>": "<<",
    "&": "|",
    "|": "&",
    "+=": "-=",
    "-=": "+=",
    "*=": "/=",
    "/=": "*=",
}
NOT_VALUES = {
    "return",
    "case",
    "throw",
    "else",
    "do",
    "new",
    "delete",
    "co_return",
    "co_yield",
    "and",
    "or",
    "not",
    "const",
    "constexpr",
    "static",
    "typename",
    "template",
    "operator",
    "sizeof",
}
NOT_CALLS = {
    "if",
    "for",
    "while",
    "switch",
    "return",
    "sizeof",
    "alignof",
    "alignas",
    "decltype",
    "catch",
    "static_assert",
    "noexcept",
    "throw",
    "typeid",
    "template",
    "operator",
    "defined",
}
NO_DROP_FIRST = {
    "return",
    "using",
    "typedef",
    "static_assert",
    "goto",
    "case",
    "default",
    "else",
    "co_return",
    "template",
    "namespace",
    "friend",
    "public",
    "private",
    "protected",
}


def _value_end(tok: Optional[Token]) -> bool:
    """Can `tok` end an operand (so that a following `-` or `*` is binary)?"""
    if tok is None:
        return False
    if tok.kind in ("number", "string"):
        return True
    if tok.kind == "ident":
        return tok.text not in NOT_VALUES
    return tok.text in (")", "]") or (tok.text in (">", ">>", ">>>") and tok.template)


def _binary_operator(tok: Token, prev: Token, nxt: Optional[Token]) -> bool:
    """After a value (see _value_end): is `tok` really binary arithmetic? `*`, `&` and
    `&&` spaced alike on both sides before a value (`a * b`, not `T* p` or
    `const T&)`); never `+` next to a string literal (std::string concatenation)."""
    if nxt is None or "string" in (prev.kind, nxt.kind):
        return False
    if tok.text in ("*", "&", "&&"):
        return tok.space_before == tok.space_after and (nxt.kind in ("ident", "number") or nxt.text in ("(", "!", "-"))
    return True


@dataclass
class _Context:
    kind: str  # file | class | code | init
    name: str = ""  # class name, or the function a code block belongs to
    paren: int = 0
    stmt: Optional[int] = None  # index of the current statement's first token (code)
    pending: str = ""  # file/class: the name before the first `(` since the last `;` `{` `}`
    compound: bool = False  # a block that ends its parent's statement when it closes


class _Scanner:
    """One pass over the tokens: function names, statements and calls."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.function: list[str] = [""] * len(tokens)
        self.statements: list[tuple[int, int]] = []  # droppable (first, `;`) token indexes
        self.calls: list[tuple[int, int]] = []  # (`(`, `)`) of calls
        self.match: dict[int, int] = {}
        stack: list[int] = []
        for i, t in enumerate(tokens):
            if t.text in ("(", "[", "{"):
                stack.append(i)
            elif t.text in (")", "]", "}") and stack:
                self.match[stack.pop()] = i
        self._scan()

    def _class_prefix(self, stack: list[_Context]) -> str:
        return "".join(c.name + "::" for c in stack if c.kind == "class" and c.name)

    def _scan(self) -> None:
        tokens = self.tokens
        stack = [_Context("file")]
        for i, t in enumerate(tokens):
            ctx = stack[-1]
            if ctx.kind in ("code", "init"):
                self.function[i] = ctx.name
            elif ctx.pending:
                self.function[i] = self._class_prefix(stack) + ctx.pending  # a constructor's initialiser list
            if t.text == "(" and i:
                if ctx.kind in ("file", "class") and ctx.paren == 0 and not ctx.pending:
                    ctx.pending = self._declarator_name(i)  # the parameter list of a declaration
                    self.function[i] = self._class_prefix(stack) + ctx.pending
                elif self._is_call(i):
                    self.calls.append((i, self.match.get(i, i)))
            if t.text == "{":
                if ctx.kind == "code" and ctx.paren == 0 and ctx.stmt is None:
                    ctx.stmt = i  # a bare block
                stack.append(self._open(i, ctx, stack))
                continue
            if t.text == "}":
                closed = stack.pop() if len(stack) > 1 else ctx
                parent = stack[-1]
                if closed.compound and parent.kind == "code" and parent.stmt is not None:
                    self._compound_statement(parent.stmt, i)
                if closed.compound or parent.kind in ("file", "class"):
                    parent.stmt, parent.pending = None, ""
                continue
            if ctx.kind == "code" and ctx.paren == 0:
                if t.text == ";":
                    if ctx.stmt is not None and self._droppable(ctx.stmt, i):
                        self.statements.append((ctx.stmt, i))
                    ctx.stmt = None
                    continue
                if ctx.stmt is None:
                    ctx.stmt = i
            if ctx.kind in ("file", "class") and ctx.paren == 0 and t.text == ";":
                ctx.pending = ""
            if t.text in ("(", "["):
                ctx.paren += 1
            elif t.text in (")", "]"):
                ctx.paren = max(0, ctx.paren - 1)

    def _compound_statement(self, first: int, close: int) -> None:
        """`if (...) { ... }`, `for (...) { ... }`, `while (...) { ... }` closed at `close`:
        droppable whole, like Python's If/For/While, unless an `else` follows."""
        tokens = self.tokens
        head = tokens[first]
        if head.text not in ("if", "for", "while") or (first and tokens[first - 1].text == "else"):
            return
        if close + 1 < len(tokens) and tokens[close + 1].text == "else":
            return
        header_close = self.match.get(first + 1)
        if header_close is None or header_close + 1 >= len(tokens) or tokens[header_close + 1].text != "{":
            return
        if self.match.get(header_close + 1) == close:
            self.statements.append((first, close))

    def _is_call(self, i: int) -> bool:
        prev = self.tokens[i - 1]
        if prev.kind == "ident":
            if prev.text in NOT_CALLS or (i > 1 and self.tokens[i - 2].text == "operator"):
                return False
        elif not (prev.text in (">", ">>", ">>>") and prev.template) and prev.text != ">>>":
            return False  # a call is `name(`, `name<T>(` or a CUDA launch `kernel<<<...>>>(`
        close = self.match.get(i, i)
        args = self.arguments(i, close)
        return not any(is_declaration(self.tokens, a, b) for a, b in args)

    def _declarator_name(self, i: int) -> str:
        tokens = self.tokens
        prev = tokens[i - 1]
        if prev.kind == "ident" and prev.text not in NOT_CALLS:
            return ("~" if i > 1 and tokens[i - 2].text == "~" else "") + prev.text
        for back in range(2, 4):  # operator=, operator[], operator()
            if i - back >= 0 and tokens[i - back].text == "operator":
                return "operator" + "".join(t.text for t in tokens[i - back + 1 : i])
        return ""

    def _open(self, i: int, ctx: _Context, stack: list[_Context]) -> _Context:
        tokens = self.tokens
        prev = tokens[i - 1] if i else None
        if ctx.kind in ("file", "class"):
            head = []
            for t in reversed(tokens[:i]):
                if t.text in (";", "{", "}"):
                    break
                head.append(t)
            head.reverse()
            for k, w in enumerate(head):
                if w.text in ("class", "struct", "union", "enum") and (k == 0 or head[k - 1].text not in ("<", ",")):
                    name = next(
                        (x.text for x in head[k + 1 :] if x.kind == "ident" and x.text not in ("class", "final")), ""
                    )
                    return _Context("class", name)
            words = [t.text for t in head]
            if "namespace" in words or (words[:1] == ["extern"]):
                return _Context("file")
            if ctx.pending and prev is not None and prev.text != "=":
                return _Context("code", self._class_prefix(stack) + ctx.pending, compound=True)
            return _Context("init", ctx.name)
        if ctx.kind == "init":
            return _Context("init", ctx.name)
        if prev is not None and (
            prev.text in (")", "]", "mutable")
            or (ctx.paren == 0 and prev.text in (";", "{", "}", "else", "do", "try", ":"))
        ):
            return _Context("code", ctx.name, compound=ctx.paren == 0)
        return _Context("init", ctx.name)

    def _droppable(self, first: int, semi: int) -> bool:
        tokens = self.tokens
        head = tokens[first]
        if first == semi or head.text in NO_DROP_FIRST or head.text in DECL_QUALIFIERS | {"auto"}:
            return False
        if head.text == "while" and first > 0 and tokens[first - 1].text == "}":
            return False  # the tail of do { } while (...);
        if semi + 1 < len(tokens) and tokens[semi + 1].text == "else":
            return False
        if is_declaration(tokens, first, semi):
            return False
        depth, ternary = 0, 0
        for t in tokens[first:semi]:
            depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(t.text, 0)
            if depth == 0 and t.text == "?":
                ternary += 1
            elif depth == 0 and t.text == ":":
                if not ternary:
                    return False  # a label (`case 3:`, `public:`)
                ternary -= 1
        return True

    def arguments(self, open_: int, close: int) -> list[tuple[int, int]]:
        """Token ranges of the top-level arguments between a `(` and its `)`."""
        args, depth, start = [], 0, open_ + 1
        for j in range(open_ + 1, close):
            t = self.tokens[j]
            if t.text in ("(", "[", "{") or (t.text == "<" and t.template):
                depth += 1
            elif t.text in (")", "]", "}") or (t.text == ">" and t.template):
                depth -= 1
            elif t.text in (">>", ">>>") and t.template:
                depth -= len(t.text)
            elif t.text == "," and depth == 0:
                args.append((start, j))
                start = j + 1
        if start < close:
            args.append((start, close))
        return args


def edits(text: str, path: str) -> list[tuple[int, int, str, str, str, int, str]]:
    """(start, end, new text, operator, description, 1-based line, function) of every mutant of the regions."""
    tokens = tokenize(text)
    scanner = _Scanner(tokens)
    region_of_line: dict[int, int] = {}
    for n, region in enumerate(parse_regions(text, path)):
        for index in region.solution_lines:
            region_of_line[index] = n
    out: list[tuple[int, int, str, str, str, int, str]] = []

    def add(first: int, last: int, start: int, end: int, new: str, operator: str, description: str) -> None:
        region = region_of_line.get(tokens[first].line)
        if region is None or region_of_line.get(tokens[last].line) != region or text[start:end] == new:
            return
        out.append((start, end, new, operator, description, tokens[first].line + 1, scanner.function[first]))

    for i, t in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        binary = _value_end(prev)
        if t.text in COMPARE and not t.template:
            add(i, i, t.start, t.end, COMPARE[t.text], "compare", f"`{t.text}` -> `{COMPARE[t.text]}`")
        elif t.text in ARITH and not t.template and binary and _binary_operator(t, prev, nxt):
            add(i, i, t.start, t.end, ARITH[t.text], "arith", f"`{t.text}` -> `{ARITH[t.text]}`")
        elif t.text in ("&&", "||") and binary and (t.text == "||" or _binary_operator(t, prev, nxt)):
            new = "||" if t.text == "&&" else "&&"
            add(i, i, t.start, t.end, new, "bool-op", f"`{t.text}` -> `{new}`")
        if t.text == "!" or (t.text == "-" and not binary):
            add(i, i, t.start, t.end, "", "unary", f"dropped `{t.text}`")
        elif t.text in ("true", "false"):
            new = "false" if t.text == "true" else "true"
            add(i, i, t.start, t.end, new, "const", f"`{t.text}` -> `{new}`")
        elif t.kind == "number":
            m = re.fullmatch(r"(0|[1-9][0-9']*)([uUlLzZ]*)", t.text)
            if m:
                value = int(m.group(1).replace("'", ""))
                for delta in (1, -1):
                    new = f"{value + delta}{m.group(2)}"
                    add(i, i, t.start, t.end, new, "const", f"`{t.text}` -> `{new}`")
    for open_, close in scanner.calls:
        args = scanner.arguments(open_, close)
        for (a0, a1), (b0, b1) in zip(args, args[1:]):
            if a0 >= a1 or b0 >= b1 or any(tokens[k].kind == "string" or tokens[k].text == "[" for k in (a0, b0)):
                continue
            ta, tb = text[tokens[a0].start : tokens[a1 - 1].end], text[tokens[b0].start : tokens[b1 - 1].end]
            if ta != tb:
                between = text[tokens[a1 - 1].end : tokens[b0].start]
                add(
                    a0,
                    b1 - 1,
                    tokens[a0].start,
                    tokens[b1 - 1].end,
                    tb + between + ta,
                    "args",
                    f"swapped arguments `{ta[:30]}`, `{tb[:30]}`",
                )
    for first, semi in scanner.statements:
        stmt = " ".join(text[tokens[first].start : tokens[semi].end].split())
        add(first, semi, tokens[first].start, tokens[semi].end, ";", "drop", f"dropped `{stmt[:60]}`")
    return out


def is_cpp(path: str) -> bool:
    return PurePath(path).suffix in SUFFIXES


def gpu_only(path: str) -> bool:
    return PurePath(path).suffix in GPU_SUFFIXES
