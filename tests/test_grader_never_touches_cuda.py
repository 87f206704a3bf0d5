"""The grader process never opens a CUDA context (issue 37, item 10): grader-side code of labs/*/tests builds
CPU tensors and hands them over with `kit.to_device`; only `@kit.learner_side` functions (and the helpers only
they call) make, move or query CUDA. A lint over every lab's tests, and the mechanism's CPU checks: inputs
placed in the real learner process, results' devices recorded, a CPU grade of a GPU lab under the guard that
raises when the grader initialises CUDA."""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import placement, sandbox, wire

ROOT = Path(__file__).resolve().parents[1]
LABS = ROOT / "labs"


# ------------------------------------------------------------------ the lint


def _is_learner_side(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(node, ast.Name) and node.id == "learner_side") or \
        (isinstance(node, ast.Attribute) and node.attr == "learner_side")


def _cuda_device_expr(node: ast.expr, names: frozenset = frozenset()) -> bool:
    """"cuda", "cuda:0", torch.device("cuda"), kit.device(), device(), DEVICE, or a name assigned one of
    those in the file (`dev = device()`): a device that may be CUDA."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith("cuda")
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "device":
            return not node.args or _cuda_device_expr(node.args[0], names) or not isinstance(node.args[0], ast.Constant)
        return False
    return isinstance(node, ast.Name) and (node.id in ("DEVICE", "DEV") or node.id in names)


def _device_names(tree: ast.Module) -> frozenset:
    """Names the file assigns a possibly-CUDA device to."""
    names: set[str] = set()
    for _ in range(2):  # `a = device(); b = a`
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and _cuda_device_expr(n.value, frozenset(names)):
                names.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return frozenset(names)


def _problems(node: ast.AST, names: frozenset = frozenset()) -> list[str]:
    """What in one grader-side node would make or touch CUDA state in the grader process."""
    found = []
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda":
            found.append(".cuda()")
        if isinstance(func, ast.Attribute) and func.attr == "to" and any(_cuda_device_expr(a, names) for a in node.args):
            found.append(".to(<the lab's device>)")
        for kw in node.keywords:
            if kw.arg == "device" and _cuda_device_expr(kw.value, names):
                found.append(f"device={ast.unparse(kw.value)}")
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "torch" and node.attr == "cuda":
            found.append("torch.cuda")
        if node.attr == "is_cuda":
            found.append(".is_cuda (the grader's copies are CPU data: kit.returned_on_cuda)")
    return found


def _module_functions(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _learner_side_functions(tree: ast.Module, outside_uses: set[str]) -> set[str]:
    """Decorated functions, and module functions used only inside learner-side ones (their helpers)."""
    funcs = _module_functions(tree)
    learner = {name for name, f in funcs.items() if any(_is_learner_side(d) for d in f.decorator_list)}
    changed = True
    while changed:
        changed = False
        for name in set(funcs) - learner:
            if name in outside_uses:
                continue
            users = {owner for owner, f in funcs.items() if owner != name
                     for n in ast.walk(f) if isinstance(n, ast.Name) and n.id == name}
            top_level = any(isinstance(n, ast.Name) and n.id == name for stmt in tree.body
                            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(stmt))
            if users and users <= learner and not top_level:
                learner.add(name)
                changed = True
    return learner


def grader_side_cuda(tests_dir: Path) -> list[str]:
    """file:line: what, for every grader-side use of CUDA in one lab's tests."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(tests_dir.glob("*.py"))}
    # Names other files reach as `module.name` (test files call adapter.X grader-side).
    outside: dict[str, set[str]] = {}
    for path, tree in trees.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                outside.setdefault(n.value.id, set()).add(n.attr)
            if isinstance(n, ast.ImportFrom) and n.module:
                outside.setdefault(n.module, set()).update(a.name for a in n.names)
    found = []
    for path, tree in trees.items():
        learner = _learner_side_functions(tree, outside.get(path.stem, set()))
        names = _device_names(tree)
        skip = {id(n) for name, f in _module_functions(tree).items() if name in learner for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for what in _problems(node, names):
                found.append(f"{path.relative_to(tests_dir.parents[1])}:{node.lineno}: {what}")
    return found


def test_no_lab_grader_makes_moves_or_queries_cuda_tensors() -> None:
    found = [line for lab in sorted(LABS.iterdir()) if (lab / "tests").is_dir()
             for line in grader_side_cuda(lab / "tests")]
    assert not found, ("grader-side code must build CPU tensors and pass them through kit.to_device (CUDA work "
                       "goes in @kit.learner_side functions):\n" + "\n".join(found))


def test_the_lint_catches_each_way_of_reaching_cuda(tmp_path: Path) -> None:
    (tmp_path / "adapter.py").write_text(textwrap.dedent('''
        import torch
        from roadmap_cli import grading_kit as kit

        def _helper(n):
            return torch.randn(n, device="cuda")       # only learner-side code calls it: fine

        @kit.learner_side
        def timed(n):
            torch.cuda.synchronize()
            return _helper(n).cuda()

        def grader_helper(x):
            return x.to(kit.device())                  # flagged: called by a test
    '''))
    (tmp_path / "test_x.py").write_text(textwrap.dedent('''
        import torch
        import adapter
        from roadmap_cli.grading_kit import device
        DEVICE = device()

        def test_a():
            x = torch.randn(3).cuda()
            y = torch.zeros(3, device="cuda:0")
            z = torch.ones(3).to(DEVICE)
            g = torch.Generator(device=device())
            assert adapter.grader_helper(x).is_cuda
            major = torch.cuda.get_device_capability()
            w = torch.ones(3, device=torch.device("cuda"))
            ok = torch.ones(3, device="cpu").to(torch.float16)
            dev = device()
            v = torch.full((3,), 0.0, device=dev)
    '''))
    found = grader_side_cuda(tmp_path)
    kinds = sorted(line.split(": ", 1)[1].split(" (")[0] for line in found)
    assert kinds == sorted([".to(<the lab's device>)", ".cuda()", "device='cuda:0'", ".to(<the lab's device>)",
                            "device=device()", ".is_cuda", "torch.cuda", "device=torch.device('cuda')", "device=dev"]), found
    assert not [line for line in found if "adapter.py:6" in line or "adapter.py:10" in line or "adapter.py:11" in line]
