"""Part 3: pattern fusion. A chain matmul -> add (bias) -> exact GELU becomes ONE node.

On a GPU a fused node is one kernel: the matmul's output tile gets its bias
and GELU while it is still in registers, instead of three kernels that each
write and re-read the whole activation. Here the fused node is a call of
`fused_linear_gelu`, which a backend would lower to such a kernel.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F


def fused_linear_gelu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """gelu(x @ w + b), exact (erf) GELU. x: (..., K), w: (K, N), b: broadcastable to (..., N).
    Note w is (K, N) as in the matmul it replaces, not nn.Linear's (N, K)."""
    raise NotImplementedError("fused_linear_gelu: see README.md, section \"Part 3: fusing matmul + bias + GELU\"")


def fuse_linear_gelu(gm: fx.GraphModule) -> fx.GraphModule:
    """Replace every chain  m = matmul(x, w);  a = add(m, b) or add(b, m);  g = gelu(a)  (exact GELU: no
    `approximate` or approximate="none"), where m's only user is a and a's only user is g, by one node
    call_function(fused_linear_gelu, (x, w, b)). Other chains are left alone. In place; lint, recompile,
    return gm."""
    raise NotImplementedError("fuse_linear_gelu: see README.md, section \"Part 3: fusing matmul + bias + GELU\"")
