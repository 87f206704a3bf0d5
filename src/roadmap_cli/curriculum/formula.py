"""A safe evaluator for the small arithmetic formulas of numeric quiz questions.

A numeric question states how its answer is computed, e.g.

    formula: "2 * layers * kv_heads * head_dim * bytes"
    inputs: {layers: 32, kv_heads: 32, head_dim: 128, bytes: 2}

and the loader computes the answer from it: no answer key is typed by hand.
The formula is parsed with `ast` and only a whitelist of node types is
walked (numbers, input names, + - * / // % **, unary minus, and a few pure
functions); anything else (attribute access, subscripts, calls of other
names, comprehensions, strings) is refused. Nothing is ever passed to
`eval`. Exponents and magnitudes are bounded, so `9 ** 9 ** 9` cannot
hang the loader.

The same evaluator reads a learner's numeric answer ("2 * 32 * 128", "1e6"),
with no names allowed there.
"""

from __future__ import annotations

import ast
import math
from typing import Mapping

MAX_FORMULA_CHARS = 300
MAX_EXPONENT = 128  # 2 ** 128 is as big as any quantity a quiz needs
MAX_MAGNITUDE = 1e30

FUNCTIONS = {
    "min": min,
    "max": max,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log2": math.log2,
}

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


class FormulaError(ValueError):
    """The formula is not one this evaluator accepts (message says why)."""


def names_in(formula: str) -> set[str]:
    """The input names a formula uses (function names excluded)."""
    tree = _parse(formula)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(formula: str, inputs: Mapping[str, float] | None = None) -> float:
    """The value of `formula` with `inputs` bound to its names.

    Raises FormulaError for anything outside the whitelist, an unknown name,
    a division by zero or a result that is not a finite number."""
    tree = _parse(formula)
    value = _eval(tree.body, dict(inputs or {}))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FormulaError(f"{formula!r} does not give a finite number")
    return value


def _parse(formula: str) -> ast.Expression:
    if not isinstance(formula, str) or not formula.strip():
        raise FormulaError("the formula is empty")
    if len(formula) > MAX_FORMULA_CHARS:
        raise FormulaError(f"the formula is longer than {MAX_FORMULA_CHARS} characters")
    try:
        return ast.parse(formula.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"{formula!r} is not an arithmetic expression ({exc.msg})") from None


def _check(value: float) -> float:
    if isinstance(value, float) and not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise FormulaError(f"an intermediate value is out of range ({value:g})")
    return value


def _eval(node: ast.AST, names: dict[str, float]) -> float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise FormulaError(f"only numbers are allowed, not {node.value!r}")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names)) or "none"
            raise FormulaError(f"unknown name {node.id!r} (inputs: {known})")
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, names)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, names), _eval(node.right, names)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise FormulaError(f"exponent {right:g} is larger than {MAX_EXPONENT}")
            return _check(left**right)
        op = _BINARY.get(type(node.op))
        if op is None:
            raise FormulaError(f"operator {type(node.op).__name__} is not allowed (use + - * / // % **)")
        try:
            return _check(op(left, right))
        except ZeroDivisionError:
            raise FormulaError("division by zero") from None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        func = FUNCTIONS.get(node.func.id)
        if func is None:
            raise FormulaError(f"function {node.func.id!r} is not allowed ({', '.join(FUNCTIONS)} are)")
        args = [_eval(a, names) for a in node.args]
        try:
            return _check(func(*args))
        except (TypeError, ValueError) as exc:
            raise FormulaError(f"{node.func.id}(): {exc}") from None
    raise FormulaError(
        f"{type(node).__name__} is not allowed in a formula (numbers, names, + - * / // % ** and "
        f"{', '.join(FUNCTIONS)} only)"
    )
