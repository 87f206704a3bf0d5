"""Build and load the CUDA C kernels next to this file (vector_add.cu,
matmul.cu) with torch.utils.cpp_extension.load_inline.

You do not need to edit this file: write the kernels in the .cu files.
Each extension's name carries a hash of its source, so editing a .cu file
builds a fresh extension (the first build takes a minute: nvcc is slow) and
a stale one is never reused. Needs a CUDA GPU and nvcc (CUDA toolkit).

    ext = load_matmul()
    c = ext.matmul_tiled(a, b)      # a, b: float32 CUDA tensors
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

# C++ declarations of the host functions in the .cu files; load_inline writes
# the Python bindings for the names listed in `functions` from these.
_VECTOR_ADD_DECLARATIONS = "torch::Tensor vector_add(torch::Tensor x, torch::Tensor y);"
_MATMUL_DECLARATIONS = """
torch::Tensor matmul_naive(torch::Tensor a, torch::Tensor b);
torch::Tensor matmul_tiled(torch::Tensor a, torch::Tensor b);
"""


@functools.lru_cache(maxsize=None)
def _build(stem: str, declarations: str, functions: tuple[str, ...]):
    import torch
    from torch.utils.cpp_extension import load_inline

    if not torch.cuda.is_available():
        raise RuntimeError("the CUDA kernels need a CUDA GPU (and nvcc); none is available here")
    source = (HERE / f"{stem}.cu").read_text(encoding="utf-8")
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return load_inline(
        name=f"roadmap_{stem}_{digest}",
        cpp_sources=declarations,
        cuda_sources=source,
        functions=list(functions),
        extra_cuda_cflags=["-O3"],
        verbose=False,
    )


def load_vector_add():
    """The compiled vector_add.cu: module with `vector_add(x, y)`."""
    return _build("vector_add", _VECTOR_ADD_DECLARATIONS, ("vector_add",))


def load_matmul():
    """The compiled matmul.cu: module with `matmul_naive(a, b)` and `matmul_tiled(a, b)`."""
    return _build("matmul", _MATMUL_DECLARATIONS, ("matmul_naive", "matmul_tiled"))


def vector_add(x, y):
    return load_vector_add().vector_add(x, y)


def matmul_naive(a, b):
    return load_matmul().matmul_naive(a, b)


def matmul_tiled(a, b):
    return load_matmul().matmul_tiled(a, b)
