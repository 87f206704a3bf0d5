"""Helpers several test modules need live once (review of issue 36): the cohort login helpers
(cohort_helpers.py), the bwrap-or-skip fixture (conftest.py's `wall`) and the `grade --on` tests' sshd
(sshd.far_side). No test module keeps its own copy of one: a fix to a helper then reaches every test."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
SHARED = {"cohort_helpers.py": ("as_login", "sql", "add_learner"), "conftest.py": ("wall",), "sshd.py": ("far_side",)}


def _body(node: ast.FunctionDef) -> str:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring says nothing about what it does
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _functions(path: Path) -> dict[str, str]:
    return {
        node.name: _body(node)
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef)
    }


def test_each_shared_helper_is_defined_once():
    shared = {}
    for module, names in SHARED.items():
        functions = _functions(TESTS / module)
        for name in names:
            assert name in functions, f"{module} lost {name}"
            shared[functions[name]] = f"{module}:{name}"
    copies = [
        f"{path.name}:{name} repeats {shared[body]}"
        for path in sorted(TESTS.glob("test_*.py"))
        for name, body in _functions(path).items()
        if body in shared
    ]
    # A fixture of the same name in a module would shadow conftest's (a weaker copy did: no cache reset).
    copies += [
        f"{path.name}:wall shadows conftest.py's"
        for path in sorted(TESTS.glob("test_*.py"))
        if "wall" in _functions(path)
    ]
    assert copies == []


def test_the_check_finds_a_copy(tmp_path: Path):
    """It can fail: a module that pastes `sql` back in is caught."""
    source = (TESTS / "cohort_helpers.py").read_text(encoding="utf-8")
    copy = tmp_path / "test_copy.py"
    copy.write_text(source.replace("def sql(", "def _sql("), encoding="utf-8")
    bodies = {_functions(TESTS / "cohort_helpers.py")["sql"]}
    assert any(body in bodies for body in _functions(copy).values())
