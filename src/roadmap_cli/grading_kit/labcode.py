"""What lab code may do in the learner process: a static check of the
learner's sources, run behind the OS wall, in the learner process itself,
before the first learner module is imported (_learner_main.py), and the
loader that then imports exactly the bytes it checked.

Why: the lab's adapter runs in the learner's own process (it must: it calls
the learner's functions), so code there could replace the adapter's helpers,
save a guarded torch function before the guard is on, or walk frames into
anything the process holds, and the grader would receive forged facts (red
team, issue 35: P1, P1b). CPython cannot isolate code inside one process;
this check refuses the code that reaches into the process in the ways a
parser can see, and the grader re-checks every value it can:

- imports: an allow-list (a few plain stdlib modules, torch, triton, numpy,
  the workspace's own modules, and the extras a lab declares in lab.yaml
  `lab_code: imports:`, per file, with the attributes they may use);
- names: eval/exec/compile/globals/locals/vars/__import__/breakpoint,
  getattr/setattr/delattr/hasattr with a name that is not a string literal;
- attributes: frame and code attributes (f_back, tb_frame, co_code, ...),
  dunders outside a small allow-list (__globals__, __dict__, __subclasses__,
  ...), module re-exports (torch.sys, np.ctypeslib, os.sys, ...) and private
  attributes of an imported module (torch._C), unless the lab declares them;
- what the lab's handout forbids (lab.yaml `lab_code: forbid:`, per file);
- C/C++/CUDA sources (and Python string constants, where load_inline sources
  live): the Python C-API's import/eval/globals, pybind11's, dlopen/dlsym.

Each problem is one line: `file:line: <what> is not allowed in lab code: <why>`.

The rules and lab.yaml's part of them: labcode_policy.py; the Python check: labcode_python.py; the C/C++
check: labcode_cpp.py. This module walks the workspace and keeps the bytes it checked.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from dataclasses import dataclass, field
from typing import Iterable, Optional

from roadmap_cli.grading_kit.labcode_cpp import CPP_SUFFIXES, check_cpp
from roadmap_cli.grading_kit.labcode_policy import Forbid, Policy, applies
from roadmap_cli.grading_kit.labcode_python import check_python

# Folders that hold no learner code (the pre-check's list, grading/precheck.py).
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "env", "out", "data", "node_modules", "site-packages"}
MAX_SOURCE_BYTES = 4 << 20


# ------------------------------------------------------------------ workspace


def source_files(workspace: str) -> list[str]:
    """Workspace-relative paths of every .py and C/C++/CUDA file (sorted), outside tool folders."""
    found: list[str] = []
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not d.endswith(".old"))
        for name in sorted(files):
            if name.endswith(".py") or name.endswith(CPP_SUFFIXES):
                found.append(os.path.relpath(os.path.join(root, name), workspace))
    return found


def workspace_modules(files: Iterable[str]) -> set[str]:
    """Top-level module names the workspace's .py files and packages provide."""
    names = set()
    for rel in files:
        if rel.endswith(".py"):
            names.add(rel.split(os.sep)[0].removesuffix(".py"))
    return names


@dataclass
class Checked:
    """What the check read: workspace-relative .py path -> the bytes it checked (the loader imports those)."""

    sources: dict[str, bytes] = field(default_factory=dict)

    def digest(self, rel: str) -> Optional[str]:
        data = self.sources.get(rel)
        return None if data is None else hashlib.sha256(data).hexdigest()


def check_workspace(workspace: str, policy: Policy) -> tuple[Optional[str], Checked]:
    """(the first problem as one line, or None; the checked sources)."""
    checked = Checked()
    if not policy.enabled:
        return None, checked
    files = source_files(workspace)
    own = workspace_modules(files)
    # (A copy of a learner-side helper, given to read, is no problem: the grader's own copy is imported first.)
    for name in sorted(own & (stdlib_names() | {"torch", "triton", "numpy", "roadmap_cli"} | policy.grader_modules)):
        rel = next(r for r in files if r.split(os.sep)[0].removesuffix(".py") == name)
        return (
            f"{rel}:1: a module named {name} is not allowed in lab code: it would stand in for the library "
            "of that name in the grading process"
        ), checked
    trees: dict[str, ast.Module] = {}
    for rel in files:
        path = os.path.join(workspace, rel)
        try:
            if os.path.islink(path):
                return (
                    f"{rel}:1: a link is not allowed in lab code: the file checked must be the file imported",
                    checked,
                )
            with open(path, "rb") as fh:
                data = fh.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            return f"{rel}:1: an unreadable file is not allowed in lab code: {exc.strerror}", checked
        if len(data) > MAX_SOURCE_BYTES:
            return (
                f"{rel}:1: a source over {MAX_SOURCE_BYTES >> 20} MiB is not allowed in lab code: it cannot be checked",
                checked,
            )
        if rel.endswith(".py"):
            checked.sources[rel] = data
            try:
                trees[rel] = ast.parse(data, filename=rel)
            except (SyntaxError, ValueError) as exc:
                line = getattr(exc, "lineno", 1) or 1
                return (
                    f"{rel}:{line}: code that does not parse is not allowed in lab code: {getattr(exc, 'msg', exc)}",
                    checked,
                )
        else:
            problem = check_cpp(rel, data.decode("utf-8", "replace"))
            if problem:
                return problem, checked
    nodes = {rel: list(ast.walk(tree)) for rel, tree in trees.items()}  # walked once, read by every pass
    policy = _with_import_closure(policy, nodes, own)
    for rel, tree in trees.items():
        if rel.removesuffix(".py") in policy.helper_modules:
            continue  # a given copy of a learner-side helper: the grader's own copy is the one imported
        problem = check_python(rel, tree, policy, own, nodes[rel])
        if problem:
            return problem, checked
    return None, checked


def _module_file(name: str, trees: dict[str, ast.Module]) -> Optional[str]:
    for rel in (name.replace(".", os.sep) + ".py", os.path.join(name.replace(".", os.sep), "__init__.py")):
        if rel in trees:
            return rel
    return None


def _with_import_closure(policy: Policy, trees: dict[str, list[ast.AST]], own: set[str]) -> Policy:
    """A handout's rule for a file holds for every workspace module it imports (a helper file is no way around it)."""
    graph: dict[str, set[str]] = {}
    for rel, nodes in trees.items():
        deps = set()
        for node in nodes:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    names = [a.name for a in node.names] + ([node.module] if node.module else [])
                else:
                    names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name and name.split(".")[0] in own:
                    found = _module_file(name, trees)
                    if found:
                        deps.add(found)
        graph[rel] = deps
    forbid = []
    for entry in policy.forbid:
        if not entry.files:
            forbid.append(entry)
            continue
        reach = [rel for rel in trees if applies(entry.files, rel)]
        seen = set(reach)
        while reach:
            for dep in graph.get(reach.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    reach.append(dep)
        forbid.append(Forbid(entry.names, tuple(sorted(seen)) or entry.files, entry.why))
    return Policy(
        policy.imports,
        forbid,
        grader_modules=policy.grader_modules,
        helper_modules=policy.helper_modules,
        unpickle_files=policy.unpickle_files,
        enabled=policy.enabled,
    )


def stdlib_names() -> frozenset[str]:
    return frozenset(getattr(sys, "stdlib_module_names", ()))
