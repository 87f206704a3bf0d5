"""The lab-code check of C/C++/CUDA sources (load_inline, cpp_extension builds): compiled into the learner
process, the Python C-API's import/eval/globals and pybind11's, or loading another library, reach the
process as Python code would. The Python check (labcode_python.py) applies the same patterns to string
constants, where load_inline sources live.

Stdlib only: it runs in the learner process, behind the OS wall.
"""

from __future__ import annotations

import re
from typing import Optional

# Learner C/C++/CUDA (load_inline, cpp_extension builds) compiled into the learner process: the Python C-API's
# import/eval/globals and pybind11's, or loading another library, reach the process as Python code would.
CPP_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp")
CPP_REFUSED = [
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
    for pattern, why in CPP_REFUSED:
        match = pattern.search(stripped)
        if match:
            line = stripped.count("\n", 0, match.start()) + 1
            return f"{rel}:{line}: {match.group(0).strip()} is not allowed in lab code: {why}"
    return None
