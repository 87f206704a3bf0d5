"""Mechanical mutants of a lab's reference solution, for `roadmap dev mutate`.

Only code inside solution regions (BEGIN SOLUTION ... STARTER/END SOLUTION,
see starter_build) is mutated: that is exactly the code a learner writes.
Each mutant is one small, realistic mistake, made as a text edit at an AST
node's exact position (so comments and layout around it stay as they are):

  compare    <  <=  >  >=  ==  !=  is  in  swapped for their boundary twin
  arith      + -, * /, // *, % //, ** *, << >>, & |, and the same in `+=`
  bool-op    and <-> or;  unary: a dropped `-` or `not`
  const      integer constants +1 and -1; True <-> False
  slice      a non-constant slice bound +1 and -1 (`x[:n]` -> `x[:n + 1]`)
  args       two adjacent positional arguments of a call swapped
  kwarg      one keyword argument dropped (the callee's default is used)
  drop       one statement replaced by `pass`
  dtype      torch./tl./np. float32 <-> float16, bfloat16 -> float16,
             float64 -> float32, int32 <-> int64

Python only through `ast`; `@triton.jit` functions are Python, so they are
mutated the same way. C, C++ and CUDA sources (.c .cc .cpp .h .hpp .cu .cuh)
get the same operators, token by token (mutants_cpp.py): compare, arith,
bool-op, unary, const, args and drop.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Optional

from roadmap_cli.authoring import mutants_cpp
from roadmap_cli.labs.starter_build import comment_prefix, parse_regions

COMPARE_SWAPS = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
}
ARITH_SWAPS = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "/"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "*"),
    ast.Mod: ("%", "//"),
    ast.Pow: ("**", "*"),
    ast.LShift: ("<<", ">>"),
    ast.RShift: (">>", "<<"),
    ast.BitAnd: ("&", "|"),
    ast.BitOr: ("|", "&"),
}
DTYPE_SWAPS = {
    "float32": "float16",
    "float16": "float32",
    "bfloat16": "float16",
    "float64": "float32",
    "int32": "int64",
    "int64": "int32",
}
DTYPE_MODULES = {"torch", "tl", "np", "numpy"}
DROPPABLE = (
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.If,
    ast.Raise,
    ast.Assert,
    ast.Continue,
    ast.Break,
    ast.For,
    ast.While,
    ast.With,
)
OPERATORS = ("compare", "arith", "bool-op", "unary", "const", "slice", "args", "kwarg", "drop", "dtype")


@dataclass(frozen=True)
class Mutant:
    file: str  # workspace path of the mutated source file
    line: int  # 1-based line in the reference file (with markers)
    function: str  # enclosing function, e.g. "BlockManager.allocate" ("" at module level)
    operator: str  # one of OPERATORS
    description: str  # e.g. "`<` -> `<=`"
    text: str  # the whole mutated reference file (markers included)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" + (f" ({self.function})" if self.function else "")


class _Source:
    """Character offsets of AST positions (ast columns count UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col_bytes: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        return self.text[self.start(node) : self.end(node)]


def _find_token(text: str, token: str) -> Optional[re.Match]:
    """The operator `token` in the text between two operands (parentheses,
    spaces and comments around it), not part of a longer operator."""
    if token[0].isalpha():
        pattern = r"\b" + r"\s+".join(map(re.escape, token.split())) + r"\b"
    else:
        pattern = r"(?<![*/<>=!%&|^+\-])" + re.escape(token) + r"(?![*/<>=&|])"
    code = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), text)  # never match inside a comment
    return re.search(pattern, code)


class _Collector:
    def __init__(self, text: str, path: str) -> None:
        self.src = _Source(text)
        self.path = path
        self.edits: list[tuple[int, int, str, str, str, int]] = []  # start, end, new, operator, description, line
        regions = parse_regions(text, path)
        self.region_of_line: dict[int, int] = {}
        for n, region in enumerate(regions):
            for index in region.solution_lines:
                self.region_of_line[index + 1] = n

    def inside(self, node: ast.AST) -> bool:
        first = self.region_of_line.get(node.lineno)
        return first is not None and self.region_of_line.get(node.end_lineno) == first

    def add(self, start: int, end: int, new: str, operator: str, description: str, line: int) -> None:
        if self.src.text[start:end] != new:
            self.edits.append((start, end, new, operator, description, line))

    def replace_token(self, left: ast.AST, right: ast.AST, old: str, new: str, operator: str, line: int) -> None:
        lo, hi = self.src.end(left), self.src.start(right)
        match = _find_token(self.src.text[lo:hi], old)
        if match:
            self.add(lo + match.start(), lo + match.end(), new, operator, f"`{old}` -> `{new}`", line)


def _python_edits(collector: _Collector, tree: ast.AST) -> None:
    c, src = collector, collector.src
    for node in ast.walk(tree):
        if not hasattr(node, "lineno") or not c.inside(node):
            continue
        line = node.lineno
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                old, new = COMPARE_SWAPS[type(op)]
                c.replace_token(operands[i], operands[i + 1], old, new, "compare", line)
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITH_SWAPS:
            old, new = ARITH_SWAPS[type(node.op)]
            c.replace_token(node.left, node.right, old, new, "arith", line)
        elif isinstance(node, ast.AugAssign) and type(node.op) in ARITH_SWAPS:
            old, new = ARITH_SWAPS[type(node.op)]
            c.replace_token(node.target, node.value, old + "=", new + "=", "arith", line)
        elif isinstance(node, ast.BoolOp):
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            c.replace_token(node.values[0], node.values[1], old, new, "bool-op", line)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            what = "-" if isinstance(node.op, ast.USub) else "not"
            c.add(src.start(node), src.end(node), src.segment(node.operand), "unary", f"dropped `{what}`", line)
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            c.add(
                src.start(node),
                src.end(node),
                str(not node.value),
                "const",
                f"`{node.value}` -> `{not node.value}`",
                line,
            )
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                new = str(node.value + delta)
                c.add(src.start(node), src.end(node), new, "const", f"`{src.segment(node)}` -> `{new}`", line)
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if bound is None or isinstance(bound, ast.Constant):
                    continue  # constant bounds are the `const` operator's
                text = src.segment(bound)
                wrapped = text if isinstance(bound, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({text})"
                for sign in ("+", "-"):
                    c.add(
                        src.start(bound),
                        src.end(bound),
                        f"{wrapped} {sign} 1",
                        "slice",
                        f"slice bound `{text}` -> `{wrapped} {sign} 1`",
                        line,
                    )
        elif isinstance(node, ast.Call):
            _call_edits(c, node)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in DTYPE_SWAPS
            and isinstance(node.value, ast.Name)
            and node.value.id in DTYPE_MODULES
        ):
            new = DTYPE_SWAPS[node.attr]
            c.add(
                src.end(node) - len(node.attr),
                src.end(node),
                new,
                "dtype",
                f"`{node.value.id}.{node.attr}` -> `{node.value.id}.{new}`",
                line,
            )
        if isinstance(node, DROPPABLE) and not _is_docstring(node):
            first = src.text[src.start(node) : src.end(node)].splitlines()[0].strip()
            c.add(src.start(node), src.end(node), "pass", "drop", f"dropped `{first[:60]}`", line)


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _call_edits(c: _Collector, call: ast.Call) -> None:
    src, line = c.src, call.lineno
    args = call.args
    if not any(isinstance(a, ast.Starred) for a in args):
        for a, b in zip(args, args[1:]):
            ta, tb = src.segment(a), src.segment(b)
            if ta != tb:
                between = src.text[src.end(a) : src.start(b)]
                c.add(
                    src.start(a),
                    src.end(b),
                    tb + between + ta,
                    "args",
                    f"swapped arguments `{ta[:30]}`, `{tb[:30]}`",
                    line,
                )
    operands = sorted([*args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    for i, kw in enumerate(operands):
        if not isinstance(kw, ast.keyword) or kw.arg is None:
            continue
        if i > 0:
            start, end = src.end(operands[i - 1]), src.end(kw)
        elif i + 1 < len(operands):
            start, end = src.start(kw), src.start(operands[i + 1])
        else:
            start, end = src.start(kw), src.end(kw)
        c.add(start, end, "", "kwarg", f"dropped `{kw.arg}=`", kw.lineno)


def _enclosing_functions(tree: ast.AST) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return spans


def _function_at(spans: list[tuple[int, int, str]], line: int) -> str:
    best = ""
    best_size = None
    for lo, hi, name in spans:
        if lo <= line <= hi and (best_size is None or hi - lo < best_size):
            best, best_size = name, hi - lo
    return best


def generate(text: str, path: str, operators: Optional[set[str]] = None) -> list[Mutant]:
    """Every mutant of one reference file, in a deterministic order (position, operator)."""
    prefix = comment_prefix(path)
    if prefix is None:
        return []
    if prefix == "//":  # C, C++, CUDA: token-level operators of the same names (mutants_cpp)
        edits = mutants_cpp.edits(text, path)
    else:
        tree = ast.parse(text)
        collector = _Collector(text, path)
        _python_edits(collector, tree)
        spans = _enclosing_functions(tree)
        edits = [(*e, _function_at(spans, e[5])) for e in collector.edits]
    seen: set[str] = set()
    out = []
    for start, end, new, operator, description, line, function in sorted(edits, key=lambda e: (e[0], e[1], e[3], e[2])):
        if operators and operator not in operators:
            continue
        mutated = text[:start] + new + text[end:]
        if mutated in seen:
            continue
        seen.add(mutated)
        out.append(Mutant(path, line, function, operator, description, mutated))
    return out
