"""The lab-code check of one Python source (labcode.py runs it over the workspace): imports, names,
attributes, calls and string constants, against the Policy (labcode_policy.py).

Stdlib only: it runs in the learner process, behind the OS wall.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from roadmap_cli.grading_kit.labcode_cpp import CPP_REFUSED
from roadmap_cli.grading_kit.labcode_policy import (
    ALLOWED_DUNDERS,
    DEFAULT_IMPORTS,
    MODULE_ATTRIBUTES_REFUSED,
    NAMED_ATTRIBUTE_CALLS,
    REFUSED_ATTRIBUTES,
    REFUSED_NAMES,
    ExtraImport,
    Policy,
    applies,
)

# A str.format field that reads a dunder ("{0.__globals__}") is an attribute access in disguise.
_FORMAT_DUNDER = re.compile(r"\{[^{}]*\.\s*__\w+__")


class _Visitor(ast.NodeVisitor):
    def __init__(self, rel: str, policy: Policy, own: set[str]) -> None:
        self.rel, self.policy, self.own = rel, policy, own
        self.problem: Optional[str] = None
        self.extras = [e for e in policy.imports if applies(e.files, rel)]
        self.forbidden = [f for f in policy.forbid if applies(f.files, rel)]
        self.aliases: dict[str, str] = {}  # local name -> the module (or module.attr) it is bound to

    # --- helpers
    def refuse(self, node: ast.AST, what: str, why: str) -> None:
        if self.problem is None:
            self.problem = f"{self.rel}:{getattr(node, 'lineno', 1)}: {what} is not allowed in lab code: {why}"

    def _extra_for(self, module: str) -> Optional[ExtraImport]:
        for entry in self.extras:
            if module == entry.module or module.startswith(entry.module + "."):
                return entry
        return None

    def module_allowed(self, module: str) -> tuple[bool, str]:
        top = module.split(".")[0]
        if top in self.policy.grader_modules:
            return False, "it is the grader's own code"
        if self._extra_for(module) is not None:
            return True, ""
        if top in self.own or (top in self.policy.helper_modules and "." not in module):
            return True, ""
        if top in DEFAULT_IMPORTS:
            private = [p for p in module.split(".")[1:] if p.startswith("_")]
            if private:
                return False, f"{top}'s private module {private[0]} is not on the allow-list of this lab"
            return True, ""
        return (
            False,
            "only the lab's own modules, torch, triton, numpy and a few plain standard modules may "
            "be imported (the handout's list)",
        )

    def attribute_allowed(self, base: Optional[str], attr: str) -> Optional[str]:
        """Why `base.attr` is refused (base: the module a name is bound to, if known), or None."""
        if attr in REFUSED_ATTRIBUTES:
            extra = self._extra_for(base or "")
            if not (extra and extra.attributes and attr in extra.attributes):
                return REFUSED_ATTRIBUTES[attr]
        if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            return f"{attr} reaches the interpreter's internals (functions' globals, other classes)"
        if base is not None:
            extra = self._extra_for(base)
            if (
                extra is not None
                and extra.attributes is not None
                and base == extra.module
                and attr not in extra.attributes
            ):
                return f"this lab lets {base} be used only for {', '.join(extra.attributes)}"
            top = base.split(".")[0]
            if attr in MODULE_ATTRIBUTES_REFUSED.get(base, ()):
                return f"{base}.{attr} is outside what lab code may use"
            if (
                attr.startswith("_")
                and not attr.startswith("__")
                and top not in self.own
                and self._extra_for(f"{base}.{attr}") is None
            ):
                return f"{base}'s private {attr} is not on the allow-list of this lab"
        return None

    def dotted(self, node: ast.AST) -> Optional[str]:
        """`torch.autograd.grad` for an Attribute chain whose root is an imported name, resolved by alias."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        literal = _literal_import(node)
        if literal is not None:
            return ".".join([literal, *reversed(parts)])
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def check_forbidden(self, node: ast.AST, name: Optional[str]) -> None:
        if not name:
            return
        for entry in self.forbidden:
            for banned in entry.names:
                if name == banned or name.startswith(banned + "."):
                    self.refuse(node, banned, entry.why)

    # --- imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            ok, why = self.module_allowed(alias.name)
            if not ok:
                self.refuse(node, f"import {alias.name}", why)
            self.check_forbidden(node, alias.name)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:  # a relative import: the workspace's own package
            for alias in node.names:
                self._from_name(node, None, alias)
            return
        module = node.module or ""
        ok, why = self.module_allowed(module)
        if not ok:
            self.refuse(node, f"from {module} import", why)
        for alias in node.names:
            self._from_name(node, module, alias)

    def _from_name(self, node: ast.ImportFrom, module: Optional[str], alias: ast.alias) -> None:
        if alias.name == "*":
            if module is not None and module.split(".")[0] not in self.own:
                self.refuse(
                    node, f"from {module} import *", "name what you import (a star import hides what it brings)"
                )
            return
        if module is not None:
            why = self.attribute_allowed(module, alias.name)
            if why is None and module.split(".")[0] not in self.own:
                sub = f"{module}.{alias.name}"
                ok, reason = self.module_allowed(sub) if alias.name[:1] == "_" else (True, "")
                why = None if ok else reason
            if why:
                self.refuse(node, f"from {module} import {alias.name}", why)
            self.check_forbidden(node, f"{module}.{alias.name}")
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        elif alias.name in REFUSED_ATTRIBUTES or (alias.name.startswith("__") and alias.name not in ALLOWED_DUNDERS):
            self.refuse(node, f"from . import {alias.name}", "it reaches into the grading process")

    # --- names and attributes
    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__import__" and getattr(node, "_literal_ok", False):
            return
        if node.id in REFUSED_NAMES:
            self.refuse(node, node.id, REFUSED_NAMES[node.id])
        if isinstance(node.ctx, ast.Load):
            self.check_forbidden(node, self.aliases.get(node.id))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = self.dotted(node.value)
        why = self.attribute_allowed(base, node.attr)
        if why:
            self.refuse(node, f".{node.attr}" if base is None else f"{base}.{node.attr}", why)
        if base is not None and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.refuse(
                node,
                f"changing {base}.{node.attr}",
                "a library's or another module's names are what the "
                "grader's guards and your other files rely on; change your own objects instead",
            )
        self.check_forbidden(node, self.dotted(node))
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.check_forbidden(node, "@")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        called = self.dotted(func)
        literal = _literal_import(node)
        if literal is not None:  # __import__("sys") in given code: checked as `import sys` would be
            func._literal_ok = True  # type: ignore[attr-defined]
            ok, why = self.module_allowed(literal)
            if not ok:
                self.refuse(node, f"__import__({literal!r})", why)
        if isinstance(func, ast.Name) and func.id == "vars" and not node.args:
            self.refuse(node, "vars()", "a frame's variables reach the grader's objects")
        if isinstance(func, ast.Name) and func.id == "vars" and node.args and self.dotted(node.args[0]) is not None:
            self.refuse(node, f"vars({self.dotted(node.args[0])})", "a module's dict is what the grader's code calls")
        if called in ("operator.attrgetter", "operator.methodcaller") and not all(
            isinstance(a, ast.Constant) and isinstance(a.value, str)
            for a in node.args[: 1 if called.endswith("caller") else None]
        ):
            self.refuse(
                node, f"{called} with a computed name", "a name built at run time hides the attribute from this check"
            )
        for arg in node.args if called in ("operator.attrgetter", "operator.methodcaller") else ():
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                for part in arg.value.split("."):
                    why = self.attribute_allowed(None, part)
                    if why:
                        self.refuse(node, f"{called}({arg.value!r})", why)
        unpickles = {"torch.load": ("weights_only", True), "numpy.load": ("allow_pickle", False)}
        waived = bool(self.policy.unpickle_files) and applies(self.policy.unpickle_files, self.rel)
        if called in unpickles and not waived:
            key, safe = unpickles[called]
            given = next((k.value for k in node.keywords if k.arg == key), None)
            if given is not None and not (isinstance(given, ast.Constant) and given.value is safe):
                self.refuse(
                    node,
                    f"{called}({key}={ast.unparse(given)})",
                    "unpickling runs whatever code the file names, unchecked",
                )
        if isinstance(func, ast.Name) and func.id in NAMED_ATTRIBUTE_CALLS:
            name = node.args[1] if len(node.args) >= 2 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and not node.keywords:
                func._named_call_ok = True  # type: ignore[attr-defined]
                base = self.dotted(node.args[0])
                why = self.attribute_allowed(base, name.value)
                if why:
                    self.refuse(node, f"{func.id}(..., {name.value!r})", why)
                dotted = f"{base}.{name.value}" if base else None
                self.check_forbidden(node, dotted)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            word = node.value.strip()
            if (
                word in REFUSED_ATTRIBUTES
                and word not in ("sys", "builtins", "importlib", "ctypes", "gc", "inspect")
                or (re.fullmatch(r"__\w+__", word) and word not in ALLOWED_DUNDERS)
            ):
                self.refuse(
                    node,
                    f"the string {word!r}",
                    "a string naming an interpreter internal is an attribute access in disguise",
                )
            if _FORMAT_DUNDER.search(node.value):
                self.refuse(node, "a format field that reads a dunder", "it is an attribute access in disguise")
            for pattern, why in CPP_REFUSED:
                if pattern.search(node.value):
                    self.refuse(node, pattern.search(node.value).group(0), why)
                    break

    # `import x` inside a function is still an import: generic_visit reaches it.


def _literal_import(node: ast.AST) -> Optional[str]:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "__import__"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and "." not in node.args[0].value
    ):
        return node.args[0].value
    return None


def check_python(
    rel: str, tree: ast.Module, policy: Policy, own: set[str], nodes: Optional[list[ast.AST]] = None
) -> Optional[str]:
    visitor = _Visitor(rel, policy, own)
    nodes = list(ast.walk(tree)) if nodes is None else nodes
    # Aliases first (an import below a use still binds the name for the whole module).
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if isinstance(node, ast.Import):
                    visitor.aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
                elif not node.level and alias.name != "*":
                    visitor.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for _ in range(2):  # `T = torch.Tensor` makes T another name for torch.Tensor (twice: chains of two)
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = visitor.dotted(node.value)
                if target is not None:
                    visitor.aliases[node.targets[0].id] = target
    visitor.visit(tree)
    return visitor.problem
