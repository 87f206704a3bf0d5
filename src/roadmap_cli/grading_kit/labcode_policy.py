"""What lab code may do: the default allow-lists and refusals of the lab-code check (labcode.py), and
lab.yaml's `lab_code:` (imports a lab adds, names its handout forbids, given code that unpickles) as a
Policy. The Python check (labcode_python.py) applies it to source; `runtime_refusal` applies the
attribute rules to a name learner code computes at run time (_learner_main.py `_guarded_builtins`).

Stdlib only: it is imported in the learner process, behind the OS wall.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Optional

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


def applies(files: tuple[str, ...], rel: str) -> bool:
    """Whether an entry naming `files` (none: every file) covers the workspace file `rel`."""
    return not files or rel in files or os.path.basename(rel) in files


def runtime_refusal(name) -> Optional[str]:
    """Why an attribute named at run time (getattr(x, name), setattr, delattr, hasattr) is refused, or None."""
    if not isinstance(name, str):
        return None
    if name in REFUSED_ATTRIBUTES:
        return f"used the attribute {name}: {REFUSED_ATTRIBUTES[name]}"
    if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS:
        return f"used the attribute {name}: it reaches the interpreter's internals (functions' globals, other classes)"
    return None
