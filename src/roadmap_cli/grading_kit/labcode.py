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
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Iterable, Optional

# Folders that hold no learner code (the pre-check's list, grading/precheck.py).
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "env", "out", "data", "node_modules", "site-packages"}
MAX_SOURCE_BYTES = 4 << 20

# Modules any lab's code may import (and their submodules, except private ones: torch._C is not torch).
DEFAULT_IMPORTS = frozenset(
    {
        "__future__",
        "abc",
        "array",
        "bisect",
        "cmath",
        "collections",
        "contextlib",
        "copy",
        "dataclasses",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "pathlib",
        "random",
        "re",
        "statistics",
        "string",
        "struct",
        "textwrap",
        "time",
        "typing",
        "warnings",
        "os",
        "io",
        "argparse",
        "asyncio",
        "signal",
        "threading",
        "queue",
        "uuid",
        "zlib",
        "base64",
        "datetime",
        "tempfile",
        "numpy",
        "torch",
        "triton",
    }
)
# Attributes of allowed modules that hand back what the import allow-list keeps out.
MODULE_ATTRIBUTES_REFUSED = {
    "os": {
        "sys",
        "fork",
        "forkpty",
        "execv",
        "execve",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "execvp",
        "execvpe",
        "system",
        "popen",
        "posix_spawn",
        "posix_spawnp",
        "spawnl",
        "spawnv",
        "spawnve",
        "spawnvp",
        "memfd_create",
        "register_at_fork",
    },
    "torch": {"load_library"},
}
# Attribute names refused on anything: frames, code objects, module re-exports of what the allow-list keeps out.
REFUSED_ATTRIBUTES = {
    "f_back": "a frame reaches the grader's functions and their variables",
    "f_globals": "a frame reaches the grader's functions and their variables",
    "f_locals": "a frame reaches the grader's functions and their variables",
    "f_builtins": "a frame reaches the grader's functions and their variables",
    "f_code": "a frame reaches the grader's functions and their variables",
    "tb_frame": "a traceback reaches the grader's frames",
    "tb_next": "a traceback reaches the grader's frames",
    "gi_frame": "a generator's frame reaches its caller",
    "gi_code": "a code object can be rewritten",
    "cr_frame": "a coroutine's frame reaches its caller",
    "cr_code": "a code object can be rewritten",
    "ag_frame": "a generator's frame reaches its caller",
    "co_code": "a code object can be rewritten",
    "co_consts": "a code object can be rewritten",
    "co_names": "a code object can be rewritten",
    "sys": "a module's re-export of sys reaches every module the grader loaded",
    "builtins": "builtins are shared with the grader's code",
    "importlib": "importing by computed name bypasses the import allow-list",
    "ctypes": "ctypes writes any memory of the process",
    "ctypeslib": "ctypes writes any memory of the process",
    "gc": "the garbage collector hands out every object of the process",
    "inspect": "inspect reaches frames and the grader's code",
    "load_library": "a shared library runs unchecked code in the grading process",
    "pythonapi": "the Python C-API reaches every object of the process",
}
# Dunders lab code may use: object protocols, never the ones that reach functions' globals or other classes.
ALLOWED_DUNDERS = frozenset(
    {
        "__init__",
        "__new__",
        "__call__",
        "__name__",
        "__qualname__",
        "__module__",
        "__doc__",
        "__file__",
        "__class__",
        "__version__",
        "__len__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__contains__",
        "__iter__",
        "__next__",
        "__reversed__",
        "__repr__",
        "__str__",
        "__format__",
        "__bytes__",
        "__hash__",
        "__bool__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__enter__",
        "__exit__",
        "__aenter__",
        "__aexit__",
        "__post_init__",
        "__slots__",
        "__all__",
        "__annotations__",
        "__float__",
        "__int__",
        "__index__",
        "__complex__",
        "__round__",
        "__abs__",
        "__neg__",
        "__pos__",
        "__invert__",
        "__add__",
        "__radd__",
        "__iadd__",
        "__sub__",
        "__rsub__",
        "__isub__",
        "__mul__",
        "__rmul__",
        "__imul__",
        "__truediv__",
        "__rtruediv__",
        "__itruediv__",
        "__floordiv__",
        "__rfloordiv__",
        "__ifloordiv__",
        "__mod__",
        "__rmod__",
        "__imod__",
        "__pow__",
        "__rpow__",
        "__ipow__",
        "__matmul__",
        "__rmatmul__",
        "__imatmul__",
        "__and__",
        "__rand__",
        "__or__",
        "__ror__",
        "__xor__",
        "__rxor__",
        "__lshift__",
        "__rshift__",
        "__array__",
        "__torch_function__",
        "__dataclass_fields__",
        "__main__",
    }
)
REFUSED_NAMES = {
    "eval": "running text as code hides it from this check",
    "exec": "running text as code hides it from this check",
    "compile": "running text as code hides it from this check",
    "__import__": "importing by computed name bypasses the import allow-list",
    "globals": "a module's globals reach what the grader's code calls",
    "locals": "a frame's variables reach the grader's objects",
    "breakpoint": "a debugger runs arbitrary code",
    "__builtins__": "builtins are shared with the grader's code",
    "__loader__": "the import system reaches every module the grader loaded",
    "__spec__": "the import system reaches every module the grader loaded",
}
# Calls that name an attribute: a literal name is checked here, a computed one when it runs (the learner's
# modules get builtins whose getattr/setattr/delattr/hasattr/vars refuse what this check refuses:
# _learner_main.py `_guarded_builtins`; an fx pass's getattr(gm, node.target) is ordinary lab code).
NAMED_ATTRIBUTE_CALLS = ("getattr", "setattr", "delattr", "hasattr")
# A str.format field that reads a dunder ("{0.__globals__}") is an attribute access in disguise.
_FORMAT_DUNDER = re.compile(r"\{[^{}]*\.\s*__\w+__")

# Learner C/C++/CUDA (load_inline, cpp_extension builds) compiled into the learner process: the Python C-API's
# import/eval/globals and pybind11's, or loading another library, reach the process as Python code would.
CPP_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp")
_CPP_REFUSED = [
    (
        re.compile(
            r"\bPy(?:Import|Run|Eval|Frame|Sys|Dict|Module|Code|Marshal|Object_(?:Get|Set|Del)Attr|"
            r"ThreadState|Interpreter|CFunction|Capsule)_?\w*"
        ),
        "the Python C-API reaches every object of the process",
    ),
    (re.compile(r"\b_Py\w+"), "the Python C-API reaches every object of the process"),
    (re.compile(r"\bPy_(?:CompileString\w*|Initialize\w*|Exec|BuildValue)\b"), "the Python C-API runs Python code"),
    (
        re.compile(r"\b(?:py|pybind11)::(?:module_?::import|eval\w*|exec|globals|module_::import|import)\b"),
        "pybind11 imports and runs Python code in the grading process",
    ),
    (re.compile(r"\bmodule_?\s*::\s*import\b"), "pybind11 imports and runs Python code in the grading process"),
    (re.compile(r"\b(?:dlopen|dlsym|dlmopen|dlvsym)\b"), "loading another library runs unchecked code"),
    (re.compile(r"\bPyObject\s*\*"), "the Python C-API reaches every object of the process"),
]


@dataclass(frozen=True)
class ExtraImport:
    """lab.yaml `lab_code: imports:` entry: a module the handout's code needs beyond the default list."""

    module: str
    files: tuple[str, ...] = ()  # empty: every file
    attributes: Optional[tuple[str, ...]] = None  # None: any attribute the general rules allow
    why: str = ""


@dataclass(frozen=True)
class Forbid:
    """lab.yaml `lab_code: forbid:` entry: a dotted name the handout forbids (in these files)."""

    names: tuple[str, ...]
    files: tuple[str, ...] = ()
    why: str = ""


@dataclass
class Policy:
    imports: list[ExtraImport] = field(default_factory=list)
    forbid: list[Forbid] = field(default_factory=list)
    grader_modules: frozenset[str] = frozenset({"adapter"})  # never importable by name
    unpickle_files: tuple[str, ...] = ()  # `unpickle: {files, why}`: given code that loads full pickles
    enabled: bool = True  # `check: false`: only the engine's own test fixtures (they probe the OS wall alone)
    helper_modules: frozenset[str] = frozenset()  # lab.yaml learner_side: grader helpers the handout's code imports

    @classmethod
    def from_config(cls, data: Optional[dict], helper_modules: Iterable[str] = ()) -> "Policy":
        data = data or {}
        imports = [
            ExtraImport(
                module=str(e["module"]),
                files=tuple(e.get("files") or ()),
                attributes=None if e.get("attributes") is None else tuple(e["attributes"]),
                why=str(e.get("why", "")),
            )
            for e in data.get("imports") or ()
        ]
        forbid = [
            Forbid(names=tuple(f["names"]), files=tuple(f.get("files") or ()), why=str(f.get("why", "")))
            for f in data.get("forbid") or ()
        ]
        unpickle = tuple((data.get("unpickle") or {}).get("files") or ())
        return cls(
            imports,
            forbid,
            helper_modules=frozenset(helper_modules),
            unpickle_files=unpickle,
            enabled=data.get("check", True) is not False,
        )


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
        reach = [rel for rel in trees if _applies(entry.files, rel)]
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


# --------------------------------------------------------------------- Python


def _applies(files: tuple[str, ...], rel: str) -> bool:
    return not files or rel in files or os.path.basename(rel) in files


class _Visitor(ast.NodeVisitor):
    def __init__(self, rel: str, policy: Policy, own: set[str]) -> None:
        self.rel, self.policy, self.own = rel, policy, own
        self.problem: Optional[str] = None
        self.extras = [e for e in policy.imports if _applies(e.files, rel)]
        self.forbidden = [f for f in policy.forbid if _applies(f.files, rel)]
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
        waived = bool(self.policy.unpickle_files) and _applies(self.policy.unpickle_files, self.rel)
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
            for pattern, why in _CPP_REFUSED:
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


def runtime_refusal(name) -> Optional[str]:
    """Why an attribute named at run time (getattr(x, name), setattr, delattr, hasattr) is refused, or None."""
    if not isinstance(name, str):
        return None
    if name in REFUSED_ATTRIBUTES:
        return f"used the attribute {name}: {REFUSED_ATTRIBUTES[name]}"
    if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS:
        return f"used the attribute {name}: it reaches the interpreter's internals (functions' globals, other classes)"
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


# ----------------------------------------------------------------------- C++


def strip_cpp(text: str) -> str:
    """The source without comments and string/char literals (so a comment naming dlopen is no problem)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, end))  # keep line numbers
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_cpp(rel: str, text: str) -> Optional[str]:
    stripped = strip_cpp(text)
    for pattern, why in _CPP_REFUSED:
        match = pattern.search(stripped)
        if match:
            line = stripped.count("\n", 0, match.start()) + 1
            return f"{rel}:{line}: {match.group(0).strip()} is not allowed in lab code: {why}"
    return None


def stdlib_names() -> frozenset[str]:
    return frozenset(getattr(sys, "stdlib_module_names", ()))
